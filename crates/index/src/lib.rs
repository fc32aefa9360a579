//! Finder's embedded index: ingestion of files and records, the tantivy-backed store, the
//! lexical channels, and the query pipeline over an index folder.
//!
//! An index folder holds `lexical/` (a tantivy index: one document per fragment, the source
//! record on each source's first fragment, commit info in the commit payload) and an optional
//! `finder.toml`. Everything in it is derived from the inputs and can be rebuilt.

mod analyzer;
mod bytes;
mod document;
mod engine;
mod error;
pub mod expand;
mod files;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
mod ingest;
mod keys;
mod large_writes;
mod lexical;
mod pages;
mod postings;
mod pread;
mod preview;
mod profiles;
mod record;
mod schema;
mod slots;
mod stored;
mod vector;
mod writer;

pub use analyzer::{looks_like_identifier, ANALYSIS};
pub use document::{vector_home, FragmentDoc, Problem, SourceDoc};
pub use engine::{
    like_request, load_settings, query_settings, Finder, GraphStatus, Status, CONFIG_FILE,
};
pub use error::{IndexError, Result};
pub use ingest::{derive_summary, detect, fragment, read_input, InputKind};
pub use keys::{fragment_key, source_key};
pub use preview::preview;
pub use record::{CommitInfo, RunCounts};
pub use vector::{
    build_vectors, fragment_text_to_embed, VectorProgress, VectorReport, VectorState,
};
pub use writer::{index_inputs, Progress, RunReport};

/// Threads for work shared out over the cores (HNSW batches, mention scans): the available
/// parallelism, at most 8.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// `f` over every item on up to [`cores`] threads, each thread taking the next item when it
/// is done with one (put the largest items first); the results in the items' order. On this
/// thread when there is one item or one core.
pub(crate) fn each_on_cores<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = cores().min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(at) else {
                return done;
            };
            done.push((at, f(item)));
        }
    };
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a worker thread panicked"))
            .collect()
    });
    done.sort_unstable_by_key(|(at, _)| *at);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Hands the heap a build phase has freed back to the operating system. glibc keeps freed
/// blocks for reuse, and a phase that held a gigabyte in small blocks (the graph build's
/// texts, the vector build's rows) would otherwise stay resident through every later phase
/// and every query of the process. With the `mimalloc` feature, the free pages mimalloc's
/// threads keep for reuse go back too. Elsewhere a no-op.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free pages of glibc's own heap to the kernel; it
    // touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(feature = "mimalloc")]
    // SAFETY: `mi_collect` only frees and purges memory mimalloc holds as free.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

/// mimalloc's option number for its purge delay (`mi_option_purge_delay` in `mimalloc.h`, 15
/// in mimalloc 2 and 3; the sys crate, pinned, names no constant for it). The test binary
/// `keep_freed` checks it against mimalloc 3's default delay.
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long, in milliseconds, mimalloc keeps what a lexical build frees before handing it back
/// to the kernel: longer than a build's phases, so memory freed by one segment's writer or one
/// share of texts is used again by the next instead of being handed back and faulted in, zeroed,
/// again. mimalloc's own delay is a second: a 1M build handed back and took again 8.7 GiB
/// (12k purges); held, its CPU went down 12% (docs/perf/allocator.md).
#[cfg(feature = "mimalloc")]
pub(crate) const BUILD_PURGE_DELAY_MS: std::ffi::c_long = 600_000;

/// While alive, memory the process frees stays with the allocator for reuse (with the
/// `mimalloc` feature; elsewhere nothing changes). When the last one held is dropped, the
/// allocator's delay is restored and everything free is handed back
/// ([`release_free_memory`]), so what a build held is not kept past it. The peak is then the
/// build's largest working set rather than what it held between two purges: 1.2-1.45 ->
/// 1.65-1.94 GiB for a 1M lexical build, below the query phase's with vectors.
#[doc(hidden)]
pub struct KeepFreedMemory(());

/// How many [`KeepFreedMemory`] are alive, and the delay the first one found.
#[cfg(feature = "mimalloc")]
static KEEP_FREED: std::sync::Mutex<(usize, std::ffi::c_long)> = std::sync::Mutex::new((0, 0));

