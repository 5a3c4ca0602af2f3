//! Connection-level retries of a model call, before its stream is handed out.
//!
//! Connect errors, 429 and 5xx are retried ([`ProviderError::is_retryable`]) with exponential
//! backoff (500 ms, 1 s, 2 s, ... capped at 30 s), or after the server's `retry-after`
//! (capped at 60 s) when it sent one. Waiting uses `tokio::time::sleep`, so tests pause time.

use std::future::Future;
use std::time::Duration;

use super::ProviderError;

/// First backoff delay.
const BASE_DELAY: Duration = Duration::from_millis(500);
/// Longest computed backoff delay.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest wait honoured from a `retry-after` header.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Exponential backoff before retry number `attempt + 1`: 500 ms, 1 s, 2 s, ... capped at 30 s.
pub fn backoff(attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
    BASE_DELAY.saturating_mul(factor).min(MAX_BACKOFF)
}

/// How long to wait after `err` before retry number `attempt + 1`: the server's
/// `retry-after` (capped at 60 s) when given, else [`backoff`].
pub fn retry_delay(attempt: u32, err: &ProviderError) -> Duration {
    match err {
        ProviderError::Status {
            retry_after: Some(secs),
            ..
        } => Duration::from_secs(*secs).min(MAX_RETRY_AFTER),
        _ => backoff(attempt),
    }
}

/// Runs `f` until it succeeds, fails with a non-retryable error, or has been retried
/// `max_retries` times (so at most `max_retries + 1` calls); returns the last outcome.
pub async fn with_retries<F, Fut, T>(max_retries: u32, mut f: F) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let mut attempt = 0u32;
    loop {
        match f().await {
            Ok(value) => return Ok(value),
            Err(err) if err.is_retryable() && attempt < max_retries => {
                let delay = retry_delay(attempt, &err);
                tracing::warn!(
                    attempt = attempt + 1,
                    max_retries,
                    delay_ms = delay.as_millis() as u64,
                    error = %err,
                    "model call failed, retrying"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use tokio::time::Instant;

    use super::*;

    fn status(code: u16, retry_after: Option<u64>) -> ProviderError {
        ProviderError::Status {
            status: code,
            message: "x".into(),
            retry_after,
        }
    }

    fn connect() -> ProviderError {
        ProviderError::Connect {
            url: "http://127.0.0.1:1".into(),
            reason: "refused".into(),
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_millis(500));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(6), Duration::from_secs(30));
        assert_eq!(backoff(40), Duration::from_secs(30));
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        assert_eq!(
            retry_delay(0, &status(429, Some(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            retry_delay(0, &status(429, Some(600))),
            Duration::from_secs(60)
        );
        assert_eq!(retry_delay(2, &status(503, None)), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_connect_errors_and_5xx_with_backoff_then_succeeds() {
        let calls = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let result = with_retries(3, || {
            let calls = calls.clone();
            async move {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(connect()),
                    1 => Err(status(502, None)),
                    _ => Ok("stream"),
                }
            }
        })
        .await;
        assert!(matches!(result, Ok("stream")));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn honours_retry_after_on_429() {
        let calls = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let result = with_retries(3, || {
            let calls = calls.clone();
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(status(429, Some(5)))
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert!(result.is_ok());
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_retries_with_the_last_error() {
        let calls = Arc::new(AtomicU32::new(0));
        let result: Result<(), _> = with_retries(2, || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(status(500, None))
            }
        })
        .await;
        assert!(matches!(
            result,
            Err(ProviderError::Status { status: 500, .. })
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_client_errors() {
        let calls = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let result: Result<(), _> = with_retries(3, || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(status(401, None))
            }
        })
        .await;
        assert!(matches!(
            result,
            Err(ProviderError::Status { status: 401, .. })
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
