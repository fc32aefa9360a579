//! Merging segments' postings files into the merged segment's, as tantivy merges the segments:
//! the source segments stacked in order, their deleted documents left out.

use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentComponent;
use tantivy::indexer::doc_id_mapping::MappingType;
use tantivy::{DocId, PluginMergeContext, SegmentReader, TantivyError};

use crate::files::POSTINGS_EXTENSION;

use super::format::{finish_file, Counting, SectionWriter};
use super::read::{FieldPostings, PostingsFile, TermEntry};
use super::{corrupt, fields_of};

/// Writes the merged segment's postings file from the source segments' files.
pub(super) fn merge(ctx: PluginMergeContext) -> tantivy::Result<()> {
    if ctx.doc_id_mapping.mapping_type() == MappingType::Shuffled {
        return Err(TantivyError::InvalidArgument(
            "Finder's postings cannot merge a sorted index".into(),
        ));
    }
    // The merged segment stacks the source segments in order, their deleted documents
    // left out (tantivy's mapping for an index without a sort order).
    let mut new_ids: Vec<Vec<DocId>> = Vec::with_capacity(ctx.readers.len());
    let mut next: DocId = 0;
    for reader in ctx.readers {
        let mut ids = vec![DocId::MAX; reader.max_doc() as usize];
        for doc in reader.doc_ids_alive() {
            ids[doc as usize] = next;
            next += 1;
        }
        new_ids.push(ids);
    }
    let files = ctx
        .readers
        .iter()
        .map(|reader| {
            PostingsFile::open(reader)?.ok_or_else(|| {
                corrupt(format!(
                    "segment {} has none",
                    reader.segment_id().uuid_string()
                ))
            })
        })
        .collect::<tantivy::Result<Vec<PostingsFile>>>()?;
    let write = ctx
        .target_segment
        .open_write(SegmentComponent::Custom(POSTINGS_EXTENSION.into()))?;
    let mut out = Counting::new(write);
    let mut directory = Vec::new();
    let has_deletes = ctx.readers.iter().any(SegmentReader::has_deletes);
    for (_, field) in fields_of(ctx.schema) {
        let sections: Vec<Option<FieldPostings<'_>>> =
            files.iter().map(|file| file.field(field)).collect();
        let mut norms = vec![0u8; next as usize];
        let mut total_tokens = 0u64;
        for ((section, ids), reader) in sections.iter().zip(&new_ids).zip(ctx.readers) {
            let Some(section) = section else { continue };
            for (old, &new) in ids.iter().enumerate() {
                if new != DocId::MAX {
                    norms[new as usize] = section.norm_id(old as DocId);
                }
            }
            // As tantivy counts a merged field's tokens: the sum of the segments' totals
            // when nothing was deleted, else the live documents' coded lengths.
            if has_deletes {
                total_tokens += reader
                    .doc_ids_alive()
                    .map(|doc| u64::from(FieldNormReader::id_to_fieldnorm(section.norm_id(doc))))
                    .sum::<u64>();
            } else {
                total_tokens += section.total_tokens();
            }
        }
        // Every segment's terms, sorted; equal terms next to each other, in segment order.
        let mut all: Vec<(&[u8], usize, TermEntry)> = Vec::new();
        for (i, section) in sections.iter().enumerate() {
            if let Some(section) = section {
                for t in 0..section.term_count() {
                    all.push((section.term_bytes(t), i, section.entry(t)));
                }
            }
        }
        all.sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
        let mut section = SectionWriter::new(field, &mut out);
        let (mut docs, mut tfs) = (Vec::new(), Vec::new());
        for group in all.chunk_by(|a, b| a.0 == b.0) {
            docs.clear();
            tfs.clear();
            for &(_, i, entry) in group {
                let words = sections[i].as_ref().expect("listed from a section");
                let mut blocks = words.postings(entry);
                while !blocks.docs().is_empty() {
                    for (&doc, &tf) in blocks.docs().iter().zip(blocks.freqs()) {
                        let new = new_ids[i][doc as usize];
                        if new != DocId::MAX {
                            docs.push(new);
                            tfs.push(tf);
                        }
                    }
                    blocks.advance();
                }
            }
            if !docs.is_empty() {
                section.term(group[0].0, &docs, &tfs)?;
            }
        }
        directory.push(section.finish(&norms, total_tokens)?);
    }
    finish_file(out, &directory)?;
    Ok(())
}
