//! The `chela` binary's allocator: jemalloc. glibc's malloc kept what a burst of traffic had
//! used (5,000 sessions' worth stayed mapped after every lane had gone, issue #11); jemalloc's
//! background thread gives freed pages back to the system after its decay time (10 s), so a
//! gateway's memory goes back down when it idles. `tikv-jemallocator` is the well-kept
//! binding (TiKV, rustc), and `tikv-jemalloc-ctl` turns the thread on without `unsafe`.

/// Every allocation of the `chela` binary goes through jemalloc.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Starts jemalloc's background purging thread, for the long-running commands (`gateway`,
/// `chat`). If it cannot start, a warning says so and freed memory stays mapped until it is
/// used again (as it was with glibc).
pub fn give_back_idle_memory() {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(
            error = %e,
            "allocator: jemalloc's background thread did not start; memory freed while idle \
             is not given back to the system"
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_background_thread_that_gives_memory_back_runs() {
        assert_eq!(
            tikv_jemalloc_ctl::background_thread::read().ok(),
            Some(false)
        );
        super::give_back_idle_memory();
        assert_eq!(
            tikv_jemalloc_ctl::background_thread::read().ok(),
            Some(true)
        );
    }
}
