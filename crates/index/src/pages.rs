//! Page files: what a query's page shows of each fragment (its body, its extent and, on a
//! source's first fragment, the source's id, envelope and summary), one file per tantivy
//! segment, read by document id.
//!
//! The document store holds the same and stays the truth. A page read from the store paid
//! for tantivy's skip-index seek, a block copy, the document's decode and the record's JSON:
//! a quarter of a lexical query over 10k fragments (docs/perf/page-files.md). A
//! page file answers with one offset lookup and one read of the record alone.
//!
//! A file is derived from its segment's store after each commit ([`write_missing`]), or for
//! a run on one indexing thread from the same records made as the run added its documents
//! ([`PagesAhead`]: the same bytes, without reading the store back), and is named after the
//! segment (`<segment id>.pages` beside the segment's own files). Segments
//! never change, so a file never goes stale; it goes when its segment does. A segment
//! without a readable file (an index written before page files, a write that failed, a
//! segment a later merge made) is read from the store as before, and so is any record a
//! file cannot decode.
//!
//! Layout, little-endian: the magic `FNDPAGE2`, the segment's document count `n` (u32), four
//! zero bytes, `n + 1` offsets (u64) into the records that follow, then the records. A record:
//! the body (a string), the extent (two u64, three u32: lines and the page, 0 for none), a byte saying whether the source
//! follows, and the source's id, title, path, date (a flag byte, then the string), tags (u32
//! count, strings), extras (u32 count, key and value strings) and summary. A string is its
//! byte length (u32) and its UTF-8 bytes.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use finder_core::{Envelope, Extent};
use tantivy::directory::{FileSlice, OwnedBytes};
use tantivy::index::SegmentId;
use tantivy::{Directory, HasLen, SegmentReader};

use crate::bytes::{u32_at, u64_at};
use crate::files::{LEXICAL_DIR, PAGES_EXTENSION};
use crate::large_writes::WRITE_BYTES;
use crate::pread::PreadDirectory;
use crate::record::{PageRecord, PageSource, SourceRecord};
use crate::schema::Fields;
use crate::stored::StoredHead;
use crate::{store_error, IndexError, Result};

const MAGIC: &[u8; 8] = b"FNDPAGE2";
const HEADER_BYTES: usize = 16;

/// A fragment's stored text and what a page shows of its record.
pub(crate) type Stored = (Body, PageRecord);

/// A fragment's text: its bytes in the page file, borrowed where the file is mapped (a
/// record's read copies no body, most of a record's bytes), or the store's string.
#[derive(Debug)]
pub(crate) enum Body {
    /// Checked to be UTF-8 when the record was read ([`decode`] and [`decode_body`] build no
    /// other).
    Page(OwnedBytes),
    Store(String),
}

impl std::ops::Deref for Body {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            // SAFETY: `decode` and `decode_body` make a `Body::Page` only of bytes
            // `str::from_utf8` accepted, and `OwnedBytes` never changes its bytes.
            Body::Page(bytes) => unsafe { std::str::from_utf8_unchecked(bytes.as_slice()) },
            Body::Store(text) => text,
        }
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        **self == **other
    }
}

/// The page file of `segment`'s name.
fn file_name(segment: &SegmentReader) -> String {
    format!("{}.{PAGES_EXTENSION}", segment.segment_id().uuid_string())
}

/// One segment's page file, opened for reading.
pub(crate) struct PageFile {
    offsets: OwnedBytes,
    records: FileSlice,
}

impl PageFile {
    /// `segment`'s page file in `directory` (the index's own, not tantivy's managed view
    /// of it, which takes every file for one with a tantivy footer); `None` when it is
    /// missing or its header does not describe the segment (the store is read instead).
    pub(crate) fn open(directory: &dyn Directory, segment: &SegmentReader) -> Option<PageFile> {
        let handle = directory
            .get_file_handle(Path::new(&file_name(segment)))
            .ok()?;
        let file = FileSlice::new(handle);
        let docs = segment.max_doc() as usize;
        let header = file
            .read_bytes_slice(0..HEADER_BYTES.min(file.len()))
            .ok()?;
        if header.len() < HEADER_BYTES
            || &header[..8] != MAGIC
            || u32_at(&header, 8) as usize != docs
        {
            return None;
        }
        let start = HEADER_BYTES + 8 * (docs + 1);
        if file.len() < start {
            return None;
        }
        let (head, records) = file.split(start);
        let offsets = head.slice_from(HEADER_BYTES).read_bytes().ok()?;
        let last = u64_at(&offsets, 8 * docs);
        (last == records.len() as u64).then_some(PageFile { offsets, records })
    }

