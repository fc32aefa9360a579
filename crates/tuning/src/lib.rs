//! Process-wide memory tuning for Finder's binaries: glibc's mapping threshold and heap trim,
//! mimalloc's purge delay (with the `mimalloc` feature, for a binary whose global allocator is
//! mimalloc) and transparent huge pages for small builds.
//!
//! Nothing here runs unless a binary calls [`install`]: the index crate only marks where its
//! phases begin and end ([`finder_index::ProcessTuning`]). A library that embeds Finder keeps
//! its process as it was.

use finder_index::{ProcessTuning, TuningGuard};

/// The tuning `finder` and `finder-bench` run with.
struct Tuning;

impl ProcessTuning for Tuning {
    fn map_large_blocks(&self) {
        map_large_blocks();
    }

    fn release_free_memory(&self) {
        release_free_memory();
    }

    fn keep_freed_memory(&self) -> TuningGuard {
        TuningGuard::holding(KeepFreedMemory::hold())
    }

    fn small_pages(&self) -> TuningGuard {
        TuningGuard::holding(SmallPages::hold())
    }
}

/// Installs this tuning for the index's phases, once per process.
pub fn install() {
    finder_index::install_process_tuning(&Tuning);
}

/// Hands the heap a build phase has freed back to the operating system. glibc keeps freed
/// blocks for reuse, and a phase that held a gigabyte in small blocks (the graph build's
/// texts, the vector build's rows) would otherwise stay resident through every later phase
/// and every query of the process. With the `mimalloc` feature, the free pages mimalloc's
/// threads keep for reuse go back too. Elsewhere a no-op.
pub fn release_free_memory() {
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
const BUILD_PURGE_DELAY_MS: std::ffi::c_long = 600_000;

/// While alive, memory the process frees stays with the allocator for reuse (with the
/// `mimalloc` feature; elsewhere nothing changes). When the last one held is dropped, the
/// allocator's delay is restored and everything free is handed back
/// ([`release_free_memory`]), so what a build held is not kept past it. The peak is then the
/// build's largest working set rather than what it held between two purges: 1.2-1.45 ->
/// 1.65-1.94 GiB for a 1M lexical build, below the query phase's with vectors.
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
/// A build of at most 1 GiB of input (`finder_index::index_inputs`, the runs one indexing thread writes)
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
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: `mallopt` only sets one of glibc's allocation parameters.
        ONCE.call_once(|| unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        });
    }
}

/// Whether the process's memory is faulted in as small pages now: its transparent huge pages
/// off ([`SmallPages`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn small_pages_now() -> bool {
    // SAFETY: reading the process's huge-page flag.
    unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
}

/// mimalloc's purge delay now, and the one a build holds ([`KeepFreedMemory`]).
#[cfg(feature = "mimalloc")]
pub fn purge_delays() -> (std::ffi::c_long, std::ffi::c_long) {
    // SAFETY: reading one of mimalloc's options.
    let now = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    (now, BUILD_PURGE_DELAY_MS)
}
