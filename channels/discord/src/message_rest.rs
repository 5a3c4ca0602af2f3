//! Message create and edit over chela's own REST calls, so that a 429 reaches the reply path
//! with Discord's `retry_after`. serenity builds the bodies, but a refused request comes back
//! from serenity without its body or headers, and with its ratelimiter off (pointed at a fake)
//! nothing else would honour the wait Discord asked for.
//!
//! Calls are also paced ahead of time, as serenity's ratelimiter would: when an answer says a
//! channel's bucket is spent (`x-ratelimit-remaining: 0`), the next send or edit there waits
//! for `x-ratelimit-reset-after`, so a busy channel meets no 429 at all.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chela_channel::ChannelError;
use reqwest::header::{AUTHORIZATION, HeaderMap, USER_AGENT};
use reqwest::{Client, Method, StatusCode};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

/// The wait when a 429 names none.
const DEFAULT_RETRY_MS: u64 = 1_000;
/// How long one REST call may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Discord asks bots to name themselves this way.
const AGENT: &str = concat!(
    "DiscordBot (https://github.com/chela, ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

/// Most channels whose spent buckets are remembered.
const MAX_BUCKETS: usize = 4096;
/// The bucket key of Discord's global limit (no channel has id 0).
const GLOBAL: u64 = 0;

/// Sends and edits messages at `{api_url}/api/v10`.
#[derive(Debug)]
pub(crate) struct MessageRest {
    client: Client,
    base: String,
    authorization: String,
    /// Channels whose bucket is spent, and when the next call there may go.
    spent: Mutex<HashMap<u64, Instant>>,
}

impl MessageRest {
    /// A client for `api_url` authorised with the bot `token` (with or without `Bot `).
    pub(crate) fn new(client: Client, api_url: &str, token: &str) -> MessageRest {
        let token = token.trim();
        let authorization = if token.starts_with("Bot ") {
            token.to_owned()
        } else {
            format!("Bot {token}")
        };
        MessageRest {
            client,
            base: format!("{}/api/v10", api_url.trim_end_matches('/')),
            authorization,
            spent: Mutex::new(HashMap::new()),
        }
    }

    /// The HTTP client, shared with serenity's REST calls.
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// Posts a new message in `channel`; answers its id.
    pub(crate) async fn create(
        &self,
        channel: u64,
        body: &impl Serialize,
    ) -> Result<u64, ChannelError> {
        let path = format!("/channels/{channel}/messages");
        let message = self.call(channel, Method::POST, &path, body).await?;
        message
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| id.parse::<u64>().ok())
            .ok_or_else(|| ChannelError::Transport("discord answered a message without id".into()))
    }

    /// Replaces message `message` in `channel`.
    pub(crate) async fn edit(
        &self,
        channel: u64,
        message: u64,
        body: &impl Serialize,
    ) -> Result<(), ChannelError> {
        let path = format!("/channels/{channel}/messages/{message}");
        self.call(channel, Method::PATCH, &path, body)
            .await
            .map(|_| ())
    }

    /// Posts a new message with one file in `channel`: `payload` as `payload_json` and the
    /// file as `files[0]` (a multipart upload streamed from the open file); answers its id.
    pub(crate) async fn create_with_file(
        &self,
        channel: u64,
        payload: &Value,
        file: &chela_channel::OutboundFile,
    ) -> Result<u64, ChannelError> {
        let path = format!("/channels/{channel}/messages");
        let body = reqwest::Body::wrap_stream(file.chunks());
        let part = reqwest::multipart::Part::stream_with_length(body, file.size())
            .file_name(file.file_name().to_owned())
            .mime_str(file.mime_type())
            .map_err(|e| ChannelError::Rejected(e.to_string()))?;
        let form = reqwest::multipart::Form::new()
            .text("payload_json", payload.to_string())
            .part("files[0]", part);
        let message = self
            .send(
                channel,
                Method::POST,
                &path,
                Body::Multipart(form, upload_timeout(file.size())),
            )
            .await?;
        message
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| id.parse::<u64>().ok())
            .ok_or_else(|| ChannelError::Transport("discord answered a message without id".into()))
    }

    async fn call(
        &self,
        channel: u64,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<Value, ChannelError> {
        let json = serde_json::to_value(body).map_err(|e| ChannelError::Rejected(e.to_string()))?;
        self.send(channel, method, path, Body::Json(json)).await
    }

    async fn send(
        &self,
        channel: u64,
        method: Method,
        path: &str,
        body: Body,
    ) -> Result<Value, ChannelError> {
        if let Some(at) = self.next_allowed(channel) {
            tokio::time::sleep_until(at).await;
        }
        let request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header(AUTHORIZATION, &self.authorization)
            .header(USER_AGENT, AGENT);
        let request = match body {
            Body::Json(json) => request.timeout(REQUEST_TIMEOUT).json(&json),
            Body::Multipart(form, timeout) => request.timeout(timeout).multipart(form),
        };
        let response = request
            .send()
            .await
            .map_err(|e| ChannelError::Transport(e.to_string()))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ChannelError::Transport(e.to_string()))?;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let global = body.get("global").and_then(Value::as_bool) == Some(true);
        let result = if status.is_success() {
            Ok(body)
        } else {
            Err(refusal(status, &headers, &body))
        };
        let wait = match &result {
            Err(ChannelError::RateLimited { retry_after_ms }) => Some(*retry_after_ms),
            _ => spent_for_ms(&headers),
        };
        if let Some(ms) = wait {
            // A global limit holds every channel.
            let bucket = if global { GLOBAL } else { channel };
            self.mark_spent(bucket, Instant::now() + Duration::from_millis(ms));
        }
        result
    }

    /// When the next call into `channel` may go, if its bucket or the global one is spent.
    fn next_allowed(&self, channel: u64) -> Option<Instant> {
        let spent = self.spent.lock().ok()?;
        let own = spent.get(&channel).copied();
        let global = spent.get(&GLOBAL).copied();
        own.max(global).filter(|at| *at > Instant::now())
    }

    fn mark_spent(&self, channel: u64, until: Instant) {
        if let Ok(mut spent) = self.spent.lock() {
            if spent.len() >= MAX_BUCKETS {
                let now = Instant::now();
                spent.retain(|_, at| *at > now);
            }
            spent.insert(channel, until);
        }
    }
}

