//! `vectors.log`: an append-only file of records under a header naming the model. A record is
//! one part of a fragment's vectors: `(fragment key, text hash, part, parts, vector)`, one
//! part per window the model read (`Embed::embed_windows`), written in order. A build appends
//! and syncs as it goes, so an interrupted build resumes after the last fragment whose parts
//! are all there; a torn tail is cut off on the next append.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Version 2 added the part fields; a version 1 log reads as missing, so its vectors are
/// embedded again, window by window.
const MAGIC: &[u8; 8] = b"FNDRVLG2";

/// Bytes of a record before its vector: key, hash, part and parts.
const RECORD_HEAD: usize = 8 + 8 + 2 + 2;

/// Every fragment whose parts are all in the log, the last one per key winning.
pub(crate) struct LogContents {
    /// Fragment key to text hash and every part's vector, one after the other.
    pub vectors: HashMap<u64, (u64, Vec<f32>)>,
    /// Bytes up to the end of the last complete fragment.
    pub valid_len: u64,
    #[cfg_attr(not(test), allow(dead_code))]
    pub records: u64,
}

fn header(model_id: &str, dim: usize) -> Vec<u8> {
    let mut h = Vec::with_capacity(16 + model_id.len());
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&(dim as u32).to_le_bytes());
    h.extend_from_slice(&(model_id.len() as u32).to_le_bytes());
    h.extend_from_slice(model_id.as_bytes());
    h
}

/// Reads the log; `None` when it is missing or was written for another model, dimension or
/// format version.
pub(crate) fn read(path: &Path, model_id: &str, dim: usize) -> io::Result<Option<LogContents>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut r = BufReader::with_capacity(1 << 20, file);
    let expected = header(model_id, dim);
    let mut found = vec![0u8; expected.len()];
    if r.read_exact(&mut found).is_err() || found != expected {
        return Ok(None);
    }
    let mut vectors = HashMap::new();
    let mut read_len = expected.len() as u64;
    let mut valid_len = read_len;
    let mut records = 0;
    let mut record = vec![0u8; RECORD_HEAD + 4 * dim];
    // The fragment whose parts are being read: key, hash, parts, vectors so far.
    let mut open: Option<(u64, u64, u16, Vec<f32>)> = None;
    loop {
        match r.read_exact(&mut record) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        read_len += record.len() as u64;
        records += 1;
        let key = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
        let hash = u64::from_le_bytes(record[8..16].try_into().expect("8 bytes"));
        let part = u16::from_le_bytes(record[16..18].try_into().expect("2 bytes"));
        let parts = u16::from_le_bytes(record[18..20].try_into().expect("2 bytes"));
        let v = record[RECORD_HEAD..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")));
        // A part out of order (after a torn group) is dropped with the group it belongs to.
        if part == 0 {
            open = Some((key, hash, parts, Vec::with_capacity(dim * parts as usize)));
        }
        let next = matches!(&open, Some((k, h, n, got))
            if (*k, *h, *n) == (key, hash, parts) && got.len() == part as usize * dim);
        if !next {
            open = None;
            continue;
        }
        let (_, _, _, got) = open.as_mut().expect("checked above");
        got.extend(v);
        if part + 1 == parts {
            let (key, hash, _, got) = open.take().expect("checked above");
            vectors.insert(key, (hash, got));
            valid_len = read_len;
        }
    }
    Ok(Some(LogContents {
        vectors,
        valid_len,
        records,
    }))
}

/// Appends records to a log, creating it (or replacing one for another model) when needed.
pub(crate) struct LogWriter {
    out: BufWriter<File>,
    dim: usize,
}

impl LogWriter {
    /// Opens for appending after `valid_len` bytes (a fresh log when `valid_len` is `None`).
    pub fn open(
        path: &Path,
        model_id: &str,
        dim: usize,
        valid_len: Option<u64>,
    ) -> io::Result<LogWriter> {
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(path)?;
        let mut out = match valid_len {
            Some(len) => {
                file.set_len(len)?;
                let mut out = BufWriter::with_capacity(1 << 20, file);
                io::Seek::seek(&mut out, io::SeekFrom::End(0))?;
                out
            }
            None => {
                file.set_len(0)?;
                let mut out = BufWriter::with_capacity(1 << 20, file);
                out.write_all(&header(model_id, dim))?;
                out
            }
        };
        out.flush()?;
        Ok(LogWriter { out, dim })
    }

