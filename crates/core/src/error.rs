//! Errors of the core: settings that fail to parse or validate.

use std::fmt;

/// A setting that was rejected, with the key it concerns.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: {}{kind}", if key.is_empty() { String::new() } else { format!("`{key}`: ") })]
pub struct SettingsError {
    /// Where the value came from: a file path (with line when known) or `--set`.
    pub origin: String,
    /// The dotted key, e.g. `lexical.k1`.
    pub key: String,
    pub kind: SettingsErrorKind,
}

/// Why a setting was rejected.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingsErrorKind {
    /// The key does not exist; `suggestion` is the nearest valid key.
    UnknownKey { suggestion: Option<String> },
    /// The value is outside its allowed range.
    OutOfRange { value: String, range: String },
    /// The value has the wrong type or shape.
    Invalid { value: String, expected: String },
    /// The text is not valid TOML.
    Syntax { message: String },
}

impl fmt::Display for SettingsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsErrorKind::UnknownKey {
                suggestion: Some(s),
            } => {
                write!(f, "unknown setting; did you mean `{s}`?")
            }
            SettingsErrorKind::UnknownKey { suggestion: None } => write!(f, "unknown setting"),
            SettingsErrorKind::OutOfRange { value, range } => {
                write!(f, "value {value} is out of range; allowed: {range}")
            }
            SettingsErrorKind::Invalid { value, expected } => {
                write!(f, "invalid value {value}; expected {expected}")
            }
            SettingsErrorKind::Syntax { message } => write!(f, "{message}"),
        }
    }
}
