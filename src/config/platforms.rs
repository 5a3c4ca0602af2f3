//! `[channels]`: one table per chat platform, and all the rest of the config asks of them:
//! by the channel's name (its admission rules, its account, whether one node of a cluster
//! runs its intake), their tokens (from the environment, hidden when the config is shown,
//! kept from every process chela starts) and their URL-valued keys. A new platform is a
//! table here and an arm or a line in each of these.

use serde::{Deserialize, Serialize};

use super::channels::{AccessConfig, DiscordConfig, TelegramConfig};
use super::slack::SlackConfig;

/// `[channels]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsConfig {
    /// `[channels.telegram]`.
    pub telegram: TelegramConfig,
    /// `[channels.discord]`.
    pub discord: DiscordConfig,
    /// `[channels.slack]`.
    pub slack: SlackConfig,
}

/// The names of the platform tables under `[channels]`.
pub const CHANNEL_TABLES: [&str; 3] = ["telegram", "discord", "slack"];

/// The environment variables the platforms' tokens are read from when their keys are empty:
/// chela's secrets, which no process it starts inherits.
pub const TOKEN_VARIABLES: [&str; 4] = [
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
];

impl ChannelsConfig {
    /// The admission rules of platform channel `name`; `None` for the local terminal.
    pub fn access(&self, name: &str) -> Option<AccessConfig> {
        match name {
            "telegram" => Some(self.telegram.access()),
            "discord" => Some(self.discord.access()),
            "slack" => Some(self.slack.access()),
            _ => None,
        }
    }

    /// The account id platform channel `name` runs as; `None` for an unknown name.
    pub fn account(&self, name: &str) -> Option<&str> {
        match name {
            "telegram" => Some(&self.telegram.account),
            "discord" => Some(&self.discord.account),
            "slack" => Some(&self.slack.account),
            _ => None,
        }
    }

    /// Fills each empty token from its variable ([`TOKEN_VARIABLES`]) through `lookup`.
    pub(crate) fn tokens_from_env(&mut self, lookup: &dyn Fn(&str) -> Option<String>) {
        let tokens = [
            (&mut self.telegram.token, "TELEGRAM_BOT_TOKEN"),
            (&mut self.discord.token, "DISCORD_BOT_TOKEN"),
            (&mut self.slack.bot_token, "SLACK_BOT_TOKEN"),
            (&mut self.slack.app_token, "SLACK_APP_TOKEN"),
        ];
        for (token, variable) in tokens {
            if token.is_empty() {
                *token = lookup(variable).unwrap_or_default();
            }
        }
    }

    /// Hides every secret with `hide` and every URL's credentials (a webhook's path too).
    pub(crate) fn redact(&mut self, hide: &dyn Fn(&mut String)) {
        hide(&mut self.telegram.token);
        hide(&mut self.telegram.webhook_secret);
        hide(&mut self.discord.token);
        hide(&mut self.slack.bot_token);
        hide(&mut self.slack.app_token);
        let urls = [
            (&mut self.telegram.api_url, false),
            (&mut self.telegram.webhook_url, true),
            (&mut self.discord.api_url, false),
            (&mut self.discord.gateway_url, false),
            (&mut self.slack.api_url, false),
        ];
        for (url, hide_path) in urls {
            *url = super::redact::redact_url(url, hide_path);
        }
    }

    /// The URL-valued keys, with the schemes each accepts.
    pub(crate) fn url_keys(&self) -> [(&'static str, &str, &'static [&'static str]); 5] {
        use super::urls::{HTTP, WEBSOCKET};
        [
            ("channels.telegram.api_url", &self.telegram.api_url, HTTP),
            (
                "channels.telegram.webhook_url",
                &self.telegram.webhook_url,
                HTTP,
            ),
            ("channels.discord.api_url", &self.discord.api_url, HTTP),
            (
                "channels.discord.gateway_url",
                &self.discord.gateway_url,
                WEBSOCKET,
            ),
            ("channels.slack.api_url", &self.slack.api_url, HTTP),
        ]
    }

    /// Whether channel `name`'s intake must run on one node of a cluster at a time (Telegram
    /// long polling, Discord's gateway, Slack's Socket Mode and its catch-up); a Telegram
    /// webhook can run on every node.
    pub fn exclusive_intake(&self, name: &str) -> bool {
        match name {
            "telegram" => self.telegram.webhook_url.trim().is_empty(),
            "discord" | "slack" => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_table_answers_by_name() {
        let config = ChannelsConfig::default();
        for name in CHANNEL_TABLES {
            assert!(config.access(name).is_some(), "{name}");
            assert_eq!(config.account(name), Some("default"));
            assert!(config.exclusive_intake(name));
        }
        assert_eq!(config.access("terminal"), None);
        assert!(!config.exclusive_intake("terminal"));
    }
}
