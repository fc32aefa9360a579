//! A note file's bytes: UTF-8 check, front matter, title, summary, fragments and their
//! extents, then links, tags, code spans and mentions over the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| finder_index::fuzzing::note(data));
