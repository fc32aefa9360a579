//! A read-only view of a tantivy index folder that reads its files with positioned reads
//! instead of memory maps, for the build-time walks over the whole document store.
//!
//! A walk through a memory-mapped store leaves every page it touched mapped into the process
//! until the map goes: at a million fragments with their vectors that is gigabytes of resident
//! file pages on top of the build's heap, all at once. Read with `pread`, the pages stay in the
//! kernel's page cache, shared and reclaimable, and the process holds only the block it is
//! decompressing. Queries map the postings and read the document stores with positioned
//! reads, unless the stores are small enough to map as well ([`MAP_STORES_MAX_BYTES`]).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, OwnedBytes, WatchCallback,
    WatchHandle, WritePtr,
};
use tantivy::HasLen;

/// The document stores of a query directory are memory-mapped when they come to at most this
/// many bytes together (the `*.store` and `*.pages` files of the folder, at open), and read
/// with positioned reads above it. A mapped file's pages stay resident once a query touched
/// them, a few dozen KiB a read with the kernel's fault-around, so that is bounded by the
/// files' size; a positioned read costs a system call every time (about 2 µs here, an eighth
/// of a lexical query over 10k fragments, docs/perf/document-store.md).
pub(crate) const MAP_STORES_MAX_BYTES: u64 = 256 << 20;

/// [`MmapDirectory`] for everything but reading the bytes of the files it reads with
/// [`PreadFile`]: every file, only the document stores, or none.
#[derive(Debug, Clone)]
pub(crate) struct PreadDirectory {
    root: PathBuf,
    inner: MmapDirectory,
    reads: Reads,
}

/// Which files a [`PreadDirectory`] reads with positioned reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    All,
    Stores,
    None,
}

impl PreadDirectory {
    /// Every file read with positioned reads: for walks over the whole store.
    pub(crate) fn open(root: &Path) -> Result<PreadDirectory, tantivy::TantivyError> {
        Ok(PreadDirectory {
            root: root.to_path_buf(),
            inner: MmapDirectory::open(root)?,
            reads: Reads::All,
        })
    }

    /// Only the document stores (`*.store`) and page files (`*.pages`) read with positioned
    /// reads, the postings and the rest memory-mapped: for queries. A query reads its page's
    /// records one small block each, at random places in the store; through a memory map
    /// each read would leave its pages, and the kernel's fault-around neighbours, resident in
    /// the process (1.4 GB after 1,000 queries on a million fragments).
    pub(crate) fn stores_only(root: &Path) -> Result<PreadDirectory, tantivy::TantivyError> {
        Ok(PreadDirectory {
            reads: Reads::Stores,
            ..PreadDirectory::open(root)?
        })
    }

    /// For queries: [`Self::stores_only`], or every file memory-mapped when the folder's
    /// document stores come to at most `map_max` bytes ([`MAP_STORES_MAX_BYTES`]).
    pub(crate) fn for_queries(
        root: &Path,
        map_max: u64,
    ) -> Result<PreadDirectory, tantivy::TantivyError> {
        let directory = PreadDirectory::stores_only(root)?;
        let stores = store_bytes(root).map_err(|e| {
            tantivy::TantivyError::from(OpenReadError::wrap_io_error(e, root.to_path_buf()))
        })?;
        Ok(PreadDirectory {
            reads: if stores <= map_max {
                Reads::None
            } else {
                Reads::Stores
            },
            ..directory
        })
    }

    /// Whether the document stores are memory-mapped (not read with positioned reads).
    #[cfg(test)]
    pub(crate) fn maps_stores(&self) -> bool {
        self.reads == Reads::None
    }
}

/// The bytes of the document stores and page files in `root`. A file deleted while they are
/// counted (a writer's merge or garbage collection, running beside a reader) counts nothing.
fn store_bytes(root: &Path) -> io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if !read_like_a_store(&entry.path()) {
            continue;
        }
        match entry.metadata() {
            Ok(meta) => total += meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// Whether `path` is read the way the document stores are: a store (`*.store`) or a page
/// file ([`crate::pages`]), both read a record at a time at random places.
fn read_like_a_store(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "store" || e == crate::files::PAGES_EXTENSION)
}

/// One file, read at an offset on each request.
#[derive(Debug)]
struct PreadFile {
    file: File,
    len: usize,
}

impl HasLen for PreadFile {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for PreadFile {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        let mut buf = vec![0u8; range.len()];
        read_exact_at(&self.file, &mut buf, range.start as u64)?;
        Ok(OwnedBytes::new(buf))
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Directory for PreadDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        if self.reads == Reads::None || (self.reads == Reads::Stores && !read_like_a_store(path)) {
            return self.inner.get_file_handle(path);
        }
        let full = self.root.join(path);
        let wrap = |e: io::Error| match e.kind() {
            io::ErrorKind::NotFound => OpenReadError::FileDoesNotExist(path.to_path_buf()),
            _ => OpenReadError::wrap_io_error(e, path.to_path_buf()),
        };
        let file = File::open(&full).map_err(wrap)?;
        let len = file.metadata().map_err(wrap)?.len() as usize;
        Ok(Arc::new(PreadFile { file, len }))
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::schema::{Schema, Value, STORED, TEXT};
    use tantivy::{doc, Index, TantivyDocument};

    #[test]
    fn reads_what_the_memory_mapped_directory_reads() {
        let dir = tempfile::tempdir().unwrap();
        let mut builder = Schema::builder();
        let body = builder.add_text_field("body", TEXT | STORED);
        let index = Index::create_in_dir(dir.path(), builder.build()).unwrap();
        let mut writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let texts: Vec<String> = (0..500)
            .map(|i| format!("fragment {i} {}", "x".repeat(i)))
            .collect();
        for t in &texts {
            writer.add_document(doc!(body => t.as_str())).unwrap();
        }
        writer.commit().unwrap();

        let mut want = texts.clone();
        want.sort();
        // every file read with pread, then only the stores, then none (stores mapped)
        let mapped = PreadDirectory::for_queries(dir.path(), MAP_STORES_MAX_BYTES).unwrap();
        assert!(mapped.maps_stores(), "a store of 500 short texts is mapped");
        let over = PreadDirectory::for_queries(dir.path(), 0).unwrap();
        assert!(
            !over.maps_stores(),
            "stores over the bound are read with pread"
        );
        for directory in [
            PreadDirectory::open(dir.path()).unwrap(),
            PreadDirectory::stores_only(dir.path()).unwrap(),
            over,
            mapped,
        ] {
            let searcher = Index::open(directory).unwrap().reader().unwrap().searcher();
            let mut read = Vec::new();
            for segment in searcher.segment_readers() {
                let store = segment.get_store_reader(4).unwrap();
                for id in segment.doc_ids_alive() {
                    let d: TantivyDocument = store.get(id).unwrap();
                    let text = d.get_first(body).and_then(|v| v.as_str()).unwrap();
                    read.push(text.to_string());
                }
            }
            read.sort();
            assert_eq!(read, want);
        }
        let missing = PreadDirectory::open(dir.path())
            .unwrap()
            .get_file_handle(Path::new("no-such-file"));
        assert!(matches!(missing, Err(OpenReadError::FileDoesNotExist(_))));
    }
}
