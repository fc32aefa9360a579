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
pub mod freshness;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
mod ingest;
mod keys;
mod large_writes;
mod lexical;
mod live;
mod pages;
mod postings;
mod pread;
mod preview;
mod profiles;
mod record;
mod schema;
mod slots;
mod stored;
mod tuning;
mod vector;
pub mod watch;
mod writer;

pub use analyzer::{looks_like_identifier, ANALYSIS};
pub use document::{detected_language, indexed_text, vector_home, FragmentDoc, Problem, SourceDoc};
pub use engine::{
    like_request, load_settings, query_settings, Finder, GraphStatus, Passage, SourceText, Status,
    CONFIG_FILE,
};
pub use error::{IndexError, Result};
pub use ingest::{derive_summary, detect, fragment, read_input, read_record_lines, InputKind};
pub use keys::{fragment_key, part_key, source_key};
pub use live::LiveProgress;
pub use preview::preview;
pub use profiles::{envelope_attrs, read_profiles};
pub use record::{CommitInfo, RunCounts};
pub use tuning::{install_process_tuning, ProcessTuning, TuningGuard};
pub use vector::{
    build_vectors, fragment_text_to_embed, VectorProgress, VectorReport, VectorState,
};
pub use writer::{
    index_changed, index_inputs, read_input_at, Admit, Focus, Follower, Progress, RunPlan,
    RunReport,
};

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

    /// The `auto` word analyzer of the sources whose Latin words are in `latin` (a language
    /// [`crate::detected_language`] gives), as analysis version `analysis` made it.
    pub fn source_word_analyzer_at(latin: &str, analysis: u32) -> tantivy::tokenizer::TextAnalyzer {
        crate::analyzer::source_word_analyzer(latin, analysis)
    }

    /// The whole-word analyzer, as the index uses it.
    pub fn whole_word_analyzer() -> tantivy::tokenizer::TextAnalyzer {
        crate::analyzer::whole_word_analyzer()
    }

    /// The plugin that writes Finder's postings, as a run of the current analysis registers
    /// it (a test that writes to an index itself must register it too).
    pub fn postings_plugin(language: &str) -> std::sync::Arc<dyn tantivy::SegmentPlugin> {
        crate::postings::PostingsPlugin::new(language, crate::analyzer::ANALYSIS)
    }

    /// Page files the calling thread's indexing runs wrote from the records they made as they
    /// added their documents, rather than from a segment's store.
    pub fn page_files_written_ahead() -> u64 {
        crate::pages::WRITTEN_AHEAD.with(std::cell::Cell::get)
    }

    /// The BM25 field of an opened index.
    pub fn text_field(index: &tantivy::Index) -> tantivy::schema::Field {
        index.schema().get_field("text").expect("text field")
    }
}
