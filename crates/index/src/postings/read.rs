//! Reading a segment's postings file: its sections, a term's blocks of postings.

use bitpacking::{BitPacker, BitPacker4x};
use tantivy::directory::OwnedBytes;
use tantivy::index::SegmentComponent;
use tantivy::schema::Field;
use tantivy::{DocId, SegmentReader};

use crate::bytes::{u32_at, u64_at};
use crate::files::POSTINGS_EXTENSION;

use super::corrupt;
use super::format::{get_varint, BLOCK, DIRECTORY_ENTRY, MAGIC};

/// A term's place in its field's section.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TermEntry {
    pub doc_freq: u32,
    pub(super) start: usize,
}

/// A term's postings, a block of up to [`BLOCK`] documents at a time: [`Blocks::docs`] is
/// empty once they are all read.
pub(crate) struct Blocks<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) at: usize,
    pub(super) left: u32,
    pub(super) previous: DocId,
    pub(super) docs: [DocId; BLOCK],
    pub(super) tfs: [u32; BLOCK],
    pub(super) len: usize,
}

impl<'a> Blocks<'a> {
    /// The `doc_freq` postings encoded at `at` in `bytes`, their first block read.
    pub(super) fn new(bytes: &'a [u8], at: usize, doc_freq: u32) -> Blocks<'a> {
        let mut blocks = Blocks {
            bytes,
            at,
            left: doc_freq,
            previous: 0,
            docs: [0; BLOCK],
            tfs: [0; BLOCK],
            len: 0,
        };
        blocks.advance();
        blocks
    }

    pub(crate) fn docs(&self) -> &[DocId] {
        &self.docs[..self.len]
    }

    pub(crate) fn freqs(&self) -> &[u32] {
        &self.tfs[..self.len]
    }

    pub(crate) fn advance(&mut self) {
        if self.left as usize >= BLOCK {
            let packer = BitPacker4x::new();
            let doc_bits = self.bytes[self.at];
            let tf_bits = self.bytes[self.at + 1];
            self.at += 2;
            self.at += packer.decompress_sorted(
                self.previous,
                &self.bytes[self.at..],
                &mut self.docs,
                doc_bits,
            );
            self.at += packer.decompress(&self.bytes[self.at..], &mut self.tfs, tf_bits);
            for tf in &mut self.tfs {
                *tf += 1;
            }
            self.len = BLOCK;
        } else {
            self.len = self.left as usize;
            for i in 0..self.len {
                let doc = self.previous + get_varint(self.bytes, &mut self.at);
                self.docs[i] = doc;
                self.tfs[i] = get_varint(self.bytes, &mut self.at);
                self.previous = doc;
            }
        }
        self.left -= self.len as u32;
        if let Some(&last) = self.docs().last() {
            self.previous = last;
        }
    }
}

/// A segment's postings file, read.
pub(crate) struct PostingsFile {
    pub(super) bytes: OwnedBytes,
    pub(super) sections: Vec<Section>,
}

#[derive(Clone, Copy)]
pub(super) struct Section {
    pub(super) field: Field,
    pub(super) terms: usize,
    pub(super) total_tokens: u64,
    pub(super) norms: usize,
    pub(super) term_bytes: usize,
    pub(super) table: usize,
}

impl PostingsFile {
    /// The postings file of `segment`; `None` when it has none (a segment written before
    /// Finder wrote its own postings).
    pub(crate) fn open(segment: &SegmentReader) -> tantivy::Result<Option<PostingsFile>> {
        let slice = match segment.open_read(SegmentComponent::Custom(POSTINGS_EXTENSION.into())) {
            Ok(slice) => slice,
            Err(tantivy::directory::error::OpenReadError::FileDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let bytes = slice.read_bytes()?;
        PostingsFile::parse(bytes, segment.max_doc()).map(Some)
    }

    pub(super) fn parse(bytes: OwnedBytes, max_doc: u32) -> tantivy::Result<PostingsFile> {
        let b = bytes.as_slice();
        let tail = MAGIC.len() + 4;
        if b.len() < tail || &b[b.len() - MAGIC.len()..] != MAGIC {
            return Err(corrupt("no magic at its end"));
        }
        let count = u32_at(b, b.len() - tail) as usize;
        let Some(start) = (b.len() - tail).checked_sub(count * DIRECTORY_ENTRY) else {
            return Err(corrupt("directory longer than the file"));
        };
        let mut sections = Vec::with_capacity(count);
        for i in 0..count {
            let at = start + i * DIRECTORY_ENTRY;
            let section = Section {
                field: Field::from_field_id(u32_at(b, at)),
                terms: u32_at(b, at + 4) as usize,
                total_tokens: u64_at(b, at + 8),
                norms: u64_at(b, at + 24) as usize,
                term_bytes: u64_at(b, at + 32) as usize,
                table: u64_at(b, at + 40) as usize,
            };
            let table_end = section.table + 16 * section.terms;
            let ordered = u64_at(b, at + 16) as usize <= section.norms
                && section.norms + max_doc as usize == section.term_bytes
                && section.term_bytes <= section.table
                && table_end <= start;
            if !ordered {
                return Err(corrupt(format!("section {i} out of its bounds")));
            }
            sections.push(section);
        }
        Ok(PostingsFile { bytes, sections })
    }

    /// The postings of `field`; `None` when the file has none for it.
    pub(crate) fn field(&self, field: Field) -> Option<FieldPostings<'_>> {
        self.sections
            .iter()
            .find(|s| s.field == field)
            .map(|&section| FieldPostings {
                bytes: self.bytes.as_slice(),
                section,
            })
    }
}

/// One field's postings in a segment.
#[derive(Clone, Copy)]
pub(crate) struct FieldPostings<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) section: Section,
}

