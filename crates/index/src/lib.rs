//! Finder's embedded index: ingestion of files and records, the tantivy-backed store, the
//! lexical channels, and the query pipeline over an index folder.
//!
//! An index folder holds `lexical/` (a tantivy index: one document per fragment, the source
//! record on each source's first fragment, commit info in the commit payload) and an optional
//! `finder.toml`. Everything in it is derived from the inputs and can be rebuilt.

mod analyzer;
mod document;
mod engine;
mod error;
pub mod expand;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
mod ingest;
mod keys;
mod large_writes;
mod lexical;
mod order;
mod pages;
mod postings;
mod pread;
mod preview;
mod profiles;
mod record;
mod schema;
mod slots;
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
    pub use crate::vector::ann::{Hnsw, HnswParams};

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

    /// The BM25 field of an opened index.
    pub fn text_field(index: &tantivy::Index) -> tantivy::schema::Field {
        index.schema().get_field("text").expect("text field")
    }
}
