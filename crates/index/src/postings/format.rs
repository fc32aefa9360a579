//! The postings file's layout, as the writer and the merge write it: sections, directory,
//! varints and the encoding of a term's postings.

use std::io::{self, Write};

use bitpacking::{BitPacker, BitPacker4x};
use tantivy::directory::TerminatingWrite;
use tantivy::schema::Field;
use tantivy::DocId;

/// A writer that counts the bytes written through it.
pub(super) struct Counting<W> {
    pub(super) inner: W,
    pub(super) written: u64,
}

impl<W: Write> Counting<W> {
    pub(super) fn new(inner: W) -> Counting<W> {
        Counting { inner, written: 0 }
    }

    pub(super) fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// Where a field's section lies, and what the directory says of it.
pub(super) struct DirectoryEntry {
    pub(super) field: Field,
    pub(super) terms: u32,
    pub(super) total_tokens: u64,
    pub(super) postings: u64,
    pub(super) norms: u64,
    pub(super) term_bytes: u64,
    pub(super) table: u64,
}

/// Writes one field's section: the terms one at a time in byte order, then the rest.
pub(super) struct SectionWriter<'a, W> {
    pub(super) out: &'a mut Counting<W>,
    pub(super) field: Field,
    pub(super) postings: u64,
    /// Per term: where its bytes end, its document frequency, where its postings start.
    pub(super) table: Vec<(u32, u32, u64)>,
    pub(super) term_bytes: Vec<u8>,
    pub(super) buffer: Vec<u8>,
}

impl<'a, W: Write> SectionWriter<'a, W> {
    pub(super) fn new(field: Field, out: &'a mut Counting<W>) -> SectionWriter<'a, W> {
        let postings = out.written;
        SectionWriter {
            out,
            field,
            postings,
            table: Vec::new(),
            term_bytes: Vec::new(),
            buffer: Vec::new(),
        }
    }

    /// Adds a term (after every term before it in byte order) with its documents (ascending)
    /// and their frequencies.
    pub(super) fn term(&mut self, term: &[u8], docs: &[DocId], tfs: &[u32]) -> io::Result<()> {
        debug_assert!(!docs.is_empty() && docs.len() == tfs.len());
        self.term_bytes.extend_from_slice(term);
        self.table.push((
            self.term_bytes.len() as u32,
            docs.len() as u32,
            self.out.written,
        ));
        self.buffer.clear();
        encode_postings(docs, tfs, &mut self.buffer);
        self.out.put(&self.buffer)
    }

    pub(super) fn finish(self, norms: &[u8], total_tokens: u64) -> io::Result<DirectoryEntry> {
        let norms_at = self.out.written;
        self.out.put(norms)?;
        let bytes_at = self.out.written;
        self.out.put(&self.term_bytes)?;
        let table_at = self.out.written;
        let mut row = [0u8; 16];
        for &(end, doc_freq, start) in &self.table {
            row[..4].copy_from_slice(&end.to_le_bytes());
            row[4..8].copy_from_slice(&doc_freq.to_le_bytes());
            row[8..].copy_from_slice(&start.to_le_bytes());
            self.out.put(&row)?;
        }
        Ok(DirectoryEntry {
            field: self.field,
            terms: self.table.len() as u32,
            total_tokens,
            postings: self.postings,
            norms: norms_at,
            term_bytes: bytes_at,
            table: table_at,
        })
    }
}

/// Writes the directory and the magic, and closes the file.
pub(super) fn finish_file<W: TerminatingWrite>(
    mut out: Counting<W>,
    directory: &[DirectoryEntry],
) -> io::Result<()> {
    for entry in directory {
        let mut row = Vec::with_capacity(DIRECTORY_ENTRY);
        row.extend_from_slice(&entry.field.field_id().to_le_bytes());
        row.extend_from_slice(&entry.terms.to_le_bytes());
        row.extend_from_slice(&entry.total_tokens.to_le_bytes());
        for at in [entry.postings, entry.norms, entry.term_bytes, entry.table] {
            row.extend_from_slice(&at.to_le_bytes());
        }
        out.put(&row)?;
    }
    out.put(&(directory.len() as u32).to_le_bytes())?;
    out.put(MAGIC)?;
    out.inner.terminate()
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(super) fn get_varint(bytes: &[u8], at: &mut usize) -> u32 {
    let mut value = 0u32;
    let mut shift = 0;
    loop {
        let b = bytes[*at];
        *at += 1;
        value |= u32::from(b & 0x7f) << shift;
        if b < 0x80 {
            return value;
        }
        shift += 7;
    }
}

/// A term's postings in the layout the module's documentation gives.
pub(super) fn encode_postings(docs: &[DocId], tfs: &[u32], out: &mut Vec<u8>) {
    let packer = BitPacker4x::new();
    let mut previous = 0;
    let mut minus_one = [0u32; BLOCK];
    for (docs, tfs) in docs.chunks_exact(BLOCK).zip(tfs.chunks_exact(BLOCK)) {
        for (m, &tf) in minus_one.iter_mut().zip(tfs) {
            *m = tf - 1;
        }
        let doc_bits = packer.num_bits_sorted(previous, docs);
        let tf_bits = packer.num_bits(&minus_one);
        out.push(doc_bits);
        out.push(tf_bits);
        let at = out.len();
        out.resize(at + BitPacker4x::compressed_block_size(doc_bits), 0);
        packer.compress_sorted(previous, docs, &mut out[at..], doc_bits);
        let at = out.len();
        out.resize(at + BitPacker4x::compressed_block_size(tf_bits), 0);
        packer.compress(&minus_one, &mut out[at..], tf_bits);
        previous = docs[BLOCK - 1];
    }
    let rest = docs.len() % BLOCK;
    for (&doc, &tf) in docs[docs.len() - rest..]
        .iter()
        .zip(&tfs[tfs.len() - rest..])
    {
        put_varint(out, doc - previous);
        put_varint(out, tf);
        previous = doc;
    }
}

pub(super) const MAGIC: &[u8; 8] = b"FNDPOST1";

/// Documents per packed block.
pub(super) const BLOCK: usize = BitPacker4x::BLOCK_LEN;

/// Bytes of a field's directory entry.
pub(super) const DIRECTORY_ENTRY: usize = 4 + 4 + 8 + 4 * 8;
