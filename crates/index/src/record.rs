//! What is stored beside each fragment (its extent and heading) and, on a source's first
//! fragment, the source record; and the commit payload that describes the whole index.

use finder_core::{Envelope, Extent, IndexSettings};
use serde::{Deserialize, Serialize};

/// Stored on ordinal 0 of every source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SourceRecord {
    pub id: String,
    pub origin: String,
    pub hash: String,
    pub envelope: Envelope,
    pub summary: String,
    pub fragments: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entity: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relations: Vec<(String, String)>,
    /// The language of the source's Latin words, when detected as other than English under
    /// `index.language = "auto"` ([`crate::analyzer::source_language`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// The `meta` field of a fragment document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FragmentRecord {
    pub extent: Extent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceRecord>,
}

/// What a query shows of a stored fragment record: its extent and, on a source's first
/// fragment, the source's id, envelope and summary. Read from the same JSON as
/// [`FragmentRecord`]; the fields a page does not show (hash, origin, aliases, relations)
/// are skipped without being built.
#[derive(Debug, Deserialize)]
pub(crate) struct PageRecord {
    pub extent: Extent,
    #[serde(default)]
    pub source: Option<PageSource>,
}

/// The part of a [`SourceRecord`] a hit shows.
#[derive(Debug, Deserialize)]
pub(crate) struct PageSource {
    pub id: String,
    pub envelope: Envelope,
    pub summary: String,
}

/// Counts of one indexing run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    pub added: u64,
    pub updated: u64,
    pub removed: u64,
    pub unchanged: u64,
    /// Sources whose input failed this run; their indexed version was kept.
    pub kept: u64,
    pub problems: u64,
}

/// Written atomically with every commit (tantivy's commit payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub format: u32,
    /// The word analysis the index was written with ([`crate::analyzer::ANALYSIS`]); 1 for
    /// an index written before it was recorded.
    #[serde(default = "first_analysis")]
    pub analysis: u32,
    pub settings: IndexSettings,
    pub sources: u64,
    pub fragments: u64,
    /// Inputs (origins) indexed so far.
    pub origins: Vec<String>,
    pub last_run: RunCounts,
    /// Seconds since the Unix epoch.
    pub committed_at: u64,
    /// Counts the commits that changed what the index holds (a run that changed nothing
    /// keeps it): derived layers (the graph) record the generation they were built from, so
    /// a run killed between the commit and their rebuild is caught by the next run.
    #[serde(default)]
    pub generation: u64,
    /// Sources with a date (`None`: an index written before this was counted).
    #[serde(default)]
    pub dated: Option<u64>,
    /// The languages detected for some source (besides the index's own): queries are
    /// analysed in each of them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
}

/// The layout of an index. 2: Finder's own postings from the index's creation, an uncompressed
/// document store written by the indexing threads, the fragment key a column only. An index of
/// an earlier format is refused by queries and rebuilt from nothing by the next indexing run.
pub(crate) const FORMAT: u32 = 2;

fn first_analysis() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stored(source: Option<SourceRecord>) -> String {
        serde_json::to_string(&FragmentRecord {
            extent: Extent {
                byte_start: 10,
                byte_end: 90,
                line_start: 2,
                line_end: 4,
                page: None,
            },
            heading: Some("Methods".into()),
            source,
        })
        .unwrap()
    }

    /// A page reads what the writer stored, whichever of the fields it skips are present.
    #[test]
    fn a_page_record_reads_the_stored_record_it_shows() {
        let source = SourceRecord {
            id: "notes/a.md".into(),
            origin: "notes".into(),
            hash: "ab12".into(),
            envelope: Envelope {
                title: "A \"quoted\" title".into(),
                path: "notes/a.md".into(),
                date: Some("2026-01-02".into()),
                tags: vec!["x".into(), "y".into()],
                extras: BTreeMap::from([("lang".into(), "en".into())]),
            },
            summary: "First line.\nSecond.".into(),
            fragments: 3,
            entity: true,
            aliases: vec!["A".into()],
            relations: vec![("links".into(), "notes/b.md".into())],
            language: Some("german".into()),
        };
        let page: PageRecord = serde_json::from_str(&stored(Some(source.clone()))).unwrap();
        assert_eq!(page.extent.byte_start, 10);
        assert_eq!(page.extent.line_end, 4);
        let shown = page.source.expect("the source part");
        assert_eq!(shown.id, source.id);
        assert_eq!(shown.envelope, source.envelope);
        assert_eq!(shown.summary, source.summary);

        let later: PageRecord = serde_json::from_str(&stored(None)).unwrap();
        assert!(later.source.is_none());
        assert_eq!(later.extent.byte_end, 90);
    }
}