    /// Appends a fragment's vectors: `parts` holds one vector per part, one after the other.
    pub fn append(&mut self, key: u64, hash: u64, parts: &[f32]) -> io::Result<()> {
        let count = u16::try_from(parts.len() / self.dim.max(1))
            .map_err(|_| io::Error::other("more than 65,535 parts in one fragment"))?;
        for (part, vector) in parts.chunks_exact(self.dim.max(1)).enumerate() {
            self.out.write_all(&key.to_le_bytes())?;
            self.out.write_all(&hash.to_le_bytes())?;
            self.out.write_all(&(part as u16).to_le_bytes())?;
            self.out.write_all(&count.to_le_bytes())?;
            for x in vector {
                self.out.write_all(&x.to_le_bytes())?;
            }
        }
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }
}

/// Rewrites the log with exactly `entries` (fragment key, text hash, every part's vector),
/// dropping replaced and deleted records, via a temporary file renamed into place.
pub(crate) fn rewrite<'a>(
    path: &Path,
    model_id: &str,
    dim: usize,
    entries: impl Iterator<Item = (u64, u64, &'a [f32])>,
) -> io::Result<()> {
    let tmp = path.with_extension("log.tmp");
    {
        let mut w = LogWriter::open(&tmp, model_id, dim, None)?;
        for (key, hash, parts) in entries {
            w.append(key, hash, parts)?;
        }
        w.sync()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_resume_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.log");
        assert!(read(&path, "m", 2).unwrap().is_none());
        let mut w = LogWriter::open(&path, "m", 2, None).unwrap();
        w.append(1, 11, &[1.0, 0.0]).unwrap();
        w.append(2, 22, &[0.0, 1.0]).unwrap();
        w.sync().unwrap();
        drop(w);
        // A torn record at the end (as after a kill mid-write) is ignored...
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[9, 9, 9]).unwrap();
        drop(f);
        let c = read(&path, "m", 2).unwrap().unwrap();
        assert_eq!((c.records, c.vectors.len()), (2, 2));
        // ...and cut off when the build resumes.
        let mut w = LogWriter::open(&path, "m", 2, Some(c.valid_len)).unwrap();
        w.append(1, 12, &[0.6, 0.8]).unwrap();
        w.sync().unwrap();
        let c = read(&path, "m", 2).unwrap().unwrap();
        assert_eq!(c.records, 3);
        assert_eq!(c.vectors[&1], (12, vec![0.6, 0.8]));
        // Another model or dimension does not read this log.
        assert!(read(&path, "other", 2).unwrap().is_none());
        assert!(read(&path, "m", 3).unwrap().is_none());
        // A fragment of several parts counts once all of them are there: a group torn after
        // its first part is dropped, and the resume writes after the last whole fragment.
        let mut w = LogWriter::open(&path, "m", 2, Some(c.valid_len)).unwrap();
        w.append(3, 33, &[1.0, 0.0, 0.0, 1.0]).unwrap();
        w.append(4, 44, &[1.0, 0.0, 0.6, 0.8, 0.0, 1.0]).unwrap();
        w.sync().unwrap();
        drop(w);
        let whole = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(whole - (20 + 8)).unwrap();
        drop(f);
        let c = read(&path, "m", 2).unwrap().unwrap();
        assert_eq!(c.vectors[&3], (33, vec![1.0, 0.0, 0.0, 1.0]));
        assert!(!c.vectors.contains_key(&4));
        assert_eq!(c.valid_len, whole - 3 * (20 + 8));
        rewrite(
            &path,
            "m",
            2,
            [(2u64, 22u64, &[0.0f32, 1.0][..])].into_iter(),
        )
        .unwrap();
        assert_eq!(read(&path, "m", 2).unwrap().unwrap().records, 1);
    }
}
