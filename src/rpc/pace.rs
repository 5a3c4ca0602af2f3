//! The pace of wrong tokens on the RPC listener (`/ws`, `/metrics` where it asks for a token,
//! and the panel's login): each refusal is answered only after [`FAILURE_DELAY`], and
//! refusals take that turn one after the other, so guessing goes at most about three tries a
//! second while fewer than [`MAX_IN_TURN`] wait. A right token is never held up: no lockout
//! another process could use to keep a client out.
//!
//! The turn is bounded: a flood of wrong tokens would otherwise hold a socket and a task for
//! each of them, ever longer. Past [`MAX_IN_TURN`] waiting, a refusal waits
//! [`FAILURE_DELAY`] on its own, so what a flood holds stays about its rate times
//! [`FAILURE_DELAY`], and a guesser then gets about `connections / 0.3 s` answers: the reason
//! a listener off loopback takes only a strong token (`[rpc] token`, 32 characters or more),
//! against which that speed gains nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long the answer to a wrong token waits.
pub const FAILURE_DELAY: Duration = Duration::from_millis(300);
/// Most refusals waiting in turn; more wait side by side.
pub const MAX_IN_TURN: usize = 64;

/// Wrong tokens so far; refusals wait for it in turn.
#[derive(Debug, Default)]
pub struct FailurePace {
    failures: tokio::sync::Mutex<u64>,
    /// Refusals waiting now (in turn or side by side).
    waiting: AtomicUsize,
}

/// Counts one waiting refusal while alive (a client that hangs up drops it early).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl FailurePace {
    /// Holds a refused request (`what`, for the log): after the refusals before it, waits
    /// [`FAILURE_DELAY`]; with [`MAX_IN_TURN`] already waiting, just that delay.
    pub async fn fail(&self, what: &str) {
        let before = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        if before >= MAX_IN_TURN {
            // Once as the flood starts: not a line per refusal.
            if before == MAX_IN_TURN {
                tracing::warn!(
                    "rpc: more than {MAX_IN_TURN} wrong tokens wait; further ones are answered side by side (a flood of guesses?)"
                );
            }
            tokio::time::sleep(FAILURE_DELAY).await;
            return;
        }
        let mut failures = self.failures.lock().await;
        *failures += 1;
        tracing::warn!(
            failures = *failures,
            "rpc: {what} refused: missing or wrong token"
        );
        tokio::time::sleep(FAILURE_DELAY).await;
    }

    /// How many refusals wait now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use super::*;

    fn refuse(pace: &Arc<FailurePace>, n: usize) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|_| {
                let pace = pace.clone();
                tokio::spawn(async move { pace.fail("test").await })
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_wait_in_turn() {
        let pace = Arc::new(FailurePace::default());
        let start = Instant::now();
        for t in refuse(&pace, 5) {
            t.await.unwrap();
        }
        assert_eq!(start.elapsed(), FAILURE_DELAY * 5);
        assert_eq!(pace.waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_turns_bound_a_flood_waits_side_by_side_and_holds_nothing_after() {
        let pace = Arc::new(FailurePace::default());
        let in_turn = refuse(&pace, MAX_IN_TURN);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(pace.waiting(), MAX_IN_TURN);
        // A thousand more: each answered after one delay, not after the whole queue.
        let start = Instant::now();
        for t in refuse(&pace, 1000) {
            t.await.unwrap();
        }
        assert_eq!(start.elapsed(), FAILURE_DELAY);
        let left = pace.waiting();
        assert!((MAX_IN_TURN - 1..=MAX_IN_TURN).contains(&left), "{left}");
        // A client hanging up while it waits is no longer counted.
        let gone = refuse(&pace, 1).remove(0);
        tokio::time::sleep(Duration::from_millis(1)).await;
        gone.abort();
        let _ = gone.await;
        assert!(pace.waiting() <= left, "{}", pace.waiting());
        for t in in_turn {
            t.await.unwrap();
        }
        assert_eq!(pace.waiting(), 0);
    }
}