impl KeepFreedMemory {
    pub fn hold() -> KeepFreedMemory {
        #[cfg(feature = "mimalloc")]
        {
            let mut held = KEEP_FREED.lock().unwrap_or_else(|e| e.into_inner());
            if held.0 == 0 {
                // SAFETY: reading and setting one of mimalloc's options, which it reads as it
                // runs.
                unsafe {
                    held.1 = libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY);
                    // a delay set longer, or purging turned off (-1), is left as it is
                    if (0..BUILD_PURGE_DELAY_MS).contains(&held.1) {
                        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, BUILD_PURGE_DELAY_MS);
                    }
                }
            }
            held.0 += 1;
        }
        KeepFreedMemory(())
    }
}

impl Drop for KeepFreedMemory {
    fn drop(&mut self) {
        #[cfg(feature = "mimalloc")]
        {
            let mut held = KEEP_FREED.lock().unwrap_or_else(|e| e.into_inner());
            held.0 -= 1;
            if held.0 > 0 {
                return;
            }
            // SAFETY: as in `hold`.
            unsafe {
                libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, held.1);
            }
        }
        release_free_memory();
    }
}

/// While alive, the process's memory is faulted in as 4 KiB pages: the kernel's transparent
/// huge pages are off for it (`PR_SET_THP_DISABLE`, Linux with glibc; elsewhere nothing
/// changes). When the last one held is dropped, they are on again, unless they were off before
/// the first.
///
/// A build of at most 1 GiB of input ([`index_inputs`], the runs one indexing thread writes)
/// holds it, from opening its writer to the end of its graph build. mimalloc asks for huge
/// pages on its arenas, so the first touch of each 2 MiB of them has the kernel zero all of it,
/// and a build's threads touch many such blocks a little: in a 1,000-record build the indexing
/// thread spent 29% of the run's samples in `clear_page_erms`, 1.5% without huge pages. Without
/// them, in interleaved runs (docs/perf/allocator.md), the lexical layer of the
/// 10k corpus took a median 0.46 s instead of 0.62 (faster in 10 of 11 pairs) and of 100k 3.06
/// instead of 3.27, with 19-27% less peak memory. A 1M build (5.8 GB of input) was faster
/// without them in none of four pairs (0.1-9% slower in three, 44% in one), so larger builds
/// keep them. Turning them back on before the graph build made that build a third slower (its
/// allocations then fall on ranges the lexical phase left in small pages), so the graph is
/// built without them too.
#[doc(hidden)]
pub struct SmallPages(());

/// How many [`SmallPages`] are alive, and whether the first one turned huge pages off.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
static SMALL_PAGES: std::sync::Mutex<(usize, bool)> = std::sync::Mutex::new((0, false));

impl SmallPages {
    pub fn hold() -> SmallPages {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let mut held = SMALL_PAGES.lock().unwrap_or_else(|e| e.into_inner());
            if held.0 == 0 {
                // SAFETY: reading and setting the process's huge-page flag; a failure (an old
                // kernel) leaves it as it was, and only the speed-up is lost.
                held.1 = unsafe {
                    libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0
                        && libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
                };
            }
            held.0 += 1;
        }
        SmallPages(())
    }
}

impl Drop for SmallPages {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let mut held = SMALL_PAGES.lock().unwrap_or_else(|e| e.into_inner());
            held.0 -= 1;
            if held.0 == 0 && held.1 {
                // SAFETY: as in `hold`.
                unsafe {
                    libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
                }
                held.1 = false;
            }
        }
    }
}

/// Has glibc map every block of 128 KiB or more on its own, once per process. By default its
/// threshold rises (up to 32 MiB) each time such a block is freed, after which blocks of that
/// size come from the heap, where a few that outlive a build keep the pages around them:
/// at a million fragments half a gigabyte of heap stayed resident after the build, through
/// every query. Mapped blocks go back to the kernel when freed. Elsewhere a no-op.
pub(crate) fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: `mallopt` only sets one of glibc's allocation parameters.
        ONCE.call_once(|| unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        });
    }
}