    /// The record of document `doc`; `None` when the file cannot give it.
    pub(crate) fn read(&self, doc: u32) -> Option<Stored> {
        let at = 8 * doc as usize;
        if at + 16 > self.offsets.len() {
            return None;
        }
        let (start, end) = (u64_at(&self.offsets, at), u64_at(&self.offsets, at + 8));
        if start > end || end > self.records.len() as u64 {
            return None;
        }
        let bytes = self
            .records
            .read_bytes_slice(start as usize..end as usize)
            .ok()?;
        decode(bytes)
    }
}

/// Bytes of records a walk over a whole file reads at once (one read).
const WALK_CHUNK_BYTES: u64 = 4 << 20;

impl PageFile {
    /// Calls `f` with every document id of the file and its body, in id order, reading the
    /// records `chunk_bytes` at a time (at least one record a read); `None` for a record
    /// whose body cannot be read or does not decode (the caller reads it from the store).
    fn for_each_body(
        &self,
        chunk_bytes: u64,
        f: &mut dyn FnMut(u32, Option<Body>) -> Result<()>,
    ) -> Result<()> {
        let docs = (self.offsets.len() / 8).saturating_sub(1) as u32;
        let offset = |doc: u32| u64_at(&self.offsets, 8 * doc as usize);
        let mut doc = 0;
        while doc < docs {
            // At least one record, then as many as the chunk holds.
            let (from, mut end) = (offset(doc), doc + 1);
            while end < docs && offset(end + 1).saturating_sub(from) <= chunk_bytes {
                end += 1;
            }
            let to = offset(end);
            let chunk = (from <= to && to <= self.records.len() as u64)
                .then(|| {
                    self.records
                        .read_bytes_slice(from as usize..to as usize)
                        .ok()
                })
                .flatten();
            for d in doc..end {
                let (start, stop) = (offset(d), offset(d + 1));
                let body = chunk.as_ref().and_then(|chunk| {
                    let range = start.checked_sub(from)? as usize..stop.checked_sub(from)? as usize;
                    (range.start <= range.end && range.end <= chunk.len())
                        .then(|| decode_body(chunk.slice(range)))
                        .flatten()
                });
                f(d, body)?;
            }
            doc = end;
        }
        Ok(())
    }
}

/// Calls `f` with the fragment key and body of every live fragment of the last commit in
/// `dir`, segment by segment in document order: from the segment's page file, read a chunk
/// at a time with positioned reads (its bodies borrowed from the chunk, no store block
/// decoded), or from its store where the segment has no file or a record does not decode.
/// The relation graph's passes over the texts read this.
pub(crate) fn for_each_body(
    dir: &Path,
    fields: Fields,
    f: &mut dyn FnMut(u64, Body) -> Result<()>,
) -> Result<()> {
    walk_bodies(dir, fields, WALK_CHUNK_BYTES, f)
}