impl<'a> FieldPostings<'a> {
    /// Tokens over every document of the segment, deleted ones too (as tantivy counts them).
    pub(crate) fn total_tokens(&self) -> u64 {
        self.section.total_tokens
    }

    /// The length code of `doc` (tantivy's field norm id).
    pub(crate) fn norm_id(&self, doc: DocId) -> u8 {
        self.bytes[self.section.norms + doc as usize]
    }

    pub(crate) fn term_count(&self) -> usize {
        self.section.terms
    }

    pub(super) fn row(&self, i: usize) -> usize {
        self.section.table + 16 * i
    }

    /// The bytes of the `i`th term in byte order.
    pub(crate) fn term_bytes(&self, i: usize) -> &'a [u8] {
        let end = u32_at(self.bytes, self.row(i)) as usize;
        let start = if i == 0 {
            0
        } else {
            u32_at(self.bytes, self.row(i - 1)) as usize
        };
        &self.bytes[self.section.term_bytes + start..self.section.term_bytes + end]
    }

    pub(super) fn entry(&self, i: usize) -> TermEntry {
        TermEntry {
            doc_freq: u32_at(self.bytes, self.row(i) + 4),
            start: u64_at(self.bytes, self.row(i) + 8) as usize,
        }
    }

    /// The entry of `term`, when the field holds it.
    pub(crate) fn find(&self, term: &[u8]) -> Option<TermEntry> {
        let (mut low, mut high) = (0, self.section.terms);
        while low < high {
            let mid = low + (high - low) / 2;
            match self.term_bytes(mid).cmp(term) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(self.entry(mid)),
            }
        }
        None
    }

    /// Every term, in byte order.
    pub(crate) fn terms(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        (0..self.section.terms).map(|i| self.term_bytes(i))
    }

    /// The postings of a term this field holds, its first block read.
    pub(crate) fn postings(&self, entry: TermEntry) -> Blocks<'a> {
        Blocks::new(self.bytes, entry.start, entry.doc_freq)
    }
}
