//! chela-telegram: the Telegram channel, on teloxide.
//!
//! Module map:
//! - [`normalize`]: Telegram messages -> normalized inbound records (topics, mentions, replies).
//! - `poll`: long polling with a durable offset, one poller per token, 409 backoff.
//! - [`format`]: model markdown -> Telegram HTML, with a plain-text fallback on rejection.
//! - `errors`: Bot API errors -> channel errors.
//! - `api`: the reply path's calls (send, edit, delete) over plain HTTP, so a 5xx, an HTML
//!   error page or a dropped connection is a retryable error at once (teloxide sleeps 10 s
//!   after a 5xx and reads an HTML page as a refusal).
//! - `actions`: the agent's message actions (`setMessageReaction`, `pinChatMessage`,
//!   `sendPoll`), over `api` too.
//! - `upload`: files the bot sends (`sendPhoto`, `sendVoice`, `sendDocument`, multipart).
//! - [`webhook`]: webhook mode (updates pushed to chela's listener, secret token checked).
//!
//! Sends into a forum topic carry `message_thread_id`, except the General topic (1), which
//! Telegram rejects; typing indicators carry it always.

mod actions;
mod api;
mod errors;
pub mod format;
mod keyboard;
mod media;
mod narrow;
pub mod normalize;
mod poll;
mod press;
mod upload;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{
    BoxFuture, Button, Channel, ChannelError, ChatKind, Conversation, InboundSink, Limits, Poll,
    SentMessage,
};
use teloxide::payloads::SendChatActionSetters;
use teloxide::prelude::*;
use teloxide::types::{BotCommand, ChatAction, MessageId, ThreadId};
use tokio_util::sync::CancellationToken;

use errors::channel_error;
use serde_json::{Value, json};
use teloxide::ApiError;

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
    api: api::Api,
    settings: TelegramSettings,
    /// Whether the last `getMe` / `getUpdates` got an answer ([`Channel::connected`]).
    connected: std::sync::atomic::AtomicBool,
}

/// Connections to the Bot API kept open between calls.
const IDLE_CONNECTIONS: usize = 16;

