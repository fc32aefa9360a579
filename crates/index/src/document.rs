//! What ingestion produces and the store consumes: a source with its envelope, summary,
//! content hash and fragments (each with its extent in the source).

use finder_core::{Envelope, Extent, IndexSettings};

/// One source read from an input, ready to index.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceDoc {
    /// Stable id: the path relative to the input folder (with `/` separators) for files,
    /// the given id for records.
    pub id: String,
    /// The input this source came from (as given on the command line, canonicalised);
    /// a re-index of that input removes its sources that are gone.
    pub origin: String,
    pub envelope: Envelope,
    /// Given by the input, or derived from the lead text (bounded by `summary_max_chars`).
    pub summary: String,
    /// blake3 hex of everything that shapes the indexed form (raw bytes or record JSON).
    pub hash: String,
    pub fragments: Vec<FragmentDoc>,
    /// A vector given with the record (`vector`), used for every fragment of the source when
    /// `embed.backend = "precomputed"`.
    pub vector: Option<Vec<f32>>,
    /// An entity record (`"kind": "entity"`): searchable so queries can name it and seed the
    /// graph, never returned as a hit.
    pub entity: bool,
    /// Other names of the source or entity, matched as mentions.
    pub aliases: Vec<String>,
    /// Declared relations `(to id, kind)` from this source or entity.
    pub relations: Vec<(String, String)>,
}

/// One passage of a source.
#[derive(Debug, Clone, PartialEq)]
pub struct FragmentDoc {
    /// Zero-based position within the source.
    pub ordinal: u32,
    /// Exactly the bytes `extent.byte_start..extent.byte_end` of the source text, for files.
    pub text: String,
    /// Heading path above this fragment ("Install > Linux"), if any.
    pub heading: Option<String>,
    pub extent: Extent,
}

/// The ordinal of the fragment that carries a record's given vector, in every store: the first
/// with text (textless fragments get no vector). A record's vector describes the whole record,
/// so it goes with one fragment: copied onto each, a long record would fill the dense list with
/// copies and gain the rollup's bonus for each.
pub fn vector_home(fragments: &[FragmentDoc]) -> Option<u32> {
    fragments
        .iter()
        .find(|f| !f.text.trim().is_empty())
        .map(|f| f.ordinal)
}

/// The text the lexical fields index for a fragment, in every store: the source's title and
/// the fragment's heading (on the first fragment, or on every one with
/// `index.title_in_fragments`), then the fragment's text.
pub fn indexed_text(title: &str, fragment: &FragmentDoc, settings: &IndexSettings) -> String {
    let mut indexed = String::new();
    if fragment.ordinal == 0 || settings.title_in_fragments {
        indexed.push_str(title);
        indexed.push('\n');
        if let Some(h) = &fragment.heading {
            indexed.push_str(h);
            indexed.push('\n');
        }
    }
    indexed.push_str(&fragment.text);
    indexed
}

/// A piece of input that could not be used, with its place (`file:line`) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `path` or `path:line`.
    pub place: String,
    pub reason: String,
    /// The source id this problem concerns, when known: its indexed version is kept.
    pub source_id: Option<String>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place, self.reason)
    }
}

/// The language of `source`'s Latin words under `index.language = "auto"`, detected from its
/// title and passages when other than English ([`crate::analyzer::source_language`]); `None`
/// for English and under any other setting.
pub fn detected_language(source: &SourceDoc, settings: &IndexSettings) -> Option<&'static str> {
    if settings.language != crate::analyzer::AUTO {
        return None;
    }
    let title = std::iter::once(source.envelope.title.as_str());
    crate::analyzer::source_language(title.chain(source.fragments.iter().map(|f| f.text.as_str())))
}
