//! Who may read and write which space: bearer tokens, each granting every space or a list of
//! them, parsed from `finder serve --token-file`.
//!
//! A request whose token does not grant the space it names is answered exactly as if the
//! space did not exist, and `/v1/spaces` lists only granted spaces, so a token holder cannot
//! learn which other spaces the server holds.

use std::collections::BTreeSet;
use std::fmt;

use axum::http::{header, HeaderMap};

use crate::error::{Result, ServerError};

/// The spaces one token may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grants {
    /// Every served space (`TOKEN *`, or a file holding one bare token), and `/metrics`.
    All,
    /// Only these spaces.
    Spaces(BTreeSet<String>),
}

impl Grants {
    /// A grant of the named spaces.
    pub fn spaces<I, S>(names: I) -> Grants
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Grants::Spaces(names.into_iter().map(Into::into).collect())
    }

    /// Whether the space `name` is granted.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Grants::All => true,
            Grants::Spaces(names) => names.contains(name),
        }
    }

    /// Whether every one of `served` is granted.
    pub fn covers<'a>(&self, mut served: impl Iterator<Item = &'a str>) -> bool {
        served.all(|name| self.allows(name))
    }
}

/// The server's tokens and what each grants. With no token every request may use every
/// space (the server refuses to listen beyond loopback then, see `check_bind`).
#[derive(Clone, Default)]
pub struct Access {
    tokens: Vec<(String, Grants)>,
}

impl Access {
    /// No token: every space is open to every request.
    pub fn open() -> Access {
        Access::default()
    }

    /// One token that grants every space.
    pub fn token(token: impl Into<String>) -> Access {
        Access::open().with(token, Grants::All)
    }

    /// Adds `token` with its grants.
    ///
    /// # Panics
    /// When `token` is empty or holds whitespace: an empty token would match an empty
    /// `Authorization: Bearer` header, and a token with spaces cannot be written in a token
    /// file.
    pub fn with(mut self, token: impl Into<String>, grants: Grants) -> Access {
        let token = token.into();
        assert!(
            !token.is_empty() && !token.chars().any(char::is_whitespace),
            "a token must be non-empty and without whitespace"
        );
        self.tokens.push((token, grants));
        self
    }

    /// Whether requests need a token.
    pub fn is_guarded(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Reads a token file (see `parse`). `served` are the names of the served spaces.
    pub fn from_file(path: &std::path::Path, served: &[String]) -> Result<Access> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ServerError::invalid(format!("reading the token file {}: {e}", path.display()))
        })?;
        Access::parse(&text, &path.display().to_string(), served)
    }

    /// Parses a token file. Blank lines and lines starting with `#` are skipped. A file whose
    /// only line is one bare token grants that token every space; otherwise each line is
    /// `TOKEN SPACE[,SPACE...]` or `TOKEN *`. `origin` names the file in errors (`file:line`);
    /// a grant of a space that is not in `served` is refused, as is a token given twice.
    pub fn parse(text: &str, origin: &str, served: &[String]) -> Result<Access> {
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .map(|(i, line)| (i + 1, line.trim()))
            .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
            .collect();
        let bad = |n: usize, why: String| ServerError::invalid(format!("{origin}:{n}: {why}"));
        const EXPECTED: &str = "expected `TOKEN SPACE[,SPACE...]` or `TOKEN *` (or a file holding one bare token, which grants every space)";
        if let [(_, line)] = lines.as_slice() {
            if !line.contains(char::is_whitespace) {
                return Ok(Access::token(*line));
            }
        }
        if lines.is_empty() {
            return Err(ServerError::invalid(format!(
                "{origin}: the token file holds no token; {EXPECTED}"
            )));
        }
        let mut access = Access::open();
        let mut first_line: Vec<usize> = Vec::new();
        for (n, line) in lines {
            let Some((token, rest)) = line.split_once(char::is_whitespace) else {
                return Err(bad(
                    n,
                    format!("a bare token is allowed only as the file's single line; {EXPECTED}"),
                ));
            };
            if let Some(i) = access.tokens.iter().position(|(t, _)| t == token) {
                return Err(bad(
                    n,
                    format!("this token is already given on line {}", first_line[i]),
                ));
            }
            let rest = rest.trim();
            let grants = if rest == "*" {
                Grants::All
            } else {
                let mut names = BTreeSet::new();
                for name in rest.split(',').map(str::trim) {
                    if name.is_empty() || name.contains(char::is_whitespace) || name == "*" {
                        return Err(bad(
                            n,
                            format!("`{rest}` is not a comma-separated list of spaces; {EXPECTED}"),
                        ));
                    }
                    if !served.iter().any(|s| s == name) {
                        return Err(bad(
                            n,
                            format!(
                                "grants the space `{name}`, which is not served (served: {})",
                                served.join(", ")
                            ),
                        ));
                    }
                    names.insert(name.to_string());
                }
                Grants::Spaces(names)
            };
            access.tokens.push((token.to_string(), grants));
            first_line.push(n);
        }
        Ok(access)
    }

    /// What the request's bearer token grants: `Some(Grants::All)` when no token is needed,
    /// `None` when the token is missing or matches none. Every token is compared in full, so
    /// the time taken says nothing about which one (if any) matched.
    pub(crate) fn grants_for(&self, headers: &HeaderMap) -> Option<Grants> {
        if !self.is_guarded() {
            return Some(Grants::All);
        }
        let given = bearer(headers)?;
        let mut found = None;
        for (token, grants) in &self.tokens {
            if constant_time_eq(given.as_bytes(), token.as_bytes()) && found.is_none() {
                found = Some(grants.clone());
            }
        }
        found
    }
}

