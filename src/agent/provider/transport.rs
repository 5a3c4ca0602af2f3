//! What both wire formats share: the HTTP POST with retries, error bodies, the SSE decoding
//! driver (via `eventsource-stream`) and the idle timeout.

use std::collections::VecDeque;
use std::fmt::Display;
use std::time::Duration;

use eventsource_stream::{Event, Eventsource};
use futures_util::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::retry::with_retries;
use super::{EventStream, ProviderError, ProviderEvent};

/// Longest error message kept from an error body.
const MAX_MESSAGE_CHARS: usize = 300;
/// Longest wait for a TCP/TLS connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Turns SSE events of one wire format into [`ProviderEvent`]s.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one SSE event, pushing what it produced to `out`; returns true when the
    /// stream is complete (the last pushed event is then `Done`).
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError>;

    /// Called when the bytes end before [`Decoder::on_event`] returned true.
    fn on_end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError>;
}

/// Connections to a model endpoint kept open between calls.
const IDLE_CONNECTIONS: usize = 32;

/// Builds the HTTP client both providers use (connect timeout, no overall timeout:
/// streams are bounded by the idle timeout instead).
pub(crate) fn http_client() -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // Up to the run limit's worth of calls go at once; only some connections stay open
        // for reuse afterwards (each costs tens of KB of buffers).
        .pool_max_idle_per_host(IDLE_CONNECTIONS)
        .build()
        .map_err(|e| ProviderError::NotConfigured(format!("cannot set up HTTP: {e}")))
}

/// One endpoint of a provider: where to POST and with which headers.
pub(crate) struct Endpoint<'a> {
    /// The HTTP client.
    pub client: &'a reqwest::Client,
    /// Full URL of the call.
    pub url: &'a str,
    /// Base URL, named in connect errors.
    pub base_url: &'a str,
    /// Headers, auth included (never logged).
    pub headers: &'a HeaderMap,
    /// Longest wait for response headers and for each later event.
    pub idle_timeout: Duration,
    /// Connection-level retries.
    pub max_retries: u32,
}

/// POSTs `body` (retrying connect errors, 429 and 5xx) and decodes the SSE answer.
pub(crate) async fn stream_call<D: Decoder, B: serde::Serialize + Sync>(
    endpoint: Endpoint<'_>,
    body: &B,
    decoder: D,
) -> Result<EventStream, ProviderError> {
    let Endpoint {
        client,
        url,
        base_url,
        headers,
        idle_timeout,
        max_retries,
    } = endpoint;
    let response = with_retries(max_retries, move || async move {
        let send = client
            .post(url)
            .headers(headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body)
            .send();
        let response = tokio::time::timeout(idle_timeout, send)
            .await
            .map_err(|_| ProviderError::IdleTimeout(idle_timeout.as_secs()))?
            .map_err(|e| connect_error(base_url, &e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(error_response(response, idle_timeout).await)
    })
    .await?;
    Ok(decode(response.bytes_stream(), decoder, idle_timeout))
}

/// A send failure as [`ProviderError::Connect`], with the cause chain, short.
pub(crate) fn connect_error(base_url: &str, err: &reqwest::Error) -> ProviderError {
    let mut reason = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        reason.push_str(": ");
        reason.push_str(&cause.to_string());
        source = cause.source();
    }
    ProviderError::Connect {
        url: base_url.to_string(),
        reason: truncate(&reason, MAX_MESSAGE_CHARS),
    }
}

/// Reads an error response into [`ProviderError::Status`].
pub(crate) async fn error_response(response: reqwest::Response, wait: Duration) -> ProviderError {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = match tokio::time::timeout(wait, response.text()).await {
        Ok(Ok(text)) => text,
        _ => String::new(),
    };
    let mut message = error_message(&body);
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("error").to_string();
    }
    ProviderError::Status {
        status: status.as_u16(),
        message,
        retry_after,
    }
}

/// A short message from an error body: `error.message` (OpenAI and Anthropic), `error`
/// as a string (Ollama), top-level `message`, else the body itself; at most 300 chars.
pub(crate) fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let text = v
            .pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))?;
        text.as_str().map(str::to_string)
    });
    let text = from_json.unwrap_or_else(|| body.split_whitespace().collect::<Vec<_>>().join(" "));
    truncate(text.trim(), MAX_MESSAGE_CHARS)
}