fn store_error(dir: &std::path::Path, source: tantivy::TantivyError) -> IndexError {
    IndexError::Storage {
        path: dir.to_path_buf(),
        source,
    }
}

#[doc(hidden)]
pub mod testing {
    //! Internals exposed for the integration tests and benchmarks only.
    pub use crate::analyzer::terms as analyze;
    pub use crate::lexical::{query_terms, top_k};
    pub use finder_ann::{Hnsw, HnswParams};

    /// [`crate::index_inputs`], with inputs of at most `one_thread_max_bytes` written by one
    /// indexing thread (the default is 1 GiB; 0 keeps a thread per core for any input).
    pub fn index_inputs_one_thread_up_to(
        dir: &std::path::Path,
        inputs: &[std::path::PathBuf],
        settings: &finder_core::Settings,
        one_thread_max_bytes: u64,
    ) -> crate::error::Result<crate::RunReport> {
        crate::writer::index_inputs_one_thread_up_to(
            dir,
            inputs,
            settings,
            &mut |_| {},
            one_thread_max_bytes,
        )
    }

    /// Reads JSON Lines records from `bytes` as an indexing run's reading thread does (the
    /// given vectors, fragments, summaries, hashes) and returns how many sources came out.
    pub fn read_record_lines(bytes: &[u8]) -> usize {
        let settings = finder_core::IndexSettings::default();
        let mut sources = 0;
        crate::ingest::read_lines(
            bytes,
            "bench.jsonl",
            crate::ingest::Layout::Records,
            "bench",
            &settings,
            &mut |item| sources += usize::from(item.is_ok()),
        );
        sources
    }

    /// The word analyzer for `language`, as new indexes use it.
    pub fn word_analyzer(language: &str) -> tantivy::tokenizer::TextAnalyzer {
        crate::analyzer::word_analyzer(language, crate::analyzer::ANALYSIS)
    }

    /// The word analyzer for `language` as analysis version `analysis` made it (an index
    /// written by an older version is queried with its own).
    pub fn word_analyzer_at(language: &str, analysis: u32) -> tantivy::tokenizer::TextAnalyzer {
        crate::analyzer::word_analyzer(language, analysis)
    }

    /// The whole-word analyzer, as the index uses it.
    pub fn raw_analyzer() -> tantivy::tokenizer::TextAnalyzer {
        crate::analyzer::raw_analyzer()
    }

    /// The plugin that writes Finder's postings, as a run of the current analysis registers
    /// it (a test that writes to an index itself must register it too).
    pub fn postings_plugin(language: &str) -> std::sync::Arc<dyn tantivy::SegmentPlugin> {
        crate::postings::WordsPlugin::new(language, crate::analyzer::ANALYSIS)
    }

    pub use crate::{KeepFreedMemory, SmallPages};

    /// Page files the calling thread's indexing runs wrote from the records they made as they
    /// added their documents, rather than from a segment's store.
    pub fn page_files_written_ahead() -> u64 {
        crate::pages::WRITTEN_AHEAD.with(std::cell::Cell::get)
    }

    /// Whether the process's memory is faulted in as small pages now: its transparent huge
    /// pages off ([`SmallPages`]).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub fn small_pages_now() -> bool {
        // SAFETY: reading the process's huge-page flag.
        unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
    }

    /// mimalloc's purge delay now, and the one a build holds ([`KeepFreedMemory`]).
    #[cfg(feature = "mimalloc")]
    pub fn purge_delays() -> (std::ffi::c_long, std::ffi::c_long) {
        // SAFETY: reading one of mimalloc's options.
        let now = unsafe { libmimalloc_sys::mi_option_get(crate::MI_OPTION_PURGE_DELAY) };
        (now, crate::BUILD_PURGE_DELAY_MS)
    }

    /// The BM25 field of an opened index.
    pub fn text_field(index: &tantivy::Index) -> tantivy::schema::Field {
        index.schema().get_field("text").expect("text field")
    }
}
