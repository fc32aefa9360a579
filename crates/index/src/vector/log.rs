//! `vectors.log`: an append-only file of `(fragment key, text hash, vector)` records under a
//! header naming the model. A build appends and syncs as it goes, so an interrupted build
//! resumes from the last complete record; a torn tail is cut off on the next append.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

const MAGIC: &[u8; 8] = b"FNDRVLOG";

/// Every complete record, the last one per key winning.
pub(crate) struct LogContents {
    pub vectors: HashMap<u64, (u64, Vec<f32>)>,
    /// Bytes up to the end of the last complete record.
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

/// Reads the log; `None` when it is missing or was written for another model or dimension.
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
    let mut valid_len = expected.len() as u64;
    let mut records = 0;
    let mut record = vec![0u8; 16 + 4 * dim];
    loop {
        match r.read_exact(&mut record) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let key = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
        let hash = u64::from_le_bytes(record[8..16].try_into().expect("8 bytes"));
        let v = record[16..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        vectors.insert(key, (hash, v));
        valid_len += record.len() as u64;
        records += 1;
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
        Ok(LogWriter { out })
    }

    pub fn append(&mut self, key: u64, hash: u64, vector: &[f32]) -> io::Result<()> {
        self.out.write_all(&key.to_le_bytes())?;
        self.out.write_all(&hash.to_le_bytes())?;
        for x in vector {
            self.out.write_all(&x.to_le_bytes())?;
        }
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }
}

/// Rewrites the log with exactly `entries` (dropping replaced and deleted records), via a
/// temporary file renamed into place.
pub(crate) fn rewrite<'a>(
    path: &Path,
    model_id: &str,
    dim: usize,
    entries: impl Iterator<Item = (u64, u64, &'a [f32])>,
) -> io::Result<()> {
    let tmp = path.with_extension("log.tmp");
    {
        let mut w = LogWriter::open(&tmp, model_id, dim, None)?;
        for (key, hash, v) in entries {
            w.append(key, hash, v)?;
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
