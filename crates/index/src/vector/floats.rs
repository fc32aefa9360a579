//! Where the HNSW index keeps its `f32` rows: in memory while it is built or updated, or read
//! in place from the index file through a memory map when it only answers queries.
//!
//! A million 384-dimensional rows are 1.5 GB. A query walks the graph over `i8` codes of the
//! rows (a quarter of the size, held in memory) and reads full rows only to re-score the few
//! hundred it keeps, so a query-side index maps the file instead of copying it: the pages
//! of rows never re-scored never become part of the process.

use std::fs::File;
use std::io;
use std::ops::Deref;

/// The `f32` rows of an index, row-major.
pub(crate) enum Floats {
    Owned(Vec<f32>),
    /// `len` floats starting `start` bytes into the map, which is 4-byte aligned (checked
    /// when it is made).
    Mapped {
        map: memmap2::Mmap,
        start: usize,
        len: usize,
    },
}

impl Floats {
    /// Whether floats starting `start` bytes into a file can be read in place: the start
    /// must be 4-byte aligned (files of format version 1 are not) and the machine
    /// little-endian, as the file is.
    pub(crate) fn can_map(start: usize) -> bool {
        cfg!(target_endian = "little") && start.is_multiple_of(std::mem::align_of::<f32>())
    }

    /// Maps the `len` floats at byte `start` of `file`, which [`Floats::can_map`] allows.
    ///
    /// The file must not be written in place while mapped: the index replaces `ann.bin` by
    /// writing a new file and renaming it over the old one, which leaves a mapping of the old
    /// file intact.
    pub(crate) fn map(file: &File, start: usize, len: usize) -> io::Result<Floats> {
        assert!(
            Floats::can_map(start),
            "floats at byte {start} cannot be mapped"
        );
        // SAFETY: the map is read-only, and index files are replaced by rename, never
        // rewritten in place, so the mapped bytes do not change underneath it (see above).
        let map = unsafe { memmap2::Mmap::map(file) }?;
        let end = len
            .checked_mul(4)
            .and_then(|n| n.checked_add(start))
            .filter(|&end| end <= map.len())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the vectors need bytes {start}..{} of the file, which has {}",
                        start as u128 + len as u128 * 4,
                        map.len()
                    ),
                )
            })?;
        // The map starts on a page boundary, so an aligned start is an aligned address.
        debug_assert!(bytemuck::try_cast_slice::<u8, f32>(&map[start..end]).is_ok());
        // Rows are re-scored in no particular order: read-ahead would only map pages that
        // no query asked for.
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Random);
        Ok(Floats::Mapped { map, start, len })
    }

    /// The rows, to change: a mapped index copies them into memory first.
    pub(crate) fn to_mut(&mut self) -> &mut Vec<f32> {
        if let Floats::Mapped { .. } = self {
            *self = Floats::Owned(self.to_vec());
        }
        match self {
            Floats::Owned(v) => v,
            Floats::Mapped { .. } => unreachable!("just copied into memory"),
        }
    }

    /// Whether the rows are read from a memory map.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Floats::Mapped { .. })
    }
}

impl Deref for Floats {
    type Target = [f32];

    #[inline]
    fn deref(&self) -> &[f32] {
        match self {
            Floats::Owned(v) => v,
            Floats::Mapped { map, start, len } => {
                bytemuck::cast_slice(&map[*start..*start + *len * 4])
            }
        }
    }
}

impl Default for Floats {
    fn default() -> Self {
        Floats::Owned(Vec::new())
    }
}
