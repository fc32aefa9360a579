//! The allocator's purge delay while builds keep freed memory. A test binary of its own: the
//! option is the process's, and the `it` tests' builds, running alongside, hold it too.
#![cfg(feature = "mimalloc")]

use finder_tuning::{purge_delays, KeepFreedMemory};

#[test]
fn the_delay_is_held_while_any_build_keeps_memory_and_restored_after_the_last() {
    let (before, build) = purge_delays();
    let set = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"]
        .iter()
        .any(|name| std::env::var_os(name).is_some());
    if !set {
        // the option number is mimalloc's purge delay: its default in mimalloc 3
        assert_eq!(before, 1000);
    }
    // mimalloc's own delay (or one set in MIMALLOC_PURGE_DELAY) is shorter: it is raised; a
    // longer one, or purging turned off (-1), is left as it is
    let expected = if (0..build).contains(&before) {
        build
    } else {
        before
    };
    let first = KeepFreedMemory::hold();
    assert_eq!(purge_delays().0, expected);
    let second = KeepFreedMemory::hold();
    drop(first);
    assert_eq!(
        purge_delays().0,
        expected,
        "the second build still keeps memory"
    );
    drop(second);
    assert_eq!(purge_delays().0, before, "restored after the last");
    // and again, from the restored state
    let again = KeepFreedMemory::hold();
    assert_eq!(purge_delays().0, expected);
    drop(again);
    assert_eq!(purge_delays().0, before);
}
