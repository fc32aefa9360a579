//! Settings text as a whole `finder.toml`, and each of its lines as a `--set` override.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| finder_index::fuzzing::config(&String::from_utf8_lossy(data)));