fn walk_bodies(
    dir: &Path,
    fields: Fields,
    chunk_bytes: u64,
    f: &mut dyn FnMut(u64, Body) -> Result<()>,
) -> Result<()> {
    let err = |e| store_error(dir, e);
    let Some(searcher) = crate::stored::searcher_for_walks(dir)? else {
        return Ok(());
    };
    let directory = PreadDirectory::open(&dir.join(LEXICAL_DIR)).map_err(err)?;
    for segment in searcher.segment_readers() {
        let alive = segment.alive_bitset();
        let store = segment
            .get_store_reader(0)
            .map_err(|e| store_error(dir, e.into()))?;
        crate::stored::name_head_fields(fields);
        let file = PageFile::open(&directory, segment);
        let keys = segment.fast_fields().u64("fragment_key").ok();
        let (Some(file), Some(keys)) = (file, keys) else {
            for head in store.iter::<StoredHead>(alive) {
                let head = head.map_err(err)?;
                f(head.fragment_key, Body::Store(head.body))?;
            }
            continue;
        };
        file.for_each_body(chunk_bytes, &mut |doc, body| {
            if alive.is_some_and(|a| a.is_deleted(doc)) {
                return Ok(());
            }
            match (keys.first(doc), body) {
                (Some(key), Some(body)) => f(key, body),
                _ => {
                    let head: StoredHead = store.get(doc).map_err(err)?;
                    f(head.fragment_key, Body::Store(head.body))
                }
            }
        })?;
    }
    Ok(())
}

/// Appends one record to `out`.
fn encode(body: &str, record: &PageRecord, out: &mut Vec<u8>) {
    let source = record
        .source
        .as_ref()
        .map(|s| (s.id.as_str(), &s.envelope, s.summary.as_str()));
    encode_parts(body, &record.extent, source, out);
}

/// [`encode`] from the parts of a record: a fragment's body and extent, and on a source's
/// first fragment the source's id, envelope and summary.
fn encode_parts(
    body: &str,
    extent: &Extent,
    source: Option<(&str, &Envelope, &str)>,
    out: &mut Vec<u8>,
) {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    string(out, body);
    let e = extent;
    out.extend_from_slice(&e.byte_start.to_le_bytes());
    out.extend_from_slice(&e.byte_end.to_le_bytes());
    out.extend_from_slice(&e.line_start.to_le_bytes());
    out.extend_from_slice(&e.line_end.to_le_bytes());
    out.extend_from_slice(&e.page.unwrap_or(0).to_le_bytes());
    let Some((id, envelope, summary)) = source else {
        out.push(0);
        return;
    };
    out.push(1);
    string(out, id);
    string(out, &envelope.title);
    string(out, &envelope.path);
    match &envelope.date {
        Some(date) => {
            out.push(1);
            string(out, date);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(envelope.tags.len() as u32).to_le_bytes());
    for tag in &envelope.tags {
        string(out, tag);
    }
    out.extend_from_slice(&(envelope.extras.len() as u32).to_le_bytes());
    for (key, value) in &envelope.extras {
        string(out, key);
        string(out, value);
    }
    string(out, summary);
}

/// The body alone of a record [`encode`] wrote (what [`decode`] reads first); `None` when
/// its length or its UTF-8 is wrong.
fn decode_body(bytes: OwnedBytes) -> Option<Body> {
    let mut r = Reader(bytes.as_slice());
    let n = r.u32()? as usize;
    std::str::from_utf8(r.take(n)?).ok()?;
    Some(Body::Page(bytes.slice(4..4 + n)))
}

/// Reads a record [`encode`] wrote; `None` when the bytes are not one.
fn decode(bytes: OwnedBytes) -> Option<Stored> {
    let mut r = Reader(bytes.as_slice());
    // The body, first in the record, stays in the record's bytes.
    let n = r.u32()? as usize;
    std::str::from_utf8(r.take(n)?).ok()?;
    let body = Body::Page(bytes.slice(4..4 + n));
    let extent = Extent {
        byte_start: r.u64()?,
        byte_end: r.u64()?,
        line_start: r.u32()?,
        line_end: r.u32()?,
        page: Some(r.u32()?).filter(|&p| p > 0),
    };
    let source = match r.byte()? {
        0 => None,
        1 => {
            let id = r.string()?;
            let title = r.string()?;
            let path = r.string()?;
            let date = match r.byte()? {
                0 => None,
                1 => Some(r.string()?),
                _ => return None,
            };
            let tags = (0..r.u32()?)
                .map(|_| r.string())
                .collect::<Option<Vec<_>>>()?;
            let extras = (0..r.u32()?)
                .map(|_| Some((r.string()?, r.string()?)))
                .collect::<Option<_>>()?;
            let summary = r.string()?;
            Some(PageSource {
                id,
                envelope: Envelope {
                    title,
                    path,
                    date,
                    tags,
                    extras,
                },
                summary,
            })
        }
        _ => return None,
    };
    r.0.is_empty()
        .then_some((body, PageRecord { extent, source }))
}

/// The bytes of one record, taken from the front.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32_at(self.take(4)?, 0))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64_at(self.take(8)?, 0))
    }

    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

