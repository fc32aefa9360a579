//! The graph layer's text extraction: the links, tags and entity mentions a note or fragment
//! holds. Pure functions over text; the writer turns what they find into edges.
//!
//! - [`links`]: `[[wiki-links]]` in either label order, with headings, block anchors and
//!   embeds, and Markdown links to local notes; [`normalize_target`] and [`LinkResolver`]
//!   turn targets into notes.
//! - [`tags`]: `#tags` in text and front-matter tag values, normalised alike.
//! - [`MentionMatcher`]: whole-word, accent- and case-insensitive mentions of entity names
//!   and aliases, with the filters (length, stop words, document frequency) that keep
//!   mention edges meaningful, and the reasons for every alias dropped.
//!
//! Code (fenced blocks and inline spans, see [`code_ranges`]) never holds links or tags.

mod build;
mod code;
mod links;
mod mentions;
mod parts;
mod stop_words;
mod store;
mod tags;

pub use build::{
    build_graph, build_key, key_freshness, EntityKind, FragmentTexts, GraphData, GraphFragment,
    GraphParts, GraphReport, GraphSource, LoadedGraph,
};
pub(crate) use build::{build_graph_from, graph_freshness, graph_is_current, GRAPH_DIR};
pub use code::code_ranges;
pub use links::{
    links, markdown_links, normalize_target, wiki_links, Link, LinkResolver, LinkStyle, LinkSyntax,
};
pub use mentions::{
    fold, DfCounts, DropReason, DroppedAlias, EntityCount, Hit, Mention, MentionBuildError,
    MentionConfig, MentionMatcher, Renumbered, DEFAULT_ALIAS_DF_FLOOR, DEFAULT_MAX_ALIAS_DF,
    DEFAULT_MIN_ALIAS_CHARS,
};
pub(crate) use parts::Parts;
pub(crate) use store::GraphIndex;
pub use tags::{normalize_tag, normalize_tags, tags, Tag};
