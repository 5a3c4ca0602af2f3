//! The Web API: calls over slack-morphism's HTTP client (its rate-limit and error decoding),
//! with requests and answers as JSON values, so a field Slack adds or a message subtype the
//! crate's models do not know never fails a call.

use std::sync::Arc;

use chela_channel::ChannelError;
use serde_json::Value;
use slack_morphism::errors::SlackClientError;
use slack_morphism::hyper_tokio::{SlackClientHyperConnector, SlackClientHyperHttpsConnector};
use slack_morphism::{SlackApiToken, SlackApiTokenValue, SlackClient};

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
        let session = self.client.open_session(&self.bot);
        session
            .http_session_api
            .http_post(method, body, None)
            .await
            .map_err(channel_error)
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
        session
            .http_session_api
            .http_get(method, &params, None)
            .await
            .map_err(channel_error)
    }
}

/// A Web API failure as a channel error: rate limits keep Slack's `Retry-After` (1 s when it
/// gave none); network failures and 5xx answers may pass, Slack's refusals (`ok: false`,
/// other HTTP statuses, answers that do not decode) will not.
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
}