/// The body of one REST call.
enum Body {
    /// A JSON body.
    Json(Value),
    /// A multipart body (a file upload), with its timeout.
    Multipart(reqwest::multipart::Form, Duration),
}

/// How long an upload of `size` bytes may take: the request timeout plus a second per
/// 256 KB (a slow uplink still gets a 25 MB file through).
fn upload_timeout(size: u64) -> Duration {
    REQUEST_TIMEOUT + Duration::from_secs(size.div_ceil(256 * 1024))
}

/// How long a successful answer says the channel's bucket stays spent: its
/// `x-ratelimit-reset-after` when `x-ratelimit-remaining` is 0.
fn spent_for_ms(headers: &HeaderMap) -> Option<u64> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("x-ratelimit-remaining")?.trim() != "0" {
        return None;
    }
    let seconds = header("x-ratelimit-reset-after")?
        .trim()
        .parse::<f64>()
        .ok()?;
    (seconds.is_finite() && seconds > 0.0).then(|| (seconds.min(86_400.0) * 1000.0).ceil() as u64)
}

/// The channel error for a refused call.
fn refusal(status: StatusCode, headers: &HeaderMap, body: &Value) -> ChannelError {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return ChannelError::RateLimited {
            retry_after_ms: retry_after_ms(headers, body),
        };
    }
    if status.is_server_error() {
        return ChannelError::Transport(format!("discord answered {status}"));
    }
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let code = body.get("code").and_then(Value::as_i64).unwrap_or(-1);
    ChannelError::Rejected(format!("{message} ({code}, http {})", status.as_u16()))
}

