//! `[channels.slack]`: the Slack channel (Socket Mode and the Web API).

use serde::{Deserialize, Serialize};

use super::channels::{AccessConfig, DmPolicy, GroupPolicy, Streaming};

/// `[channels.slack]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackConfig {
    /// Bot token (`xoxb-…`); empty: env `SLACK_BOT_TOKEN`. The channel starts when both
    /// tokens are set.
    pub bot_token: String,
    /// App-level token (`xapp-…`, scope `connections:write`) Socket Mode connects with;
    /// empty: env `SLACK_APP_TOKEN`.
    pub app_token: String,
    /// Web API base URL; env `CHELA_SLACK_API_URL` overrides it.
    pub api_url: String,
    /// Account id in session keys.
    pub account: String,
    /// How replies stream.
    pub streaming: Streaming,
    /// Direct-message policy: pairing | allowlist | open | disabled.
    pub dm_policy: DmPolicy,
    /// User ids (`U…`) allowed to message the bot directly (`"*"`: everyone).
    #[serde(deserialize_with = "super::lenient::ids")]
    pub allow_from: Vec<String>,
    /// Who may talk in channels and group DMs: allowlist | open.
    pub group_policy: GroupPolicy,
    /// User ids allowed in channels; empty: `allow_from`.
    #[serde(deserialize_with = "super::lenient::ids")]
    pub group_allow_from: Vec<String>,
    /// In channels, only messages that mention the bot (or are in a thread it answers in)
    /// are answered.
    pub require_mention: bool,
    /// Extra case-insensitive words that count as a mention.
    pub mention_patterns: Vec<String>,
    /// Channel ids (`C…`, `G…`) whose messages are taken; empty: every channel the bot is in.
    pub channels: Vec<String>,
    /// Largest file the bot sends, in MiB.
    pub upload_mb: u64,
}

impl SlackConfig {
    /// Whether both tokens are set (the channel runs).
    pub fn configured(&self) -> bool {
        !self.bot_token.trim().is_empty() && !self.app_token.trim().is_empty()
    }

    /// Refuses Slack's tokens in a build without the `slack` feature, naming the table.
    pub fn check_built(&self) -> Result<(), (String, String)> {
        if !cfg!(feature = "slack") && self.configured() {
            let message = super::built::not_built("the Slack channel", "slack");
            return Err(("channels.slack".to_owned(), message));
        }
        Ok(())
    }

    /// The admission rules of this channel.
    pub fn access(&self) -> AccessConfig {
        AccessConfig {
            dm_policy: self.dm_policy,
            allow_from: self.allow_from.clone(),
            group_policy: self.group_policy,
            group_allow_from: self.group_allow_from.clone(),
            require_mention: self.require_mention,
            mention_patterns: self.mention_patterns.clone(),
        }
    }
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self {
            bot_token: String::new(),
            app_token: String::new(),
            api_url: "https://slack.com/api".into(),
            account: "default".into(),
            streaming: Streaming::Partial,
            dm_policy: DmPolicy::Pairing,
            allow_from: Vec::new(),
            group_policy: GroupPolicy::Allowlist,
            group_allow_from: Vec::new(),
            require_mention: true,
            mention_patterns: Vec::new(),
            channels: Vec::new(),
            upload_mb: 100,
        }
    }
}
