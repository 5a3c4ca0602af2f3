//! The Web API: calls over slack-morphism's HTTP client (its rate-limit and error decoding),
//! with requests and answers as JSON values, so a field Slack adds or a message subtype the
//! crate's models do not know never fails a call. Every call gives up after
//! [`CALL_TIMEOUT`] (a retryable failure), so nothing waits on Slack forever.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chela_channel::ChannelError;
use serde_json::Value;
use slack_morphism::errors::SlackClientError;
use slack_morphism::hyper_tokio::{SlackClientHyperConnector, SlackClientHyperHttpsConnector};
use slack_morphism::{SlackApiToken, SlackApiTokenValue, SlackClient};

/// How long one Web API call may take: past it the call fails as a transport error (which
/// may be retried).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Slack's `ok: false` codes that say Slack itself failed, not the request: retryable.
const SLACK_FAILED: [&str; 4] = [
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];

/// Slack's Web API, for one bot token.
pub struct Api {
    client: Arc<SlackClient<SlackClientHyperHttpsConnector>>,
    bot: SlackApiToken,
    base: String,
}

impl Api {
    /// A client of the Web API at `base` (`https://slack.com/api`) with the bot token `token`.
    /// The connector also speaks plain HTTP, for a local fake of Slack.
    pub fn new(base: &str, token: &str) -> Self {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        let base = base.trim().trim_end_matches('/').to_string();
        let connector = SlackClientHyperConnector::from(https).with_slack_api_url(&base);
        Self {
            client: Arc::new(SlackClient::new(connector)),
            bot: SlackApiToken::new(SlackApiTokenValue::new(token.to_string())),
            base,
        }
    }

    /// The slack-morphism client (Socket Mode's connections are made through it).
    pub fn client(&self) -> Arc<SlackClient<SlackClientHyperHttpsConnector>> {
        self.client.clone()
    }

    /// The API's base URL, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The bot token (for the `Authorization` header of file downloads).
    pub fn bot_token(&self) -> &str {
        &self.bot.token_value.0
    }

    /// `POST {base}/{method}` with `body` as JSON; the answer when `ok`.
    pub async fn post(&self, method: &str, body: &Value) -> Result<Value, ChannelError> {
        self.post_as(&self.bot, method, body).await
    }

    /// `apps.connections.open` with the app-level token `app_token` (the URL it gives is
    /// not used): whether Slack takes the token, before Socket Mode starts (which would
    /// otherwise retry a refused token forever).
    pub async fn check_app_token(&self, app_token: &str) -> Result<(), ChannelError> {
        let token = SlackApiToken::new(SlackApiTokenValue::new(app_token.to_string()));
        self.post_as(
            &token,
            "apps.connections.open",
            &Value::Object(Default::default()),
        )
        .await
        .map(drop)
    }

    /// `POST {base}/{method}` with `token`.
    async fn post_as(
        &self,
        token: &SlackApiToken,
        method: &str,
        body: &Value,
    ) -> Result<Value, ChannelError> {
        let session = self.client.open_session(token);
        timed(
            method,
            session.http_session_api.http_post(method, body, None),
        )
        .await
    }

    /// `GET {base}/{method}?params`; the answer when `ok` (Slack's read methods take no JSON
    /// bodies).
    pub async fn get(
        &self,
        method: &str,
        params: &[(&str, String)],
    ) -> Result<Value, ChannelError> {
        let session = self.client.open_session(&self.bot);
        let params: Vec<(&str, Option<&String>)> =
            params.iter().map(|(k, v)| (*k, Some(v))).collect();
        timed(
            method,
            session.http_session_api.http_get(method, &params, None),
        )
        .await
    }
}

/// `call`'s answer, or a transport error once it took longer than [`CALL_TIMEOUT`].
async fn timed(
    method: &str,
    call: impl Future<Output = Result<Value, SlackClientError>>,
) -> Result<Value, ChannelError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(answer) => answer.map_err(channel_error),
        Err(_) => Err(ChannelError::Transport(format!(
            "Slack did not answer {method} within {} s",
            CALL_TIMEOUT.as_secs()
        ))),
    }
}

/// A Web API failure as a channel error: rate limits keep Slack's `Retry-After` (1 s when it
/// gave none); network failures, 5xx answers and Slack's own failures (`internal_error`,
/// `fatal_error`, `service_unavailable`, `request_timeout`) may pass, Slack's refusals
/// (other `ok: false` codes, other HTTP statuses, answers that do not decode) will not.
pub fn channel_error(error: SlackClientError) -> ChannelError {
    match error {
        SlackClientError::RateLimitError(e) => ChannelError::RateLimited {
            retry_after_ms: e
                .retry_after
                .map_or(1_000, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        },
        SlackClientError::ApiError(e) if e.code == "ratelimited" => ChannelError::RateLimited {
            retry_after_ms: 1_000,
        },
        SlackClientError::ApiError(e) if SLACK_FAILED.contains(&e.code.as_str()) => {
            ChannelError::Transport(format!("Slack failed: {}", e.code))
        }
        SlackClientError::ApiError(e) => ChannelError::Rejected(e.code),
        SlackClientError::HttpError(e) if e.status_code.is_server_error() => {
            ChannelError::Transport(format!("Slack answered {}", e.status_code))
        }
        SlackClientError::HttpError(e) => {
            ChannelError::Rejected(format!("Slack answered {}", e.status_code))
        }
        SlackClientError::ProtocolError(_) => {
            ChannelError::Rejected("Slack's answer did not decode".into())
        }
        other => ChannelError::Transport(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slack_morphism::errors::{SlackClientApiError, SlackRateLimitError};
    use std::time::Duration;

    #[test]
    fn rate_limits_wait_and_refusals_do_not_retry() {
        let limited = SlackClientError::RateLimitError(
            SlackRateLimitError::new().with_retry_after(Duration::from_secs(7)),
        );
        assert!(matches!(
            channel_error(limited),
            ChannelError::RateLimited {
                retry_after_ms: 7_000
            }
        ));
        let refused =
            SlackClientError::ApiError(SlackClientApiError::new("channel_not_found".into()));
        let err = channel_error(refused);
        assert!(!err.is_retryable());
        assert_eq!(err.to_string(), "the platform refused: channel_not_found");
    }

    #[test]
    fn slacks_own_failures_are_retried() {
        for code in SLACK_FAILED {
            let failed = SlackClientError::ApiError(SlackClientApiError::new(code.into()));
            let err = channel_error(failed);
            assert!(
                matches!(&err, ChannelError::Transport(m) if m.contains(code)),
                "{code}: {err:?}"
            );
            assert!(err.is_retryable());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_slack_never_answers_fails_retryably_after_the_timeout() {
        let started = tokio::time::Instant::now();
        let err = timed("conversations.history", std::future::pending())
            .await
            .unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        assert!(err.to_string().contains("conversations.history"), "{err}");
        assert_eq!(started.elapsed(), CALL_TIMEOUT);
    }
}
