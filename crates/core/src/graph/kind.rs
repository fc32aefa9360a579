//! Relation kinds and the query-time weight each kind carries in the boost.
//!
//! The graph stores a kind as a small integer so the adjacency stays compact; the names live
//! here so storage, settings and explain agree on them.

use serde::{Deserialize, Serialize};

/// How many relation kinds there are, `Other` included. Stored kinds are below this.
pub const KIND_COUNT: usize = 8;

/// What an edge between two nodes means. The boost only uses the kind to look up a weight;
/// the names are for settings and explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum RelationKind {
    /// A fragment names an entity (by title or alias).
    Mentions = 0,
    /// An explicit link from one source to another.
    LinksTo = 1,
    /// A fragment or source carries a tag.
    Tagged = 2,
    /// Reading order: a fragment and the one after it.
    Next = 3,
    /// A typed statement: an entity is an instance of another.
    Is = 4,
    /// Membership in a collection or group.
    MemberOf = 5,
    /// A loose, untyped relation.
    Relates = 6,
    /// Anything else; stored kinds at or above [`KIND_COUNT`] fold into this one.
    Other = 7,
}

impl RelationKind {
    /// Every kind, in the order of its integer value.
    pub const ALL: [RelationKind; KIND_COUNT] = [
        RelationKind::Mentions,
        RelationKind::LinksTo,
        RelationKind::Tagged,
        RelationKind::Next,
        RelationKind::Is,
        RelationKind::MemberOf,
        RelationKind::Relates,
        RelationKind::Other,
    ];

    /// The name used in settings and explain (`"mentions"`, `"links_to"`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            RelationKind::Mentions => "mentions",
            RelationKind::LinksTo => "links_to",
            RelationKind::Tagged => "tagged",
            RelationKind::Next => "next",
            RelationKind::Is => "is",
            RelationKind::MemberOf => "member_of",
            RelationKind::Relates => "relates",
            RelationKind::Other => "other",
        }
    }

    /// The kind with this name, or `None` for a name that is not one of [`RelationKind::ALL`].
    /// Callers decide whether an unknown name is an error or [`RelationKind::Other`].
    pub fn parse(name: &str) -> Option<RelationKind> {
        RelationKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The integer stored in the graph.
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The kind stored as `value`; values without a name become [`RelationKind::Other`].
    pub const fn from_u8(value: u8) -> RelationKind {
        match value {
            0 => RelationKind::Mentions,
            1 => RelationKind::LinksTo,
            2 => RelationKind::Tagged,
            3 => RelationKind::Next,
            4 => RelationKind::Is,
            5 => RelationKind::MemberOf,
            6 => RelationKind::Relates,
            _ => RelationKind::Other,
        }
    }
}

impl From<RelationKind> for u8 {
    fn from(kind: RelationKind) -> u8 {
        kind.as_u8()
    }
}

impl std::fmt::Display for RelationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The weight of each relation kind, indexed by its integer value; a query-time setting.
///
/// Weights scale edges before the transition is row-normalised, so only their ratios at a node
/// matter. Weight 0 removes every edge of that kind; a negative or non-finite weight counts as
/// 0. The default is 1.0 for every kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindWeights([f64; KIND_COUNT]);

impl KindWeights {
    /// Weights from an array indexed by [`RelationKind::as_u8`].
    pub const fn new(weights: [f64; KIND_COUNT]) -> KindWeights {
        KindWeights(weights)
    }

    /// The same weight for every kind.
    pub const fn uniform(weight: f64) -> KindWeights {
        KindWeights([weight; KIND_COUNT])
    }

    /// The weight of `kind` as given (not yet sanitised).
    pub fn get(&self, kind: RelationKind) -> f64 {
        self.0[kind as usize]
    }

    /// Sets the weight of `kind`.
    pub fn set(&mut self, kind: RelationKind, weight: f64) {
        self.0[kind as usize] = weight;
    }

    /// These weights with `kind` set to `weight`.
    pub fn with(mut self, kind: RelationKind, weight: f64) -> KindWeights {
        self.set(kind, weight);
        self
    }

    /// The weights indexed by [`RelationKind::as_u8`].
    pub fn as_array(&self) -> &[f64; KIND_COUNT] {
        &self.0
    }

    /// The weight of every possible stored byte: named kinds get their weight, everything else
    /// gets `Other`'s; unusable weights become 0. A 256-entry table lets the hot loop index by
    /// the stored byte without a bounds check.
    pub(crate) fn byte_table(&self) -> [f64; 256] {
        let mut table = [0.0; 256];
        for (byte, slot) in table.iter_mut().enumerate() {
            let w = self.get(RelationKind::from_u8(byte as u8));
            *slot = if w.is_finite() && w > 0.0 { w } else { 0.0 };
        }
        table
    }
}

impl Default for KindWeights {
    fn default() -> KindWeights {
        KindWeights::uniform(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in RelationKind::ALL {
            assert_eq!(RelationKind::parse(kind.as_str()), Some(kind));
            assert_eq!(RelationKind::from_u8(kind.as_u8()), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(RelationKind::parse("cites"), None);
        assert_eq!(RelationKind::from_u8(200), RelationKind::Other);
    }

    #[test]
    fn byte_table_sanitises_and_folds_unknown_bytes() {
        let w = KindWeights::default()
            .with(RelationKind::Next, -1.0)
            .with(RelationKind::Tagged, f64::NAN)
            .with(RelationKind::Other, 0.5);
        let t = w.byte_table();
        assert_eq!(t[RelationKind::Mentions as usize], 1.0);
        assert_eq!(t[RelationKind::Next as usize], 0.0);
        assert_eq!(t[RelationKind::Tagged as usize], 0.0);
        assert_eq!(t[7], 0.5);
        assert_eq!(t[255], 0.5);
    }
}
