//! Query text (and request lines: filters, scope, paging, overrides) through the analyzers
//! and the whole search pipeline over a small index built once per process.
#![no_main]

use finder_index::fuzzing::{query, query_index, ScratchDir};
use finder_index::Finder;
use libfuzzer_sys::fuzz_target;

thread_local! {
    static INDEX: (ScratchDir, Finder) = {
        let dir = ScratchDir::new("finder-fuzz-query");
        let finder = query_index(dir.path());
        (dir, finder)
    };
}

fuzz_target!(|data: &[u8]| {
    INDEX.with(|(_, finder)| query(Some(finder), &String::from_utf8_lossy(data)));
});
