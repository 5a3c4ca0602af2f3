//! One model's call: retried after a retryable failure (within the retry budget), handed to
//! the provider's next key when a key is rate limited or refused, and counted as failed
//! (the model or the key rests) when it gives up.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;

use super::super::retry::retry_delay;
use super::super::{EventStream, ProviderError, ProviderRequest};
use super::catalog::Named;
use super::failure::Failure;
use super::health::Health;
use super::{Target, subject};

/// The longest wait before a retry when another model could be tried instead: a longer
/// `retry-after` moves on to the next model at once.
const MAX_WAIT_BEFORE_FALLBACK: Duration = Duration::from_secs(10);

/// One model's call.
pub(super) struct Attempt<'a> {
    /// Its provider.
    pub named: &'a Named,
    /// The model.
    pub target: &'a Target,
    /// The rests.
    pub health: &'a Health,
    /// Retries of a retryable failure.
    pub max_retries: u32,
    /// Whether another model comes after this one.
    pub later: bool,
}

impl Attempt<'_> {
    /// The call's stream, once its first event came; or the failure it gave up on.
    pub async fn run(&self, request: &ProviderRequest) -> Result<EventStream, ProviderError> {
        let mut retries = 0u32;
        // Keys this call already tried: each is handed over to at most once per call.
        let mut tried = vec![false; self.named.key_count()];
        loop {
            let (index, provider) = self.named.pick(self.health, Instant::now(), &tried);
            tried[index] = true;
            let mut request = request.clone();
            request.model = Some(self.target.model.clone());
            let error = match first_event(provider.stream(request)).await {
                Ok(stream) => {
                    self.health.answered(&self.named.key(index));
                    self.health.answered(&subject(self.target));
                    return Ok(stream);
                }
                Err(error) => error,
            };
            let failure = Failure::of(&error);
            if failure.of_key() {
                let rest =
                    self.health
                        .failed(self.named.key(index), failure, &error, Instant::now());
                if self
                    .named
                    .has_untried_key(self.health, Instant::now(), &tried)
                {
                    tracing::warn!(
                        provider = %self.named.name, key = index + 1, rest_s = rest.as_secs(),
                        error = %error, "key failed; trying the provider's next key"
                    );
                    continue;
                }
            }
            if failure.retryable() && retries < self.max_retries {
                let delay = retry_delay(retries, &error);
                if !(self.later && delay > MAX_WAIT_BEFORE_FALLBACK) {
                    tracing::warn!(
                        model = %self.target, attempt = retries + 1, max_retries = self.max_retries,
                        delay_ms = delay.as_millis() as u64, error = %error,
                        "model call failed, retrying"
                    );
                    tokio::time::sleep(delay).await;
                    retries += 1;
                    continue;
                }
            }
            if !failure.of_key() && failure.falls_back() {
                self.health
                    .failed(subject(self.target), failure, &error, Instant::now());
            }
            return Err(error);
        }
    }
}

/// The stream `started` gives, once its first event came: a stream that fails before its
/// first event counts as a failed call (nothing of it was shown), so it may fall back.
async fn first_event(
    started: super::super::BoxFuture<'_, Result<EventStream, ProviderError>>,
) -> Result<EventStream, ProviderError> {
    let mut stream = started.await?;
    match stream.next().await {
        Some(Err(error)) => Err(error),
        Some(Ok(event)) => {
            let first = futures_util::stream::once(async move { Ok(event) });
            Ok(Box::pin(first.chain(stream)))
        }
        None => Err(ProviderError::Stream(
            "the stream ended before its first event".to_owned(),
        )),
    }
}