/// `text` cut to at most `max` chars, with an ellipsis when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Wraps `stream` so that, when no item arrives within `idle`, it yields
/// [`ProviderError::IdleTimeout`] and ends.
pub fn with_idle_timeout<S, T>(
    stream: S,
    idle: Duration,
) -> impl Stream<Item = Result<T, ProviderError>> + Send
where
    S: Stream<Item = Result<T, ProviderError>> + Send + 'static,
    T: Send + 'static,
{
    futures_util::stream::unfold(
        (Box::pin(stream), false),
        move |(mut inner, ended)| async move {
            if ended {
                return None;
            }
            match tokio::time::timeout(idle, inner.next()).await {
                Ok(Some(item)) => Some((item, (inner, false))),
                Ok(None) => None,
                Err(_) => Some((
                    Err(ProviderError::IdleTimeout(idle.as_secs())),
                    (inner, true),
                )),
            }
        },
    )
}

/// Decodes an SSE byte stream with `decoder`, under the idle timeout. The result ends after
/// `Done`, or after the first error.
pub(crate) fn decode<S, B, E, D>(bytes: S, decoder: D, idle: Duration) -> EventStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: Display + Send + 'static,
    D: Decoder,
{
    let events = bytes
        .eventsource()
        .map(|item| item.map_err(|e| ProviderError::Stream(e.to_string())));
    let state = DecodeState {
        events: Box::pin(with_idle_timeout(events, idle)),
        decoder,
        pending: VecDeque::new(),
        finished: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.finished {
                return None;
            }
            let mut out = Vec::new();
            let step = match st.events.next().await {
                Some(Ok(event)) => st.decoder.on_event(&event, &mut out),
                Some(Err(err)) => Err(err),
                None => st.decoder.on_end(&mut out).map(|()| true),
            };
            st.pending.extend(out.into_iter().map(Ok));
            match step {
                Ok(done) => st.finished = done,
                Err(err) => {
                    st.pending.push_back(Err(err));
                    st.finished = true;
                }
            }
        }
    }))
}

type SseEvents = std::pin::Pin<Box<dyn Stream<Item = Result<Event, ProviderError>> + Send>>;

struct DecodeState<D> {
    events: SseEvents,
    decoder: D,
    pending: VecDeque<Result<ProviderEvent, ProviderError>>,
    finished: bool,
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Static SSE byte streams for decoder tests.

    use futures_util::{Stream, StreamExt};

    use super::super::{ProviderError, ProviderEvent};

    /// The chunks as a byte stream, as reqwest would hand them out.
    pub fn chunks(
        parts: Vec<String>,
    ) -> impl Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static {
        futures_util::stream::iter(parts.into_iter().map(|p| Ok(p.into_bytes())))
    }

    /// `data: <json>\n\n` for each payload.
    pub fn sse(payloads: &[&str]) -> String {
        payloads.iter().map(|p| format!("data: {p}\n\n")).collect()
    }

    /// Splits `text` into pieces of `size` bytes (char boundaries respected).
    pub fn split_every(text: &str, size: usize) -> Vec<String> {
        let mut parts = Vec::new();
        let mut current = String::new();
        for c in text.chars() {
            current.push(c);
            if current.len() >= size {
                parts.push(std::mem::take(&mut current));
            }
        }
        if !current.is_empty() {
            parts.push(current);
        }
        parts
    }

    /// Collects a whole event stream.
    pub async fn collect(stream: super::EventStream) -> Vec<Result<ProviderEvent, ProviderError>> {
        stream.collect().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_message_reads_both_formats_and_caps() {
        let openai =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai), "Incorrect API key provided");
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(
            error_message("<html>\n Bad   Gateway</html>"),
            "<html> Bad Gateway</html>"
        );
        let long = "é".repeat(1000);
        assert_eq!(error_message(&long).chars().count(), 301);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_timeout_fires_on_a_silent_stream_and_ends_it() {
        let silent = futures_util::stream::pending::<Result<u8, ProviderError>>();
        let mut wrapped = Box::pin(with_idle_timeout(silent, Duration::from_secs(120)));
        let start = tokio::time::Instant::now();
        assert!(matches!(
            wrapped.next().await,
            Some(Err(ProviderError::IdleTimeout(120)))
        ));
        assert_eq!(start.elapsed(), Duration::from_secs(120));
        assert!(wrapped.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn idle_timeout_resets_on_every_item() {
        let slow = futures_util::stream::iter(0..3u8).then(|i| async move {
            tokio::time::sleep(Duration::from_secs(90)).await;
            Ok::<_, ProviderError>(i)
        });
        let items: Vec<_> = with_idle_timeout(slow, Duration::from_secs(120))
            .collect()
            .await;
        assert_eq!(items.len(), 3);
        assert!(items.iter().all(|i| i.is_ok()));
    }
}

#[cfg(test)]
#[path = "transport_http_tests.rs"]
mod http_tests;
