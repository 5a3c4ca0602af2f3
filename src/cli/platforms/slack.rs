//! Slack (`chela-slack`, on slack-morphism): Socket Mode and the Web API; built with the
//! `slack` feature (without it, `slack_left_out.rs` refuses it).

use super::Platform;

#[cfg(feature = "slack")]
#[path = "slack_channel.rs"]
mod channel;
#[cfg(not(feature = "slack"))]
#[path = "slack_left_out.rs"]
mod channel;

/// Slack's entry.
pub(super) const PLATFORM: Platform = Platform {
    name: "slack",
    title: "Slack",
    token_env: "SLACK_BOT_TOKEN",
    configured: |config| config.channels.slack.configured(),
    build: channel::build,
    check: |config| Box::pin(channel::check(config)),
};
