//! The checksummed file format (see the crate documentation) and the checks a read makes.

use std::io::{self, Read, Write};
use std::sync::Mutex;

use crate::key_rows::KeyRows;
use crate::search::SCAN_MAX_ROWS;
use crate::{AnnError, Hnsw, HnswParams, MAX_M, NONE};

impl Hnsw {
    /// Writes the index in the format described in the module documentation.
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let mut head = Vec::with_capacity(HEADER_LEN);
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&self.body_len().to_le_bytes());
        w.write_all(&head)?;

        let mut body = HashingWriter::new(w);
        body.put(&(self.dim as u32).to_le_bytes())?;
        body.put(&(self.params.m as u32).to_le_bytes())?;
        body.put(&(self.params.ef_construction.min(u32::MAX as usize) as u32).to_le_bytes())?;
        body.put(&self.params.seed.to_le_bytes())?;
        body.put(&self.rng.to_le_bytes())?;
        body.put(&(self.rows() as u64).to_le_bytes())?;
        body.put(&self.entry.to_le_bytes())?;
        body.put(&(self.max_level as u32).to_le_bytes())?;
        body.put(&(self.links_upper.len() as u64).to_le_bytes())?;
        for &k in &self.keys {
            body.put(&k.to_le_bytes())?;
        }
        for &d in &self.deleted {
            body.put(&[u8::from(d)])?;
        }
        body.put(&self.levels)?;
        for &x in &self.vectors {
            body.put(&x.to_le_bytes())?;
        }
        for &l in self.links0.iter().chain(&self.links_upper) {
            body.put(&l.to_le_bytes())?;
        }
        let (hash, written) = body.finish()?;
        debug_assert_eq!(written, self.body_len(), "body length as declared");
        w.write_all(hash.as_bytes())
    }

    /// Reads an index written by [`Hnsw::write_to`]. Every malformed input — wrong magic or
    /// version, truncation, a checksum mismatch, inconsistent contents — is an error naming
    /// what was expected; none panics, and memory grows only with the bytes actually read.
    pub fn read_from(r: &mut impl Read) -> Result<Hnsw, AnnError> {
        Hnsw::read(r, None)
    }

    /// [`Hnsw::read_from`] for a reader known to hold `size` bytes (a file of that length).
    /// When the body the header declares fits in them, each array is allocated at its full
    /// length before it is read, rather than grown as its chunks arrive: growing copies the
    /// array at each doubling and frees the old one, which at a million rows of 384
    /// dimensions left about a gigabyte of freed blocks beside the 1.5 GB of vectors under an
    /// allocator that purges lazily. Anything else reads as with [`Hnsw::read_from`].
    pub fn read_from_sized(r: &mut impl Read, size: u64) -> Result<Hnsw, AnnError> {
        Hnsw::read(r, Some(size))
    }

    pub(crate) fn read(r: &mut impl Read, size: Option<u64>) -> Result<Hnsw, AnnError> {
        let mut head = [0u8; HEADER_LEN];
        let got = fill(r, &mut head)?;
        let magic = got.min(MAGIC.len());
        if head[..magic] != MAGIC[..magic] {
            return Err(bad_magic(&head[..magic]));
        }
        if got < HEADER_LEN {
            return Err(AnnError::Truncated {
                section: "header",
                expected: HEADER_LEN as u64,
                found: got as u64,
            });
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(AnnError::UnsupportedVersion {
                found: version,
                expected: VERSION,
            });
        }
        let body_len = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
        if body_len < FIXED_BODY_LEN {
            return Err(AnnError::Corrupt(format!(
                "the header gives a body of {body_len} bytes, expected at least {FIXED_BODY_LEN}"
            )));
        }

        let mut body = HashingReader::new(r, body_len);
        // The counts below are bounded by the body's length, which the stream is then known
        // to hold (an untrusted length alone never sizes an allocation).
        body.presize = size.is_some_and(|size| {
            (HEADER_LEN as u64 + TRAILER_LEN)
                .checked_add(body_len)
                .is_some_and(|n| n <= size)
        });
        let dim = body.u32()? as usize;
        let m = body.u32()? as usize;
        let ef_construction = body.u32()? as usize;
        let seed = body.u64()?;
        let rng = body.u64()?;
        let rows = body.u64()?;
        let entry = body.u32()?;
        let max_level = body.u32()? as usize;
        let upper_len = body.u64()?;

        let expected = expected_body_len(dim as u64, m as u64, rows, upper_len);
        if expected != Some(body_len)
            || dim == 0
            || !(2..=MAX_M).contains(&m)
            || rows >= NONE as u64
        {
            // Report a damaged file as such rather than as odd contents.
            body.drain()?;
            body.verify_trailer()?;
            return Err(AnnError::Corrupt(format!(
                "the body is {body_len} bytes but describes {rows} rows of dimension {dim} \
                 with m = {m} and {upper_len} upper-layer slots (expected dimension >= 1, \
                 m in 2..={MAX_M}, fewer than {NONE} rows and a matching length)"
            )));
        }
        let rows = rows as usize;
        let keys = body.array(rows, u64::from_le_bytes)?;
        let deleted = body.array(rows, |b: [u8; 1]| b[0])?;
        let levels = body.array(rows, |b: [u8; 1]| b[0])?;
        let vectors = body.array(rows * dim, f32::from_le_bytes)?;
        let links0 = body.array(rows * (1 + 2 * m), u32::from_le_bytes)?;
        let links_upper = body.array(upper_len as usize, u32::from_le_bytes)?;
        body.verify_trailer()?;

        let mut index = Hnsw {
            dim,
            params: HnswParams {
                m,
                ef_construction: ef_construction.max(m),
                seed,
            },
            vectors,
            codes: None,
            scan_rows: SCAN_MAX_ROWS,
            keys,
            deleted: Vec::new(),
            levels,
            links0,
            upper_offsets: Vec::new(),
            links_upper,
            entry,
            max_level,
            rows_by_key: KeyRows::default(),
            rng,
            scratch: Mutex::new(Vec::new()),
        };
        index.validate(&deleted)?;
        Ok(index)
    }
}

