//! JSON Lines bytes through the record reader, as Finder records and as a BEIR corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| finder_index::fuzzing::records(data));
