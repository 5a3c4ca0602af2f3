//! The Slack channel of a build with the `slack` feature, and `chela doctor`'s check.

use std::sync::Arc;

use chela::config::Config;
use chela_channel::{Channel, ChannelError};

use super::super::Verdict;

/// The Slack channel of `config`.
pub(super) fn build(config: &Config) -> Result<Arc<dyn Channel>, String> {
    let slack = &config.channels.slack;
    if !slack.app_token.trim().starts_with("xapp-") {
        return Err(
            "channels.slack.app_token: Socket Mode needs an app-level token (xapp-…, scope connections:write)"
                .into(),
        );
    }
    Ok(chela_slack::SlackChannel::new(chela_slack::SlackSettings {
        bot_token: slack.bot_token.trim().to_string(),
        app_token: slack.app_token.trim().to_string(),
        api_url: slack.api_url.clone(),
        account: slack.account.clone(),
        stream_previews: slack.streaming != chela::config::Streaming::Off,
        block_streaming: slack.streaming == chela::config::Streaming::Block,
        channels: slack.channels.clone(),
        max_upload_bytes: slack.upload_mb.saturating_mul(1024 * 1024),
    }))
}

/// Asks `auth.test` who the bot token belongs to.
pub(super) async fn check(config: &Config) -> Verdict {
    let slack = &config.channels.slack;
    let api = chela_slack::api::Api::new(&slack.api_url, slack.bot_token.trim());
    let asked = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        api.post("auth.test", &serde_json::json!({})),
    )
    .await;
    match asked {
        Ok(Ok(me)) => {
            let name = me["user"].as_str().unwrap_or("?");
            let team = me["team"].as_str().unwrap_or("?");
            (true, format!("@{name} in {team}"))
        }
        Ok(Err(ChannelError::Rejected(code))) => (
            false,
            format!(
                "Slack refused the bot token ({code}); copy it again from the app's OAuth & Permissions page"
            ),
        ),
        Ok(Err(e)) => (false, format!("auth.test failed: {e}")),
        Err(_) => (
            false,
            format!(
                "cannot reach {}; check channels.slack.api_url and the network",
                slack.api_url
            ),
        ),
    }
}
