//! The `chela` binary's allocator: jemalloc. glibc's malloc kept what a burst of traffic had
//! used (5,000 sessions' worth stayed mapped after every lane had gone, issue #11); jemalloc's
//! background thread gives freed pages back to the system after its decay time (10 s), so a
//! gateway's memory goes back down when it idles. `tikv-jemallocator` is the well-kept
//! binding (TiKV, rustc), and `tikv-jemalloc-ctl` turns the thread on without `unsafe`.
//! jemalloc's built-in options come from `.cargo/config.toml` (`JEMALLOC_SYS_WITH_MALLOC_CONF`):
//! freed memory goes back after about 1 s instead of 10 s, so RSS stays near what is live
//! under load.

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
    fn jemalloc_is_built_with_the_short_decay_of_cargo_config() {
        let built_in = tikv_jemalloc_ctl::config::malloc_conf::read().unwrap_or_default();
        assert!(
            built_in.contains("dirty_decay_ms:1000") && built_in.contains("muzzy_decay_ms:0"),
            "jemalloc's built-in options: {built_in:?}"
        );
    }

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