/// How long a 429 asks to wait: the body's `retry_after` (seconds, fractional), else the
/// `retry-after` or `x-ratelimit-reset-after` header, else a second. Never 0, which would
/// invite a busy retry.
fn retry_after_ms(headers: &HeaderMap, body: &Value) -> u64 {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let seconds = body
        .get("retry_after")
        .and_then(Value::as_f64)
        .or_else(|| header("retry-after"))
        .or_else(|| header("x-ratelimit-reset-after"))
        .filter(|s| s.is_finite() && *s >= 0.0);
    match seconds {
        // Bounded: a day is far beyond anything Discord asks of a bot.
        Some(s) => ((s.min(86_400.0) * 1000.0).ceil() as u64).max(1),
        None => DEFAULT_RETRY_MS,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use reqwest::header::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_bodys_fractional_retry_after_wins() {
        let body = json!({"message": "You are being rate limited.", "retry_after": 0.337, "global": false});
        let h = headers(&[("retry-after", "1"), ("x-ratelimit-reset-after", "0.337")]);
        assert_eq!(retry_after_ms(&h, &body), 337);
    }

    #[test]
    fn headers_answer_when_the_body_is_silent() {
        assert_eq!(
            retry_after_ms(&headers(&[("retry-after", "2")]), &Value::Null),
            2000
        );
        assert_eq!(
            retry_after_ms(&headers(&[("x-ratelimit-reset-after", "0.25")]), &json!({})),
            250
        );
    }

    #[test]
    fn a_429_without_any_hint_waits_a_second_and_zero_is_never_answered() {
        assert_eq!(retry_after_ms(&HeaderMap::new(), &Value::Null), 1000);
        assert_eq!(
            retry_after_ms(&HeaderMap::new(), &json!({"retry_after": 0})),
            1
        );
        assert_eq!(
            retry_after_ms(&HeaderMap::new(), &json!({"retry_after": -3})),
            1000
        );
    }

    #[test]
    fn refusals_map_to_the_errors_the_reply_path_understands() {
        let none = HeaderMap::new();
        assert!(matches!(
            refusal(
                StatusCode::TOO_MANY_REQUESTS,
                &none,
                &json!({"retry_after": 1.5})
            ),
            ChannelError::RateLimited {
                retry_after_ms: 1500
            }
        ));
        assert!(matches!(
            refusal(StatusCode::BAD_GATEWAY, &none, &Value::Null),
            ChannelError::Transport(_)
        ));
        let rejected = refusal(
            StatusCode::BAD_REQUEST,
            &none,
            &json!({"code": 50035, "message": "Invalid Form Body"}),
        );
        assert_eq!(
            rejected.to_string(),
            "the platform refused: Invalid Form Body (50035, http 400)"
        );
    }

    #[test]
    fn a_spent_bucket_is_read_from_the_headers() {
        let spent = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "2.5"),
        ]);
        assert_eq!(spent_for_ms(&spent), Some(2500));
        let left = headers(&[
            ("x-ratelimit-remaining", "3"),
            ("x-ratelimit-reset-after", "2.5"),
        ]);
        assert_eq!(spent_for_ms(&left), None);
        assert_eq!(spent_for_ms(&HeaderMap::new()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_channel_waits_and_others_do_not() {
        let rest = MessageRest::new(Client::new(), "http://127.0.0.1:9", "abc");
        let now = Instant::now();
        rest.mark_spent(1, now + Duration::from_millis(800));
        assert_eq!(rest.next_allowed(1), Some(now + Duration::from_millis(800)));
        assert_eq!(rest.next_allowed(2), None);
        tokio::time::advance(Duration::from_millis(800)).await;
        assert_eq!(rest.next_allowed(1), None);
        let later = Instant::now() + Duration::from_millis(300);
        rest.mark_spent(GLOBAL, later);
        assert_eq!(
            rest.next_allowed(2),
            Some(later),
            "the global limit holds everyone"
        );
    }

    #[test]
    fn the_token_gets_its_bot_prefix_once() {
        let client = Client::new();
        let rest = MessageRest::new(client.clone(), "http://127.0.0.1:9/", "abc");
        assert_eq!(rest.authorization, "Bot abc");
        assert_eq!(rest.base, "http://127.0.0.1:9/api/v10");
        let rest = MessageRest::new(client, "https://discord.com", "Bot abc");
        assert_eq!(rest.authorization, "Bot abc");
    }
}
