//! The index folder as the writer opens it: tantivy's memory-mapped directory, its files
//! written to the kernel in blocks of up to [`WRITE_BYTES`].
//!
//! tantivy writes each file through an 8 KiB buffer, so a segment's document store reaches
//! the kernel one small `write` at a time. ext4 gives a growing file large page-cache folios,
//! and a write that covers part of a new folio has the kernel zero the rest of it, again at
//! each later write into it: at a million fragments (a 3 GB store) that zeroing took more CPU
//! than copying the bytes (docs/perf/large-writes.md). Written a megabyte at a
//! time, a folio is covered whole.

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

/// The most bytes a file being written holds before handing them to the kernel.
pub(crate) const WRITE_BYTES: usize = 1 << 20;

/// [`MmapDirectory`], its files written through [`LargeWrites`].
#[derive(Debug, Clone)]
pub(crate) struct WriteDirectory(MmapDirectory);

impl WriteDirectory {
    pub(crate) fn open(root: &Path) -> tantivy::Result<WriteDirectory> {
        Ok(WriteDirectory(MmapDirectory::open(root)?))
    }
}

/// A file being written, its bytes held until [`WRITE_BYTES`] of them are (the buffer grows
/// with the file, so a small file holds little).
struct LargeWrites {
    inner: Box<dyn TerminatingWrite + Send + Sync>,
    buffer: Vec<u8>,
}

impl LargeWrites {
    fn write_buffer(&mut self) -> io::Result<()> {
        if !self.buffer.is_empty() {
            self.inner.write_all(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }
}

impl Write for LargeWrites {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buffer.len() + bytes.len() > WRITE_BYTES {
            self.write_buffer()?;
        }
        if bytes.len() >= WRITE_BYTES {
            return self.inner.write(bytes);
        }
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_buffer()?;
        self.inner.flush()
    }
}

impl TerminatingWrite for LargeWrites {
    fn terminate_ref(&mut self, token: AntiCallToken) -> io::Result<()> {
        self.write_buffer()?;
        self.inner.terminate_ref(token)
    }
}

impl Drop for LargeWrites {
    /// As a `BufWriter` does: what is held is written, an error ignored (a file tantivy
    /// keeps is terminated, and terminating reports it).
    fn drop(&mut self) {
        let _ = self.write_buffer();
    }
}

impl Directory for WriteDirectory {
    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let inner = self
            .0
            .open_write(path)?
            .into_inner()
            .map_err(|e| OpenWriteError::wrap_io_error(e.into_error(), path.to_path_buf()))?;
        Ok(WritePtr::new(Box::new(LargeWrites {
            inner,
            buffer: Vec::new(),
        })))
    }

    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.0.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.0.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.0.exists(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.0.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.0.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.0.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.0.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.0.watch(watch_callback)
    }
}

#[cfg(test)]
mod tests {
    use tantivy::schema::{Schema, STORED, TEXT};
    use tantivy::{doc, Index, IndexWriter};

    use super::*;

    /// Whatever the sizes of the writes, the file holds every byte in order, and some are
    /// held back until the file is terminated.
    #[test]
    fn a_file_written_in_pieces_holds_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let directory = WriteDirectory::open(dir.path()).unwrap();
        let path = Path::new("pieces.bin");
        let mut out = directory.open_write(path).unwrap();
        let mut expected = Vec::new();
        let sizes = [
            1,
            8191,
            8192,
            3 * WRITE_BYTES / 2,
            5,
            WRITE_BYTES - 3,
            700_000,
        ];
        for (i, size) in sizes.into_iter().enumerate() {
            let piece: Vec<u8> = (0..size).map(|j| (i * 31 + j) as u8).collect();
            out.write_all(&piece).unwrap();
            expected.extend_from_slice(&piece);
        }
        let before = std::fs::metadata(dir.path().join(path)).unwrap().len() as usize;
        assert!(
            before > 0 && before < expected.len(),
            "{before} of {} bytes written before the end",
            expected.len()
        );
        out.terminate().unwrap();
        assert_eq!(std::fs::read(dir.path().join(path)).unwrap(), expected);
    }

    /// An index written through the directory opens from the folder with every file's
    /// checksum right and its documents readable.
    #[test]
    fn an_index_written_through_it_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut schema = Schema::builder();
        let body = schema.add_text_field("body", TEXT | STORED);
        let index = Index::create(
            WriteDirectory::open(dir.path()).unwrap(),
            schema.build(),
            Default::default(),
        )
        .unwrap();
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let texts: Vec<String> = (0..3000)
            .map(|i| format!("document {i} {}", "word ".repeat(i % 200)))
            .collect();
        for text in &texts {
            writer.add_document(doc!(body => text.as_str())).unwrap();
        }
        writer.commit().unwrap();
        drop(writer);
        let reopened = Index::open_in_dir(dir.path()).unwrap();
        assert!(reopened.validate_checksum().unwrap().is_empty());
        let searcher = reopened.reader().unwrap().searcher();
        assert_eq!(searcher.num_docs(), texts.len() as u64);
        let last: tantivy::TantivyDocument = searcher
            .doc(tantivy::DocAddress::new(0, texts.len() as u32 - 1))
            .unwrap();
        assert_eq!(
            tantivy::schema::Value::as_str(&last.get_first(body).unwrap()),
            Some(texts.last().unwrap().as_str())
        );
    }
}
