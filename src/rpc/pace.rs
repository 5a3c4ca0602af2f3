//! The pace of wrong tokens on the RPC listener (`/ws`, and `/metrics` where it asks for a
//! token), as the panel paces failed logins: each refusal is answered only after
//! [`FAILURE_DELAY`], and refusals take that turn one after the other, so guessing goes at
//! most about three tries a second however many connections try at once. A right token is
//! never held up: no lockout another process could use to keep a client out.

use std::time::Duration;

/// How long the answer to a wrong token waits (the panel's login waits as long).
pub const FAILURE_DELAY: Duration = Duration::from_millis(300);

/// Wrong tokens so far; refusals wait for it in turn.
#[derive(Debug, Default)]
pub struct FailurePace {
    failures: tokio::sync::Mutex<u64>,
}

impl FailurePace {
    /// Holds a refused request: after the refusals before it, waits [`FAILURE_DELAY`].
    pub async fn fail(&self, what: &str) {
        let mut failures = self.failures.lock().await;
        *failures += 1;
        tracing::warn!(
            failures = *failures,
            "rpc: {what} refused: missing or wrong token"
        );
        tokio::time::sleep(FAILURE_DELAY).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn refusals_wait_in_turn() {
        let pace = Arc::new(FailurePace::default());
        let start = Instant::now();
        let tries: Vec<_> = (0..5)
            .map(|_| {
                let pace = pace.clone();
                tokio::spawn(async move { pace.fail("test").await })
            })
            .collect();
        for t in tries {
            t.await.unwrap();
        }
        assert!(start.elapsed() >= FAILURE_DELAY * 5);
    }
}