thread_local! {
    /// Page files this thread wrote from a [`PagesAhead`] (for tests: `testing`).
    pub(crate) static WRITTEN_AHEAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The page records of the documents a build adds, made as it adds them, in that order: the
/// page file of the one segment a build on one indexing thread writes, without reading back
/// the store it just wrote (the walk over the store took a tenth of a small build). The
/// records go to a file of their own as they come (held in memory, 100k records raised the
/// build's peak by 160 MB); the page file is its header and offsets, then that file's bytes.
pub(crate) struct PagesAhead {
    /// The segments of the index before the build: the one it writes is the one not here.
    before: HashSet<SegmentId>,
    /// The records so far, `None` once a write failed (the page file is then made from the
    /// store, as for any other segment).
    out: Option<BufWriter<File>>,
    path: PathBuf,
    /// Where each record starts, then where the last ends: the page file's offsets.
    offsets: Vec<u64>,
    /// Each record's fragment key: the segment's own, document by document, must be these.
    keys: Vec<u64>,
    record: Vec<u8>,
}

/// The name of a [`PagesAhead`]'s records in the lexical folder: a page file's temporary
/// name, so that one a killed run left behind goes with the next run's leftovers.
const AHEAD_NAME: &str = "ahead.pages.tmp";

impl PagesAhead {
    /// Starts the records of a build into `dir`, whose index holds the segments `before`;
    /// `None` when their file cannot be made (the page files are then made from the stores).
    pub(crate) fn start(dir: &Path, before: HashSet<SegmentId>) -> Option<PagesAhead> {
        let path = dir.join(LEXICAL_DIR).join(AHEAD_NAME);
        // Read back into the page file at the end.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .ok()?;
        Some(PagesAhead {
            before,
            out: Some(BufWriter::with_capacity(WRITE_BYTES, file)),
            path,
            offsets: vec![0],
            keys: Vec::new(),
            record: Vec::new(),
        })
    }

    /// The page record of the document just added: the fragment's key, body and extent, and
    /// on a source's first fragment its source.
    pub(crate) fn push(
        &mut self,
        key: u64,
        body: &str,
        extent: &Extent,
        source: Option<&SourceRecord>,
    ) {
        let Some(out) = &mut self.out else {
            return;
        };
        self.record.clear();
        let source = source.map(|s| (s.id.as_str(), &s.envelope, s.summary.as_str()));
        encode_parts(body, extent, source, &mut self.record);
        if out.write_all(&self.record).is_err() {
            self.out = None;
            return;
        }
        let end = self.offsets.last().expect("starts with 0") + self.record.len() as u64;
        self.offsets.push(end);
        self.keys.push(key);
    }

    /// Whether `segment` holds exactly the documents pushed, in their order: the one segment
    /// that is new, with as many documents (deleted ones included), each with the fragment
    /// key pushed for it. A segment merged at the commit (from this run's and others, or
    /// from this run's in another order) fails the keys.
    fn fits(&self, segment: &SegmentReader, new_segments: usize) -> bool {
        if self.out.is_none()
            || new_segments != 1
            || self.before.contains(&segment.segment_id())
            || segment.max_doc() as usize != self.keys.len()
        {
            return false;
        }
        let Ok(keys) = segment.fast_fields().u64("fragment_key") else {
            return false;
        };
        (0..segment.max_doc()).all(|doc| keys.first(doc) == Some(self.keys[doc as usize]))
    }

    /// Writes the page file to `target`: to a temporary name first, renamed once whole.
    fn write(mut self, target: &Path) -> Result<()> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| IndexError::Io { path, source }
        };
        let out = self.out.take().expect("fits: the records were written");
        let mut records = out
            .into_inner()
            .map_err(|e| io(&self.path)(e.into_error()))?;
        records.seek(SeekFrom::Start(0)).map_err(io(&self.path))?;
        let tmp = temporary(target);
        let mut file = File::create(&tmp).map_err(io(&tmp))?;
        file.write_all(&header(&self.offsets)).map_err(io(&tmp))?;
        // Copied by the kernel where it can (`copy_file_range`).
        std::io::copy(&mut records, &mut file).map_err(io(&tmp))?;
        install(file, &tmp, target)
    }
}

