//! Reading a source back: its stored passages in order, numbered by the lines of the file or
//! record they came from. What `finder get`, the API's `?lines=` and the MCP `get` tool show,
//! so a reader can go exactly where a hint points.

use std::collections::BTreeMap;

use finder_core::{Extent, SourceView};
use tantivy::collector::DocSetCollector;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::Term;

use crate::error::{IndexError, Result};
use crate::record::FragmentRecord;
use crate::store_error;

use super::Finder;

/// A source as the index holds it.
#[derive(Debug, Clone)]
pub struct SourceText {
    pub view: SourceView,
    /// The fragments in source order.
    pub passages: Vec<Passage>,
}

/// One fragment's text, exactly as in the source, and where it came from.
#[derive(Debug, Clone)]
pub struct Passage {
    pub extent: Extent,
    pub heading: Option<String>,
    pub text: String,
}

impl SourceText {
    /// The indexed lines by their one-based number in the source. Lines no fragment holds
    /// (front matter, blank runs between sections) are absent.
    pub fn lines(&self) -> BTreeMap<u32, &str> {
        let mut lines = BTreeMap::new();
        for passage in &self.passages {
            let text = passage.text.strip_suffix('\n').unwrap_or(&passage.text);
            for (at, line) in text.split('\n').enumerate() {
                let n = passage.extent.line_start + at as u32;
                lines
                    .entry(n)
                    .or_insert(line.strip_suffix('\r').unwrap_or(line));
            }
        }
        lines
    }
}

impl Finder {
    /// The source `id` with its passages, `None` when the index does not hold it.
    pub fn source_text(&self, id: &str) -> Result<Option<SourceText>> {
        let err = |e| store_error(&self.dir, e);
        let searcher = self.reader.searcher();
        let term = Term::from_field_u64(self.fields.source_key, crate::keys::source_key(id).0);
        let docs = searcher
            .search(
                &TermQuery::new(term, IndexRecordOption::Basic),
                &DocSetCollector,
            )
            .map_err(err)?;
        let mut view = None;
        let mut passages = Vec::with_capacity(docs.len());
        for address in docs {
            let head = crate::stored::read_head(&searcher, self.fields, address).map_err(err)?;
            // Two ids could share a key; the stored id settles it.
            if head.source_id != id {
                continue;
            }
            let record: FragmentRecord =
                serde_json::from_str(&head.meta).map_err(|e| IndexError::Corrupt {
                    path: self.dir.clone(),
                    reason: format!("fragment record of `{id}`: {e}"),
                })?;
            if let Some(source) = record.source {
                view = Some(SourceView {
                    id: source.id,
                    envelope: source.envelope,
                    summary: source.summary,
                });
            }
            passages.push((
                head.ordinal,
                Passage {
                    extent: record.extent,
                    heading: record.heading,
                    text: head.body,
                },
            ));
        }
        let Some(view) = view else {
            return Ok(None);
        };
        passages.sort_by_key(|(ordinal, _)| *ordinal);
        Ok(Some(SourceText {
            view,
            passages: passages.into_iter().map(|(_, p)| p).collect(),
        }))
    }
}
