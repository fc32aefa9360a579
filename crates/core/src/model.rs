//! The data model shared by every crate: keys, channels, ranked lists, extents, envelopes
//! and the query. What a search returns is in `response.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Stable 64-bit key of a fragment, derived from its source id and ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FragmentKey(pub u64);

/// Stable 64-bit key of a source, derived from its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceKey(pub u64);

/// A candidate channel. The set is closed: each variant is produced by one storage component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Channel {
    /// BM25 over stemmed fragment text (and the trigram channel's expansions).
    Lexical,
    /// Partial words and identifiers expanded, through the trigrams of the index's whole
    /// words, into the words that hold them; scored in the lexical list, not a list of its own.
    Trigram,
    /// Nearest neighbours over fragment vectors.
    Vector,
    /// Fragments that are what the query names (titles, aliases, entity names).
    Entities,
    /// One hop along the graph from the best fused fragments.
    Neighbours,
    /// Members of the hubs (tags, typed groups) the best fused fragments belong to.
    Communities,
    /// Recommend: the fragments of the source recommended from.
    Like,
    /// The fused candidates weighted by the age of their source's date.
    Events,
}

impl Channel {
    pub fn name(self) -> &'static str {
        match self {
            Channel::Lexical => "lexical",
            Channel::Trigram => "trigram",
            Channel::Vector => "vector",
            Channel::Entities => "entities",
            Channel::Neighbours => "neighbours",
            Channel::Communities => "communities",
            Channel::Like => "like",
            Channel::Events => "events",
        }
    }
}

/// One fragment with the score its channel gave it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScoredFragment {
    pub fragment: FragmentKey,
    pub score: f32,
}

/// A best-first list produced by one channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedList {
    pub channel: Channel,
    pub hits: Vec<ScoredFragment>,
    /// How much the list counts in fusion, `0..=1`: each hit's share is multiplied by it. 1 for
    /// every channel that ranks the corpus itself; a list derived from the graph can count less
    /// when the graph knows little about the query (see [`crate::graph::neighbour_list`]).
    #[serde(default = "full_weight")]
    pub weight: f64,
}

fn full_weight() -> f64 {
    1.0
}

impl RankedList {
    /// A list that counts fully in fusion.
    pub fn new(channel: Channel, hits: Vec<ScoredFragment>) -> RankedList {
        RankedList {
            channel,
            hits,
            weight: 1.0,
        }
    }
}

/// Where a fragment lies in its source file: bytes `[byte_start, byte_end)` and lines
/// `line_start..=line_end` (one-based). For a document read into text first (HTML, DOCX,
/// Org, PDF) they count in that text, and a PDF's passages name their page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Extent {
    pub byte_start: u64,
    pub byte_end: u64,
    pub line_start: u32,
    pub line_end: u32,
    /// The page (one-based) of a PDF passage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

/// What a client sees of a source besides its text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Envelope {
    pub title: String,
    /// Relative path for files, record id for records.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extras: BTreeMap<String, String>,
}

/// What a caller asks for: words and/or a vector, a page, and what narrows the answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Query {
    /// The query text (may be empty when a vector or `like` seeds the search).
    pub text: String,
    /// The query's vector, given instead of embedding `text`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector: Option<Vec<f32>>,
    pub offset: usize,
    pub limit: usize,
    /// `extras` equality filters: case-insensitive, all must hold.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub filters: BTreeMap<String, String>,
    /// Only these source ids take part (every channel is restricted before ranking).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<String>>,
    /// Only sources carrying every one of these tags (in any case). Like `filters`, applied
    /// late unless `refine.prefilter` is on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Only sources dated on or after this (Unix seconds); undated sources are left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date_from: Option<i64>,
    /// Only sources dated on or before this (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date_to: Option<i64>,
    /// Only sources whose path starts with this (a folder such as `journal/2024/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Personalise for this user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Recommend: sources related to this source id, with no query text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub like: Option<String>,
}

impl Query {
    /// A text query for hits `offset..offset+limit`.
    pub fn text(text: impl Into<String>, offset: usize, limit: usize) -> Query {
        Query {
            text: text.into(),
            offset,
            limit,
            ..Query::default()
        }
    }
}