impl Drop for PagesAhead {
    /// The records go whether they made the page file or not.
    fn drop(&mut self) {
        drop(self.out.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes the page file of every segment of the last commit in `dir` that has none, and
/// removes the files of segments that are gone. Returns how many files it wrote, or the
/// first failure. The file of a build's one new segment is written from `ahead` when given
/// and it [fits](PagesAhead::fits), else from the segment's store as the others are.
pub(crate) fn write_missing(
    dir: &Path,
    fields: Fields,
    ahead: Option<PagesAhead>,
) -> Result<usize> {
    let path = dir.join(LEXICAL_DIR);
    let Some(searcher) = crate::stored::searcher_for_walks(dir)? else {
        return Ok(0);
    };
    let segments = searcher.segment_readers();
    let live: HashSet<String> = segments.iter().map(file_name).collect();
    let mut todo: Vec<(&SegmentReader, PathBuf)> = segments
        .iter()
        .map(|segment| (segment, path.join(file_name(segment))))
        .filter(|(_, target)| !target.exists())
        .collect();
    let mut ahead_written = 0;
    if let Some(ahead) = ahead {
        let new_segments = segments
            .iter()
            .filter(|s| !ahead.before.contains(&s.segment_id()))
            .count();
        if let Some(i) = todo
            .iter()
            .position(|(segment, _)| ahead.fits(segment, new_segments))
        {
            // A failed write leaves the segment to the walk over its store below, which
            // writes its file or reports why it cannot.
            if ahead.write(&todo[i].1).is_ok() {
                todo.remove(i);
                ahead_written = 1;
                WRITTEN_AHEAD.with(|n| n.set(n.get() + 1));
            }
        }
    }
    // Largest first, a segment per core at a time: a file is a walk over its segment's
    // store, one core's work (a 1M build's two segments of 460k fragments and two small ones:
    // 8.9 and 13.8 s one after the other, 5.5 to 8.1 s on two cores).
    todo.sort_by_key(|(segment, _)| std::cmp::Reverse(segment.max_doc()));
    let results = crate::each_on_cores(&todo, |(segment, target)| {
        write_segment(dir, target, segment, fields)
    });
    // A segment whose file cannot be written is read from its store; the others still get
    // theirs, and the first failure is reported.
    let written = ahead_written + results.iter().filter(|r| r.is_ok()).count();
    let failed = results.into_iter().find_map(|r| r.err());
    // Files of segments that are gone, and what a write cut short left. One that cannot be
    // removed now (held open where that forbids removal) is an orphan no reader asks for;
    // the next run tries again.
    let entries = std::fs::read_dir(&path).map_err(|source| IndexError::Io {
        path: path.clone(),
        source,
    })?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.ends_with(&format!(".{PAGES_EXTENSION}"))
            || name.ends_with(&format!(".{PAGES_EXTENSION}.tmp"));
        if ours && !live.contains(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(written),
    }
}

/// Writes `segment`'s page file to `target`: to a temporary name first, renamed once whole.
fn write_segment(dir: &Path, target: &Path, segment: &SegmentReader, fields: Fields) -> Result<()> {
    let docs = segment.max_doc() as usize;
    let tmp = temporary(target);
    let io = |source| IndexError::Io {
        path: tmp.clone(),
        source,
    };
    let mut out = BufWriter::with_capacity(WRITE_BYTES, File::create(&tmp).map_err(io)?);
    let start = HEADER_BYTES + 8 * (docs + 1);
    out.write_all(&vec![0; start]).map_err(io)?;
    let store = segment
        .get_store_reader(0)
        .map_err(|e| store_error(dir, e.into()))?;
    crate::stored::name_head_fields(fields);
    let mut offsets = Vec::with_capacity(docs + 1);
    let mut record = Vec::new();
    let mut at = 0u64;
    // Every document, deleted or not: the file is read by document id.
    for (doc, head) in store.iter::<StoredHead>(None).enumerate() {
        let head = head.map_err(|e| store_error(dir, e))?;
        let page: PageRecord =
            serde_json::from_str(&head.meta).map_err(|e| IndexError::Corrupt {
                path: dir.join(LEXICAL_DIR),
                reason: format!(
                    "segment {}, document {doc}: fragment record: {e}",
                    segment.segment_id().uuid_string()
                ),
            })?;
        record.clear();
        encode(&head.body, &page, &mut record);
        offsets.push(at);
        out.write_all(&record).map_err(io)?;
        at += record.len() as u64;
    }
    offsets.push(at);
    if offsets.len() != docs + 1 {
        return Err(IndexError::Corrupt {
            path: dir.join(LEXICAL_DIR),
            reason: format!(
                "segment {}: {} stored documents for {docs} document ids",
                segment.segment_id().uuid_string(),
                offsets.len() - 1
            ),
        });
    }
    out.seek(SeekFrom::Start(0)).map_err(io)?;
    out.write_all(&header(&offsets)).map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    install(file, &tmp, target)
}

/// The temporary name a page file is written under before it is renamed to `target`.
fn temporary(target: &Path) -> PathBuf {
    PathBuf::from(format!("{}.tmp", target.display()))
}

/// A page file's header and offsets: `offsets` holds where each record starts, then where the
/// last ends.
fn header(offsets: &[u64]) -> Vec<u8> {
    let docs = offsets.len() - 1;
    let mut head = Vec::with_capacity(HEADER_BYTES + 8 * offsets.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&(docs as u32).to_le_bytes());
    head.extend_from_slice(&[0; 4]);
    for offset in offsets {
        head.extend_from_slice(&offset.to_le_bytes());
    }
    head
}

/// Makes a page file written whole under its temporary name `tmp` durable, then renames it to
/// `target`.
fn install(file: File, tmp: &Path, target: &Path) -> Result<()> {
    file.sync_all().map_err(|source| IndexError::Io {
        path: tmp.to_path_buf(),
        source,
    })?;
    drop(file);
    std::fs::rename(tmp, target).map_err(|source| IndexError::Io {
        path: target.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(source: Option<PageSource>) -> PageRecord {
        PageRecord {
            extent: Extent {
                byte_start: 7,
                byte_end: 1 << 40,
                line_start: 2,
                line_end: u32::MAX,
                page: Some(3),
            },
            source,
        }
    }

    fn owned(bytes: &[u8]) -> OwnedBytes {
        OwnedBytes::new(bytes.to_vec())
    }

    fn same(a: &Stored, b: &Stored) -> bool {
        let (x, y) = (&a.1, &b.1);
        a.0 == b.0
            && x.extent == y.extent
            && match (&x.source, &y.source) {
                (None, None) => true,
                (Some(s), Some(t)) => {
                    s.id == t.id && s.envelope == t.envelope && s.summary == t.summary
                }
                _ => false,
            }
    }

    fn round_trip(body: &str, page: PageRecord) {
        let mut bytes = Vec::new();
        encode(body, &page, &mut bytes);
        let back = decode(owned(&bytes)).expect("a record decodes");
        assert!(
            same(&back, &(Body::Store(body.to_string()), page)),
            "{back:?}"
        );
        // Every cut short is refused, never read as another record.
        for cut in 0..bytes.len() {
            assert!(decode(owned(&bytes[..cut])).is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn a_fragment_without_its_source_round_trips() {
        round_trip("body ✓ text", record(None));
        round_trip("", record(None));
    }

    proptest! {
        #[test]
        fn a_source_record_round_trips(
            body in ".{0,40}",
            id in ".{0,12}",
            title in ".{0,12}",
            date in proptest::option::of(".{0,10}"),
            tags in proptest::collection::vec(".{0,6}", 0..4),
            extras in proptest::collection::btree_map(".{0,6}", ".{0,6}", 0..4),
            summary in ".{0,30}",
        ) {
            let envelope = Envelope { title, path: "a/b.md".into(), date, tags, extras };
            round_trip(&body, record(Some(PageSource { id, envelope, summary })));
        }
    }

    #[test]
    fn trailing_bytes_or_a_bad_flag_are_refused() {
        let mut bytes = Vec::new();
        encode("x", &record(None), &mut bytes);
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(owned(&longer)).is_none());
        let flag = bytes.len() - 1;
        bytes[flag] = 2;
        assert!(decode(owned(&bytes)).is_none());
        // A body that is not UTF-8 is refused too: `Body` relies on it.
        let mut bad = Vec::new();
        encode("ab", &record(None), &mut bad);
        bad[4] = 0xff;
        assert!(decode(owned(&bad)).is_none());
    }

    /// Every live fragment's (key, body), sorted, as a walk over the page files gives them
    /// (`chunk_bytes` a read) and as the store gives them.
    fn bodies(dir: &Path, chunk_bytes: Option<u64>) -> Vec<(u64, String)> {
        let fields = crate::schema::build_schema().1;
        let mut out = Vec::new();
        match chunk_bytes {
            Some(chunk) => walk_bodies(dir, fields, chunk, &mut |key, body| {
                out.push((key, body.to_string()));
                Ok(())
            }),
            None => crate::stored::map_heads(dir, fields, |head| (head.fragment_key, head.body))
                .map(|segments| out.extend(segments.into_iter().flatten())),
        }
        .unwrap();
        out.sort();
        out
    }

    #[test]
    fn a_walk_over_the_page_files_gives_the_stores_live_bodies() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, input) = (tmp.path().join("index"), tmp.path().join("r.jsonl"));
        let settings = finder_core::Settings::default();
        let write = |edited: &str| {
            let lines: Vec<String> = (0..60)
                .map(|i| {
                    let text = if i == 7 { edited.to_string() } else { format!("body {i} ünï ") };
                    serde_json::json!({"id": format!("r{i}"), "title": "T", "text": text.repeat(1 + i % 5)})
                        .to_string()
                })
                .collect();
            std::fs::write(&input, lines.join("\n")).unwrap();
            crate::index_inputs(&dir, std::slice::from_ref(&input), &settings, &mut |_| {})
                .unwrap();
        };
        write("first");
        // The edit deletes r7's document from the first segment and writes a second one.
        write("second");
        let store = bodies(&dir, None);
        assert_eq!(store.len(), 60);
        assert!(store.iter().any(|(_, b)| b.starts_with("second")));
        assert!(!store.iter().any(|(_, b)| b.starts_with("first")));
        let files: Vec<PathBuf> = std::fs::read_dir(dir.join(LEXICAL_DIR))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == PAGES_EXTENSION))
            .collect();
        assert_eq!(files.len(), 2, "{files:?}");
        // A record a read, a few, the whole file.
        for chunk in [0, 100, WALK_CHUNK_BYTES] {
            assert_eq!(bodies(&dir, Some(chunk)), store, "chunks of {chunk} bytes");
        }
        // Damaged records (each body's length made too long) are read from the store.
        let bytes = std::fs::read(&files[0]).unwrap();
        let docs = u32_at(&bytes, 8) as usize;
        let records = HEADER_BYTES + 8 * (docs + 1);
        let mut damaged = bytes.clone();
        for doc in (0..docs).step_by(3) {
            let offset = u64_at(&bytes, HEADER_BYTES + 8 * doc) as usize;
            damaged[records + offset..records + offset + 4].copy_from_slice(&[0xff; 4]);
        }
        std::fs::write(&files[0], &damaged).unwrap();
        assert_eq!(bodies(&dir, Some(100)), store);
        // A missing file: that segment is read from its store.
        std::fs::remove_file(&files[0]).unwrap();
        assert_eq!(bodies(&dir, Some(WALK_CHUNK_BYTES)), store);
    }
}