/// Tokens never reach a log: only how many there are and what they grant.
impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.tokens.iter().map(|(_, grants)| grants))
            .finish()
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let given = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?
        .trim();
    (!given.is_empty()).then_some(given)
}

/// Compares without an early exit, so the time taken says nothing about the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Vec<String> {
        vec!["default".into(), "hr".into(), "eng".into()]
    }

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn one_bare_token_grants_every_space() {
        let a = Access::parse("\n  s3cret \n", "t", &served()).unwrap();
        assert_eq!(a.grants_for(&headers("s3cret")), Some(Grants::All));
        assert_eq!(a.grants_for(&headers("s3cre")), None);
        assert_eq!(a.grants_for(&HeaderMap::new()), None);
        let a = Access::parse("# the ops token\ns3cret\n", "t", &served()).unwrap();
        assert_eq!(a.grants_for(&headers("s3cret")), Some(Grants::All));
    }

    #[test]
    fn lines_grant_lists_of_spaces_or_all() {
        let text = "# team tokens\nalpha hr, eng\n\nbeta *\ngamma default\n";
        let a = Access::parse(text, "t", &served()).unwrap();
        assert_eq!(
            a.grants_for(&headers("alpha")),
            Some(Grants::spaces(["eng", "hr"]))
        );
        assert_eq!(a.grants_for(&headers("beta")), Some(Grants::All));
        let g = a.grants_for(&headers("gamma")).unwrap();
        assert!(g.allows("default") && !g.allows("hr"));
        assert_eq!(a.grants_for(&headers("delta")), None);
        assert!(!format!("{a:?}").contains("alpha"), "{a:?}");
    }

    #[test]
    fn bad_lines_name_the_file_line_and_what_was_expected() {
        let cases = [
            ("", "t: the token file holds no token"),
            ("# only a comment\n", "t: the token file holds no token"),
            ("a hr\nb\n", "t:2: a bare token is allowed only"),
            (
                "a hr\n\na eng\n",
                "t:3: this token is already given on line 1",
            ),
            (
                "a hr,,eng\n",
                "t:1: `hr,,eng` is not a comma-separated list",
            ),
            ("a hr eng\n", "t:1: `hr eng` is not a comma-separated list"),
            ("a hr,*\n", "t:1: `hr,*` is not a comma-separated list"),
            (
                "a sales\n",
                "t:1: grants the space `sales`, which is not served",
            ),
        ];
        for (text, expected) in cases {
            let e = Access::parse(text, "t", &served()).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{text:?}: {e}");
        }
        let e = Access::parse("a hr\nb\n", "t", &served())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected `TOKEN SPACE[,SPACE...]` or `TOKEN *`"),
            "{e}"
        );
    }

    #[test]
    fn open_access_grants_everything_without_a_token() {
        assert_eq!(
            Access::open().grants_for(&HeaderMap::new()),
            Some(Grants::All)
        );
        assert!(!Access::open().is_guarded());
    }

    #[test]
    fn comparison_does_not_stop_early() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
