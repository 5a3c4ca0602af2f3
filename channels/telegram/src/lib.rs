//! chela-telegram: the Telegram channel, on teloxide.
//!
//! Module map:
//! - [`normalize`]: Telegram messages -> normalized inbound records (topics, mentions, replies).
//! - `poll`: long polling with a durable offset, one poller per token, 409 backoff.
//! - [`format`]: model markdown -> Telegram HTML, with a plain-text fallback on rejection.
//! - `errors`: Bot API errors -> channel errors.
//! - [`webhook`]: webhook mode (updates pushed to chela's listener, secret token checked).
//!
//! Sends into a forum topic carry `message_thread_id`, except the General topic (1), which
//! Telegram rejects; typing indicators carry it always.

mod errors;
pub mod format;
mod narrow;
pub mod normalize;
mod poll;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{
    BoxFuture, Channel, ChannelError, Conversation, InboundSink, Limits, SentMessage,
};
use teloxide::payloads::{EditMessageTextSetters, SendChatActionSetters, SendMessageSetters};
use teloxide::prelude::*;
use teloxide::types::{
    BotCommand, ChatAction, LinkPreviewOptions, MessageId, ParseMode, ReplyParameters, ThreadId,
};
use tokio_util::sync::CancellationToken;

use errors::{channel_error, is_bad_entities, is_not_modified};

/// The longest text chela puts in one message (Telegram's limit is 4096).
pub const MAX_CHARS: usize = 4000;

/// What the Telegram channel needs to run.
#[derive(Debug, Clone)]
pub struct TelegramSettings {
    /// Bot token.
    pub token: String,
    /// Bot API base URL.
    pub api_url: String,
    /// Account id in session keys.
    pub account: String,
    /// getUpdates long-poll timeout, in seconds.
    pub poll_timeout_s: u32,
    /// Edit a preview as the reply grows (false: one message at the end).
    pub stream_previews: bool,
    /// Send finished blocks as separate messages instead of editing a preview.
    pub block_streaming: bool,
    /// Receive updates by webhook instead of long polling.
    pub webhook: Option<webhook::WebhookSettings>,
}

/// Why the channel could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TelegramError {
    /// `api_url` is not a URL.
    #[error("channels.telegram.api_url: {0} is not a valid URL")]
    BadUrl(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// The Telegram channel.
pub struct TelegramChannel {
    bot: Bot,
    settings: TelegramSettings,
}

impl TelegramChannel {
    /// Builds the channel (no network yet).
    pub fn new(settings: TelegramSettings) -> Result<Arc<Self>, TelegramError> {
        let url = reqwest::Url::parse(settings.api_url.trim_end_matches('/'))
            .map_err(|_| TelegramError::BadUrl(settings.api_url.clone()))?;
        // The request timeout must outlast the long poll.
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(u64::from(settings.poll_timeout_s) + 15))
            .build()
            .map_err(|e| TelegramError::Client(e.to_string()))?;
        let bot = Bot::with_client(settings.token.clone(), client).set_api_url(url);
        Ok(Arc::new(TelegramChannel { bot, settings }))
    }

    async fn send_formatted(
        &self,
        to: &Conversation,
        text: &str,
        quote: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let chat = chat_id(to)?;
        let build = |body: String, html: bool| {
            let mut request = self
                .bot
                .send_message(chat, body)
                .link_preview_options(no_previews());
            if html {
                request = request.parse_mode(ParseMode::Html);
            }
            if let Some(topic) = send_topic(to) {
                request = request.message_thread_id(topic);
            }
            if let Some(id) = quote.and_then(|q| q.parse().ok()) {
                request = request.reply_parameters(
                    ReplyParameters::new(MessageId(id)).allow_sending_without_reply(),
                );
            }
            request
        };
        let sent = match build(format::to_html(text), true).await {
            Err(e) if is_bad_entities(&e) => build(text.to_string(), false).await,
            other => other,
        };
        sent.map(|m| SentMessage {
            message_id: m.id.0.to_string(),
        })
        .map_err(channel_error)
    }
}

impl Channel for TelegramChannel {
    fn name(&self) -> &str {
        "telegram"
    }

    fn block_streaming(&self) -> bool {
        self.settings.block_streaming
    }

    fn limits(&self) -> Limits {
        // Streaming off: no preview is ever due before the final.
        let (dm, group) = if self.settings.stream_previews {
            (1_000, 3_000)
        } else {
            (86_400_000, 86_400_000)
        };
        Limits {
            max_chars: MAX_CHARS,
            max_lines: None,
            edit_interval_ms: dm,
            group_edit_interval_ms: group,
            threads: true,
        }
    }

    fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            let Some(me) = poll::who_am_i(&self.bot, &shutdown).await else {
                return Ok(());
            };
            if let Some(hook) = &self.settings.webhook {
                return webhook::serve(&self.bot, me, &self.settings.account, hook, sink, shutdown)
                    .await;
            }
            // A webhook left from an earlier run would make getUpdates answer 409.
            if let Err(e) = self.bot.delete_webhook().await {
                tracing::debug!(error = %channel_error(e), "telegram deleteWebhook failed");
            }
            tracing::info!(bot = ?me.user.username, "telegram channel polling");
            poll::poll(
                &self.bot,
                &me,
                &self.settings.account,
                self.settings.poll_timeout_s,
                sink,
                shutdown,
            )
            .await
        })
    }

    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_formatted(to, text, None))
    }

    fn send_reply<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        quote: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_formatted(to, text, quote))
    }

    fn edit<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let chat = chat_id(to)?;
            let id = message_id(message)?;
            let build = |body: String, html: bool| {
                let request = self
                    .bot
                    .edit_message_text(chat, id, body)
                    .link_preview_options(no_previews());
                if html {
                    request.parse_mode(ParseMode::Html)
                } else {
                    request
                }
            };
            let edited = match build(format::to_html(text), true).await {
                Err(e) if is_bad_entities(&e) => build(text.to_string(), false).await,
                other => other,
            };
            match edited {
                Ok(_) => Ok(()),
                Err(e) if is_not_modified(&e) => Ok(()),
                Err(e) => Err(channel_error(e)),
            }
        })
    }

    fn typing<'a>(&'a self, to: &'a Conversation) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let mut request = self.bot.send_chat_action(chat_id(to)?, ChatAction::Typing);
            // Typing indicators carry the topic id, General (1) included.
            if let Some(topic) = to.thread_id.as_deref().and_then(|t| t.parse().ok()) {
                request = request.message_thread_id(ThreadId(MessageId(topic)));
            }
            request.await.map(|_| ()).map_err(channel_error)
        })
    }

    fn delete<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.bot
                .delete_message(chat_id(to)?, message_id(message)?)
                .await
                .map(|_| ())
                .map_err(channel_error)
        })
    }

    fn is_thread(&self, conversation: &Conversation) -> bool {
        conversation
            .thread_id
            .as_deref()
            .is_some_and(|t| t != normalize::GENERAL_TOPIC)
    }

    fn open_thread<'a>(
        &'a self,
        parent: &'a Conversation,
        title: &'a str,
    ) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        Box::pin(async move {
            let topic = self
                .bot
                .create_forum_topic(chat_id(parent)?, title)
                .await
                .map_err(channel_error)?;
            Ok(Conversation {
                thread_id: Some(topic.thread_id.0.0.to_string()),
                ..parent.clone()
            })
        })
    }

    fn is_admin<'a>(
        &'a self,
        conversation: &'a Conversation,
        user_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, ChannelError>> {
        Box::pin(async move {
            let user = user_id
                .parse()
                .map_err(|_| ChannelError::Rejected(format!("bad user id {user_id}")))?;
            let member = self
                .bot
                .get_chat_member(chat_id(conversation)?, UserId(user))
                .await
                .map_err(channel_error)?;
            Ok(member.is_privileged())
        })
    }

    fn register_commands<'a>(
        &'a self,
        commands: &'a [(&'a str, &'a str)],
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let commands: Vec<BotCommand> = commands
                .iter()
                .map(|(name, text)| {
                    BotCommand::new(*name, text.chars().take(256).collect::<String>())
                })
                .collect();
            self.bot
                .set_my_commands(commands)
                .await
                .map(|_| ())
                .map_err(channel_error)
        })
    }
}

fn chat_id(to: &Conversation) -> Result<ChatId, ChannelError> {
    to.chat_id
        .parse()
        .map(ChatId)
        .map_err(|_| ChannelError::Rejected(format!("bad telegram chat id {}", to.chat_id)))
}

fn message_id(message: &SentMessage) -> Result<MessageId, ChannelError> {
    message.message_id.parse().map(MessageId).map_err(|_| {
        ChannelError::Rejected(format!("bad telegram message id {}", message.message_id))
    })
}

/// The topic to send into: none for plain chats and for the General topic (1).
fn send_topic(to: &Conversation) -> Option<ThreadId> {
    let topic = to.thread_id.as_deref()?;
    if topic == normalize::GENERAL_TOPIC {
        return None;
    }
    topic.parse().ok().map(|id| ThreadId(MessageId(id)))
}

fn no_previews() -> LinkPreviewOptions {
    LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}
