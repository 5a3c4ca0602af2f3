//! The reply path's Bot API calls (`sendMessage`, `editMessageText`, `deleteMessage`), made
//! directly over HTTP instead of through teloxide, which sleeps 10 s after every 5xx and reads
//! an HTML error page as a JSON failure. Here every answer maps to the error the outbox
//! worker retries or gives up on:
//! - a dropped connection, a timeout, a 5xx (JSON or HTML body) or an unreadable 2xx:
//!   [`ChannelError::Transport`] (retryable);
//! - `parameters.retry_after` or a 429: [`ChannelError::RateLimited`] with that wait (1 s
//!   without one);
//! - any other Bot API error: its teloxide [`ApiError`] (the caller handles "message is not
//!   modified" and "can't parse entities"), else [`ChannelError::Rejected`].

use chela_channel::ChannelError;
use serde_json::Value;
use teloxide::ApiError;

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Transport, rate limit or an unusable answer.
    Channel(ChannelError),
    /// The Bot API refused with this error.
    Api(ApiError),
}

impl From<CallError> for ChannelError {
    fn from(error: CallError) -> ChannelError {
        match error {
            CallError::Channel(e) => e,
            CallError::Api(e) => ChannelError::Rejected(e.to_string()),
        }
    }
}

/// Bot API calls over the channel's HTTP client.
pub(crate) struct Api {
    client: reqwest::Client,
    /// `{api_url}/bot{token}/`.
    base: String,
}

impl Api {
    /// Calls go to `{api_url}/bot{token}/{method}`.
    pub(crate) fn new(client: reqwest::Client, api_url: &str, token: &str) -> Api {
        Api {
            client,
            base: format!("{}/bot{token}/", api_url.trim_end_matches('/')),
        }
    }

    /// Calls `method` with the JSON `params`; returns the answer's `result`.
    pub(crate) async fn call(&self, method: &str, params: &Value) -> Result<Value, CallError> {
        let body = serde_json::to_vec(params)
            .map_err(|e| CallError::Channel(ChannelError::Rejected(e.to_string())))?;
        let response = self
            .client
            .post(format!("{}{method}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| CallError::Channel(ChannelError::Transport(e.to_string())))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| CallError::Channel(ChannelError::Transport(e.to_string())))?;
        answer(status, &text)
    }
}

impl Api {
    /// Calls `method` with a `multipart/form-data` body (a file upload) that may take up to
    /// `timeout`; returns the answer's `result`. A transport error's text leaves out the URL,
    /// which holds the bot token.
    pub(crate) async fn call_multipart(
        &self,
        method: &str,
        form: reqwest::multipart::Form,
        timeout: std::time::Duration,
    ) -> Result<Value, CallError> {
        let transport = |e: reqwest::Error| {
            CallError::Channel(ChannelError::Transport(e.without_url().to_string()))
        };
        let response = self
            .client
            .post(format!("{}{method}", self.base))
            .timeout(timeout)
            .multipart(form)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(transport)?;
        answer(status, &text)
    }
}

/// Reads one Bot API answer with HTTP status `status`.
pub(crate) fn answer(status: u16, text: &str) -> Result<Value, CallError> {
    let json: Option<Value> = serde_json::from_str(text).ok();
    if let Some(json) = &json
        && json["ok"] == Value::Bool(true)
        && (200..300).contains(&status)
    {
        return Ok(json["result"].clone());
    }
    let retry_after = json
        .as_ref()
        .and_then(|j| j["parameters"]["retry_after"].as_u64());
    if let Some(seconds) = retry_after {
        return Err(limited(seconds));
    }
    if status == 429 {
        return Err(limited(1));
    }
    let description = json
        .as_ref()
        .and_then(|j| j["description"].as_str())
        .map(str::to_owned);
    if status >= 500 || (200..300).contains(&status) || description.is_none() {
        let what = description.unwrap_or_else(|| snippet(text));
        let error = if status >= 500 || (200..300).contains(&status) {
            ChannelError::Transport(format!("HTTP {status}: {what}"))
        } else {
            ChannelError::Rejected(format!("HTTP {status}: {what}"))
        };
        return Err(CallError::Channel(error));
    }
    let description = description.unwrap_or_default();
    match serde_json::from_value::<ApiError>(Value::String(description.clone())) {
        Ok(error) => Err(CallError::Api(error)),
        Err(_) => Err(CallError::Channel(ChannelError::Rejected(description))),
    }
}

fn limited(seconds: u64) -> CallError {
    CallError::Channel(ChannelError::RateLimited {
        retry_after_ms: seconds.max(1).saturating_mul(1000),
    })
}

/// The start of an unreadable body, on one line, for the log.
fn snippet(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel_error(result: Result<Value, CallError>) -> ChannelError {
        match result {
            Err(CallError::Channel(e)) => e,
            other => panic!("not a channel error: {other:?}"),
        }
    }

    #[test]
    fn a_retry_after_too_large_for_milliseconds_saturates_instead_of_overflowing() {
        let huge = format!(
            r#"{{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{{"retry_after":{}}}}}"#,
            u64::MAX
        );
        assert!(matches!(
            channel_error(answer(429, &huge)),
            ChannelError::RateLimited {
                retry_after_ms: u64::MAX
            }
        ));
    }

    #[test]
    fn every_storm_answer_is_retryable_with_the_wait_asked() {
        let html = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
        assert!(channel_error(answer(502, html)).is_retryable());
        let json_500 = r#"{"ok":false,"error_code":500,"description":"Internal Server Error"}"#;
        assert!(channel_error(answer(500, json_500)).is_retryable());
        let too_many = r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#;
        assert!(matches!(
            channel_error(answer(429, too_many)),
            ChannelError::RateLimited {
                retry_after_ms: 7_000
            }
        ));
        assert!(matches!(
            channel_error(answer(429, "")),
            ChannelError::RateLimited {
                retry_after_ms: 1_000
            }
        ));
        assert!(channel_error(answer(200, "{\"ok\":tr")).is_retryable());
    }

    #[test]
    fn bot_api_refusals_keep_their_meaning() {
        let not_modified = r#"{"ok":false,"error_code":400,"description":"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}"#;
        assert!(matches!(
            answer(400, not_modified),
            Err(CallError::Api(ApiError::MessageNotModified))
        ));
        let blocked = r#"{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}"#;
        let error: ChannelError = answer(403, blocked).unwrap_err().into();
        assert!(!error.is_retryable());
        let proxy_404 = "<html>Not Found</html>";
        assert!(!channel_error(answer(404, proxy_404)).is_retryable());
        let ok = r#"{"ok":true,"result":{"message_id":5}}"#;
        assert_eq!(answer(200, ok).unwrap()["message_id"], 5);
    }

    #[tokio::test]
    async fn an_uploads_transport_error_does_not_show_the_bot_token() {
        // Nothing listens there: the connection is refused.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let api = Api::new(reqwest::Client::new(), &url, "123:SECRET-TOKEN");
        let form = reqwest::multipart::Form::new().text("chat_id", "1");
        let timeout = std::time::Duration::from_secs(5);
        let error = channel_error(api.call_multipart("sendDocument", form, timeout).await);
        assert!(error.is_retryable(), "{error}");
        assert!(!error.to_string().contains("SECRET-TOKEN"), "{error}");
    }
}
