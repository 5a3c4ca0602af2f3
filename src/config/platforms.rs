//! `[channels]`: one table per chat platform, and what the rest of chela asks of them by
//! the channel's name (its admission rules, its account, whether one node of a cluster runs
//! its intake). A new platform is a table here and an arm in each lookup.

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