pub(crate) const MAGIC: [u8; 8] = *b"FNDRHNSW";

pub(crate) const VERSION: u32 = 1;

pub(crate) const HEADER_LEN: usize = 8 + 4 + 8;

/// The blake3 hash of the body, after it.
pub(crate) const TRAILER_LEN: u64 = 32;

pub(crate) const FIXED_BODY_LEN: u64 = 4 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8;

/// Bytes per chunk when streaming the body; bounds memory that untrusted lengths can claim.
pub(crate) const IO_CHUNK: usize = 64 * 1024;

impl Hnsw {
    /// Exact size of the body `write_to` writes.
    pub(crate) fn body_len(&self) -> u64 {
        expected_body_len(
            self.dim as u64,
            self.params.m as u64,
            self.rows() as u64,
            self.links_upper.len() as u64,
        )
        .expect("an index in memory has a representable size")
    }

    /// Checks what the checksum cannot: that a file's graph is one this code can walk
    /// without going out of bounds. Fills the derived fields (`deleted`, `upper_offsets`,
    /// `rows_by_key`).
    pub(crate) fn validate(&mut self, deleted: &[u8]) -> Result<(), AnnError> {
        let corrupt = |what: String| Err(AnnError::Corrupt(what));
        let rows = self.rows();
        let m = self.params.m;
        if rows == 0 {
            if self.entry != NONE || self.max_level != 0 || !self.links_upper.is_empty() {
                return corrupt(format!(
                    "an index without rows has entry row {}, max level {} and {} upper-layer \
                     slots (expected none, 0 and 0)",
                    self.entry,
                    self.max_level,
                    self.links_upper.len()
                ));
            }
            return Ok(());
        }
        if self.entry as usize >= rows {
            return corrupt(format!("entry row {} of {rows} rows", self.entry));
        }
        if self.max_level != usize::from(self.levels[self.entry as usize]) {
            return corrupt(format!(
                "max level {} differs from the entry row's level {}",
                self.max_level, self.levels[self.entry as usize]
            ));
        }
        self.deleted = Vec::with_capacity(rows);
        self.upper_offsets = Vec::with_capacity(rows);
        let mut offset = 0usize;
        for (row, &tombstone) in deleted.iter().enumerate() {
            let flag = match tombstone {
                0 => false,
                1 => true,
                other => {
                    return corrupt(format!(
                        "tombstone flag {other} of row {row} (expected 0 or 1)"
                    ))
                }
            };
            self.deleted.push(flag);
            let level = usize::from(self.levels[row]);
            if level > self.max_level {
                return corrupt(format!(
                    "row {row} has level {level} above the max level {}",
                    self.max_level
                ));
            }
            if level == 0 {
                self.upper_offsets.push(NONE);
            } else {
                match u32::try_from(offset) {
                    Ok(at) if at != NONE => self.upper_offsets.push(at),
                    _ => return corrupt(format!("row {row}'s upper layers start past u32")),
                }
                offset += level * (1 + m);
            }
            if flag {
                self.rows_by_key.push_dead(&self.keys, row as u32);
            } else {
                let key = self.keys[row];
                if self
                    .rows_by_key
                    .get(&self.keys, &self.deleted, key)
                    .is_some()
                {
                    return corrupt(format!("key {key} is live in two rows"));
                }
                self.rows_by_key.push(&self.keys, row as u32);
            }
        }
        if offset != self.links_upper.len() {
            return corrupt(format!(
                "{} upper-layer slots, but the levels need {offset}",
                self.links_upper.len()
            ));
        }
        for row in 0..rows as u32 {
            for layer in 0..=usize::from(self.levels[row as usize]) {
                let start = self.block(row, layer);
                let links = if layer == 0 {
                    &self.links0
                } else {
                    &self.links_upper
                };
                let count = links[start] as usize;
                if count > self.capacity(layer) {
                    return corrupt(format!(
                        "row {row} has {count} neighbours on layer {layer} (at most {})",
                        self.capacity(layer)
                    ));
                }
                for &n in &links[start + 1..start + 1 + count] {
                    if n as usize >= rows || usize::from(self.levels[n as usize]) < layer {
                        return corrupt(format!(
                            "row {row} links to row {n} on layer {layer}, which is not there"
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The body length a file with these counts must have, or `None` on overflow.
pub(crate) fn expected_body_len(dim: u64, m: u64, rows: u64, upper_len: u64) -> Option<u64> {
    let per_row = 8u64
        .checked_add(1 + 1)?
        .checked_add(dim.checked_mul(4)?)?
        .checked_add(m.checked_mul(2)?.checked_add(1)?.checked_mul(4)?)?;
    FIXED_BODY_LEN
        .checked_add(rows.checked_mul(per_row)?)?
        .checked_add(upper_len.checked_mul(4)?)
}

pub(crate) fn bad_magic(found: &[u8]) -> AnnError {
    AnnError::BadMagic {
        expected: MAGIC.escape_ascii().to_string(),
        found: found.escape_ascii().to_string(),
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Buffers the body, hashes it and counts it on its way to the writer.
pub(crate) struct HashingWriter<'a, W: Write> {
    pub(crate) inner: &'a mut W,
    pub(crate) hasher: blake3::Hasher,
    pub(crate) buf: Vec<u8>,
    pub(crate) written: u64,
}

impl<'a, W: Write> HashingWriter<'a, W> {
    pub(crate) fn new(inner: &'a mut W) -> Self {
        HashingWriter {
            inner,
            hasher: blake3::Hasher::new(),
            buf: Vec::with_capacity(IO_CHUNK),
            written: 0,
        }
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= IO_CHUNK {
            self.flush_buf()?;
        }
        Ok(())
    }

    pub(crate) fn flush_buf(&mut self) -> io::Result<()> {
        self.hasher.update(&self.buf);
        self.inner.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> io::Result<(blake3::Hash, u64)> {
        self.flush_buf()?;
        Ok((self.hasher.finalize(), self.written))
    }
}

/// Reads the body in bounded chunks, hashing it, and turns a short read into
/// [`AnnError::Truncated`].
pub(crate) struct HashingReader<'a, R: Read> {
    pub(crate) inner: &'a mut R,
    pub(crate) hasher: blake3::Hasher,
    pub(crate) read: u64,
    pub(crate) len: u64,
    /// Allocate each array at its full length up front: the stream is known to hold the body.
    pub(crate) presize: bool,
}

impl<'a, R: Read> HashingReader<'a, R> {
    pub(crate) fn new(inner: &'a mut R, len: u64) -> Self {
        HashingReader {
            inner,
            hasher: blake3::Hasher::new(),
            read: 0,
            len,
            presize: false,
        }
    }

    pub(crate) fn bytes(&mut self, buf: &mut [u8]) -> Result<(), AnnError> {
        let got = fill(self.inner, buf)?;
        self.hasher.update(&buf[..got]);
        self.read += got as u64;
        if got < buf.len() {
            return Err(AnnError::Truncated {
                section: "body",
                expected: self.len,
                found: self.read,
            });
        }
        Ok(())
    }

    pub(crate) fn u32(&mut self) -> Result<u32, AnnError> {
        let mut b = [0u8; 4];
        self.bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, AnnError> {
        let mut b = [0u8; 8];
        self.bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// `count` values of `W` bytes each. The vector grows chunk by chunk as bytes arrive, so
    /// a corrupt count on a short input fails at the end of the input, not in the allocator.
    pub(crate) fn array<T, const W: usize>(
        &mut self,
        count: usize,
        decode: impl Fn([u8; W]) -> T,
    ) -> Result<Vec<T>, AnnError> {
        let mut out = if self.presize {
            Vec::with_capacity(count)
        } else {
            Vec::new()
        };
        let mut buf = vec![0u8; IO_CHUNK - IO_CHUNK % W];
        let mut left = count;
        while left > 0 {
            let n = left.min(buf.len() / W);
            let chunk = &mut buf[..n * W];
            self.bytes(chunk)?;
            out.reserve(n);
            out.extend(
                chunk
                    .chunks_exact(W)
                    .map(|b| decode(b.try_into().expect("W bytes"))),
            );
            left -= n;
        }
        Ok(out)
    }

    /// Reads (and hashes) the rest of the body without keeping it.
    pub(crate) fn drain(&mut self) -> Result<(), AnnError> {
        let mut buf = vec![0u8; IO_CHUNK];
        while self.read < self.len {
            let n = (self.len - self.read).min(IO_CHUNK as u64) as usize;
            self.bytes(&mut buf[..n])?;
        }
        Ok(())
    }

    /// Reads the trailer and compares it with the hash of the body read so far.
    pub(crate) fn verify_trailer(&mut self) -> Result<(), AnnError> {
        let mut stored = [0u8; TRAILER_LEN as usize];
        let got = fill(self.inner, &mut stored)?;
        if got < stored.len() {
            return Err(AnnError::Truncated {
                section: "checksum",
                expected: stored.len() as u64,
                found: got as u64,
            });
        }
        let computed = self.hasher.finalize();
        if computed.as_bytes() != &stored {
            return Err(AnnError::Checksum {
                expected: blake3::Hash::from(stored).to_hex().to_string(),
                computed: computed.to_hex().to_string(),
            });
        }
        Ok(())
    }
}
