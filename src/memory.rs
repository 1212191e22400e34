//! How an audit's memory is allocated and given back: glibc's allocator set up for columns
//! (`configure_allocator`), and freed memory given back to the system between the phases
//! (`release_free`).
//!
//! An audit's phases allocate and free hundreds of megabytes of columns, on several threads.
//! glibc keeps what is freed for later allocations; what no later allocation reuses still
//! counts in the process's memory, so the free pages go back to the system at the boundaries
//! where a phase has dropped what it worked with and the next one is about to allocate.

/// The largest allocation glibc serves from its arena rather than mapping it for itself
/// (`configure_allocator`).
const ARENA_UP_TO: usize = 256 << 20;

/// Sets glibc's allocator up for an audit of a snapshot: one arena for every thread, and
/// allocations up to `ARENA_UP_TO` served from it. Called in `main` before any thread starts.
///
/// An audit allocates and frees columns of megabytes to tens of megabytes, phase after phase,
/// on several threads (polars' pool, the readers, the rules beside the verdicts). By default
/// glibc gives each thread an arena of its own, and memory one thread frees is reused only by
/// allocations on that thread; and it maps most blocks that size for themselves (above 128 KiB,
/// a threshold that rises to at most 32 MiB), so each new column is fresh pages that the kernel
/// faults in and zeroes, and each freed one is unmapped. With one arena and blocks up to
/// `ARENA_UP_TO` served from it, what a phase frees is what the next one's columns reuse.
/// The threads then share the arena's lock; their small allocations mostly come from glibc's
/// per-thread caches, which do not take it.
/// Free pages still go back where the peak needs it (`release_free`: before a shuffled
/// snapshot is put in order, before the plan), but not where one phase's threads hand over to
/// the next's (`release_free_for_other_threads`): the one arena reuses them there.
///
/// Only an audit of a snapshot, whose tables are decoded whole before anything else runs, is
/// set up so. A live audit decodes the provider's pages on the runtime's threads, beside
/// preparing the tries, for the listing's whole length, and with these settings the work after
/// its last page took longer (`bench/scale/README.md`, issue 18, stop 29); it keeps glibc's
/// defaults.
///
/// Someone who sets glibc's malloc tunables (`GLIBC_TUNABLES=glibc.malloc.…`) keeps them: the
/// allocator is left as they set it.
pub fn configure_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|set| set.contains("glibc.malloc."));
        if tuned {
            return;
        }
        // SAFETY: mallopt only changes the allocator's settings. It is called before any
        // thread starts, so no thread has made an arena of its own.
        let set = unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, ARENA_UP_TO as libc::c_int) == 1
        };
        ONE_ARENA.store(set, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether `configure_allocator` set up one arena for every thread.
static ONE_ARENA: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`release_free`] where threads allocate from arenas of their own (glibc's default), for a
/// boundary after which other threads allocate what this one freed. With the one arena
/// `configure_allocator` sets, they reuse it as it is: giving it back would only have the
/// kernel fault it in and zero it again.
pub fn release_free_for_other_threads() {
    if !ONE_ARENA.load(std::sync::atomic::Ordering::Relaxed) {
        release_free();
    }
}

/// Returns the free pages of every arena to the system (glibc's `malloc_trim`); elsewhere
/// it does nothing.
pub fn release_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own arenas to the
    // system; it touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}
