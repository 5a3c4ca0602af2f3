//! chela-slack: the Slack channel, on slack-morphism.
//!
//! Events come over Socket Mode (no public URL needed; an app-level token `xapp-…` with
//! `connections:write`), replies go through the Web API with the bot token (`xoxb-…`):
//! `chat.postMessage`, `chat.update` for previews, files through the external upload. DMs
//! are direct chats; channels and group DMs answer in threads, each thread a session of its
//! own. Module map: [`api`] (Web API calls), [`socket`] (Socket Mode frames), [`intake`]
//! (events to inbounds, cursors), [`hold`] (cursors held below refused messages),
//! [`normalize`], [`markup`], [`catch_up`] and its [`gate`], [`commands`] (slash commands),
//! [`files`], [`emoji`], [`start`] (what is asked before Socket Mode starts), [`state`],
//! [`ts`].
//!
//! Cursors: one per channel and per thread the bot took a message from, in the store
//! (`slack:<account>:last:…`). The catch-up reads at most [`catch_up::MAX_CHATS`] of them, the
//! most recently active first, and no thread whose cursor is older than its window; the
//! cursors themselves are never deleted (the sink has no way to), so the store keeps one
//! small entry per thread the bot ever answered in.

pub mod api;
pub mod catch_up;
pub mod commands;
pub mod emoji;
pub mod files;
pub mod gate;
pub mod hold;
pub mod intake;
pub mod markup;
pub mod normalize;
pub mod socket;
pub mod start;
pub mod state;
pub mod ts;

mod channel;
#[cfg(test)]
mod test_sink;

pub use channel::SlackChannel;

/// Slack's Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

/// How the Slack channel runs.
#[derive(Debug, Clone)]
pub struct SlackSettings {
    /// The bot token (`xoxb-…`).
    pub bot_token: String,
    /// The app-level token (`xapp-…`) Socket Mode connects with.
    pub app_token: String,
    /// The Web API's base URL (`https://slack.com/api`).
    pub api_url: String,
    /// Account id in session keys.
    pub account: String,
    /// Whether replies are previewed (one message edited as it grows).
    pub stream_previews: bool,
    /// Whether replies stream as finished blocks instead.
    pub block_streaming: bool,
    /// Channel ids taken (empty: every channel the bot is in).
    pub channels: Vec<String>,
    /// Largest file the bot sends, in bytes.
    pub max_upload_bytes: u64,
}