impl TelegramChannel {
    /// Builds the channel (no network yet).
    pub fn new(settings: TelegramSettings) -> Result<Arc<Self>, TelegramError> {
        let url = reqwest::Url::parse(settings.api_url.trim_end_matches('/'))
            .map_err(|_| TelegramError::BadUrl(settings.api_url.clone()))?;
        // The request timeout must outlast the long poll.
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A burst of sends opens many connections; only a few stay open for reuse
            // (each costs tens of KB of buffers).
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            .timeout(Duration::from_secs(u64::from(settings.poll_timeout_s) + 15))
            .build()
            .map_err(|e| TelegramError::Client(e.to_string()))?;
        let api = api::Api::new(client.clone(), url.as_str(), &settings.token);
        let bot = Bot::with_client(settings.token.clone(), client).set_api_url(url);
        Ok(Arc::new(TelegramChannel {
            bot,
            api,
            settings,
            connected: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    async fn send_formatted(
        &self,
        to: &Conversation,
        text: &str,
        quote: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        self.send_marked_up(to, text, quote, None).await
    }

    /// Sends `text` (as HTML) with `markup` as its `reply_markup` (an inline keyboard).
    async fn send_marked_up(
        &self,
        to: &Conversation,
        text: &str,
        quote: Option<&str>,
        markup: Option<Value>,
    ) -> Result<SentMessage, ChannelError> {
        let mut params = json!({
            "chat_id": chat_id(to)?.0,
            "link_preview_options": { "is_disabled": true },
        });
        if let Some(markup) = markup {
            params["reply_markup"] = markup;
        }
        if let Some(topic) = send_topic(to) {
            params["message_thread_id"] = json!(topic.0.0);
        }
        if let Some(id) = quote.and_then(|q| q.parse::<i32>().ok()) {
            params["reply_parameters"] =
                json!({ "message_id": id, "allow_sending_without_reply": true });
        }
        let sent = self
            .call_formatted("sendMessage", params, text)
            .await
            .map_err(ChannelError::from)?;
        match sent["message_id"].as_i64() {
            Some(id) => Ok(SentMessage {
                message_id: id.to_string(),
            }),
            None => Err(ChannelError::Transport(
                "sendMessage answered without a message_id".into(),
            )),
        }
    }

    /// Calls `method` with `text` as HTML, or as plain text when Telegram cannot parse the
    /// HTML.
    async fn call_formatted(
        &self,
        method: &str,
        mut params: Value,
        text: &str,
    ) -> Result<Value, api::CallError> {
        params["text"] = json!(format::to_html(text));
        params["parse_mode"] = json!("HTML");
        match self.api.call(method, &params).await {
            Err(api::CallError::Api(ApiError::CantParseEntities(_))) => {
                params["text"] = json!(text);
                if let Some(map) = params.as_object_mut() {
                    map.remove("parse_mode");
                }
                self.api.call(method, &params).await
            }
            other => other,
        }
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
            (
                chela_channel::PREVIEWS_OFF_MS,
                chela_channel::PREVIEWS_OFF_MS,
            )
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
            self.connected
                .store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(hook) = &self.settings.webhook {
                return webhook::serve(&self.bot, me, &self.settings.account, hook, sink, shutdown)
                    .await;
            }
            // A webhook left from an earlier run would make getUpdates answer 409.
            if let Err(e) = self.bot.delete_webhook().await {
                tracing::debug!(error = %channel_error(e), "telegram deleteWebhook failed");
            }
            let bot = me.user.username.as_deref().unwrap_or(&me.user.first_name);
            tracing::info!(bot = %bot, "telegram channel polling");
            poll::poll(
                &self.bot,
                &me,
                &self.settings.account,
                self.settings.poll_timeout_s,
                sink,
                shutdown,
                &self.connected,
            )
            .await
        })
    }

    fn connected(&self) -> bool {
        self.connected.load(std::sync::atomic::Ordering::Relaxed)
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
            let params = json!({
                "chat_id": chat_id(to)?.0,
                "message_id": message_id(message)?.0,
                "link_preview_options": { "is_disabled": true },
            });
            match self.call_formatted("editMessageText", params, text).await {
                Ok(_) | Err(api::CallError::Api(ApiError::MessageNotModified)) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn has_buttons(&self) -> bool {
        true
    }

    fn send_buttons<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        buttons: &'a [Button],
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let markup = json!({ "inline_keyboard": keyboard::rows(buttons) });
        Box::pin(self.send_marked_up(to, text, None, Some(markup)))
    }

    /// A choice on Telegram: a button per option, one under the other (Telegram has no
    /// select menu; long lists read better as a column than as one cramped row).
    fn send_menu<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        options: &'a [Button],
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let markup = json!({ "inline_keyboard": keyboard::column(options) });
        Box::pin(self.send_marked_up(to, text, None, Some(markup)))
    }

    fn answer_press<'a>(
        &'a self,
        handle: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let params = json!({ "callback_query_id": handle, "text": text });
            self.api.call("answerCallbackQuery", &params).await?;
            Ok(())
        })
    }

    /// A Telegram user's private chat has the user's id (the bot reaches it once they
    /// started the bot).
    fn direct<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        Box::pin(async move {
            Ok(Conversation {
                channel: "telegram".into(),
                account: self.settings.account.clone(),
                kind: ChatKind::Direct,
                chat_id: user_id.to_owned(),
                thread_id: None,
            })
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
            let params = json!({
                "chat_id": chat_id(to)?.0,
                "message_id": message_id(message)?.0,
            });
            match self.api.call("deleteMessage", &params).await {
                Ok(_) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn react<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
        emoji: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let message = actions::message_id(message_id)?;
            actions::react(&self.api, chat_id(to)?.0, message, emoji).await
        })
    }

    fn pin<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let message = actions::message_id(message_id)?;
            actions::pin(&self.api, chat_id(to)?.0, message).await
        })
    }

    fn send_poll<'a>(
        &'a self,
        to: &'a Conversation,
        poll: &'a Poll,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            let topic = send_topic(to).map(|t| t.0.0);
            actions::send_poll(&self.api, chat_id(to)?.0, topic, poll).await
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

    fn media_url<'a>(
        &'a self,
        attachment: &'a chela_channel::Attachment,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async move {
            let id = teloxide::types::FileId(attachment.file_ref.clone());
            let file = self.bot.get_file(id).await.map_err(channel_error)?;
            Ok(media::file_url(
                &self.settings.api_url,
                &self.settings.token,
                &file.path,
            ))
        })
    }

    fn caption_limit(&self) -> usize {
        upload::CAPTION_LIMIT
    }

    fn max_file_bytes(&self) -> Option<u64> {
        Some(upload::MAX_UPLOAD_BYTES)
    }

    fn send_file<'a>(
        &'a self,
        to: &'a Conversation,
        file: &'a chela_channel::OutboundFile,
        caption: Option<&'a str>,
        key: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        // The Bot API has no idempotency key: `key` cannot help here.
        let _ = key;
        Box::pin(async move {
            chat_id(to)?;
            let topic = send_topic(to).map(|t| t.0.0);
            upload::send_file(&self.api, to, topic, file, caption).await
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
