//! Deadlines that cannot overflow. `Instant + Duration` panics when the sum passes the
//! clock's range, and a duration can come from outside (the config, a chat command, a
//! platform's answer): [`after`] and [`later`] saturate instead, a wait too long to add
//! being as good as forever.

use std::time::Duration;

use tokio::time::Instant;

/// What "forever" is when a duration cannot be added: about thirty years.
pub const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// `from + wait`, or `from` + [`FOREVER`] when that sum would overflow the clock.
pub fn later(from: Instant, wait: Duration) -> Instant {
    from.checked_add(wait)
        .or_else(|| from.checked_add(FOREVER))
        .unwrap_or(from)
}

/// [`later`] from now (the runtime's clock, so paused time in tests moves it).
pub fn after(wait: Duration) -> Instant {
    later(Instant::now(), wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_too_long_to_add_saturates_instead_of_panicking() {
        let now = Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = later(now, Duration::from_secs(u64::MAX));
        assert_eq!(far, now + FOREVER);
        assert!(after(Duration::MAX) > now);
    }
}
