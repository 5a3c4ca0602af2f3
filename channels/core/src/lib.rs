//! chela-channel: the [`Channel`] trait and the normalized types every channel speaks.
//!
//! Channels know nothing of sessions, agents or the store: an adapter turns platform events
//! into [`Inbound`] records, hands them to an [`InboundSink`] (which returns once the record is
//! durable), and sends or edits messages when asked.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

mod outbound;
mod poll;

pub use outbound::{OutboundFile, kind_for_name, mime_for_name};
pub use poll::{POLL_MAX_OPTION, POLL_MAX_OPTIONS, POLL_MAX_QUESTION, POLL_MIN_OPTIONS, Poll};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The kind of conversation a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    /// A one-to-one conversation with the bot.
    Direct,
    /// A group chat.
    Group,
    /// A room or guild channel.
    Channel,
}

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Sender {
    /// Platform user id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Username or handle, if the platform has one.
    pub username: Option<String>,
}

/// Where a message lives and where its reply goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conversation {
    /// Channel name (`telegram`, `discord`, `terminal`).
    pub channel: String,
    /// Account id (one bot token is one account); `default` unless configured.
    pub account: String,
    /// Chat kind.
    pub kind: ChatKind,
    /// Platform chat id.
    pub chat_id: String,
    /// Thread or forum topic id, if any.
    pub thread_id: Option<String>,
}

/// The message an inbound replies to, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyTo {
    /// Platform message id.
    pub message_id: String,
    /// Its text.
    pub text: String,
    /// Its sender's id.
    pub sender_id: String,
}

/// One normalized inbound message (SPEC 1.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inbound {
    /// Where it came from.
    pub conversation: Conversation,
    /// Who sent it.
    pub sender: Sender,
    /// Platform message id (unique within the conversation).
    pub message_id: String,
    /// Message text.
    pub text: String,
    /// The message it replies to.
    pub reply_to: Option<ReplyTo>,
    /// True when the bot was mentioned or replied to.
    pub mentioned: bool,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// A platform handle for answering a native command privately (a Discord slash command's
    /// interaction); `None` for ordinary messages.
    #[serde(default)]
    pub interaction: Option<String>,
    /// Files that came with the message (a photo, a document, a voice note); the caption is
    /// [`Inbound::text`]. Empty for plain text and in pending turns stored before media.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// What kind of file an [`Attachment`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentKind {
    /// A picture the model may look at.
    Image,
    /// Any other file.
    Document,
    /// A recorded voice note.
    Voice,
    /// An audio file.
    Audio,
    /// A video or a round video note.
    Video,
    /// A sticker.
    Sticker,
}

impl AttachmentKind {
    /// A lowercase word for notes and file names (`image`, `voice`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            AttachmentKind::Image => "image",
            AttachmentKind::Document => "document",
            AttachmentKind::Voice => "voice",
            AttachmentKind::Audio => "audio",
            AttachmentKind::Video => "video",
            AttachmentKind::Sticker => "sticker",
        }
    }
}

/// One file of an inbound message, as the platform describes it. The file itself is fetched
/// later, from [`Attachment::file_ref`], through [`Channel::media_url`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// What it is.
    pub kind: AttachmentKind,
    /// The platform's reference to fetch it with (a Telegram `file_id`, a Discord CDN URL).
    pub file_ref: String,
    /// MIME type, if the platform said (or the kind implies one).
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Size in bytes, if the platform said.
    #[serde(default)]
    pub size: Option<u64>,
    /// The sender's file name, if any.
    #[serde(default)]
    pub file_name: Option<String>,
}

/// The edit interval of a channel whose previews are off: no preview is due before the final.
pub const PREVIEWS_OFF_MS: u64 = 86_400_000;

/// What a channel can do and how fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest text of one message, in chars.
    pub max_chars: usize,
    /// Most lines in one message, if the platform folds long ones.
    pub max_lines: Option<usize>,
    /// Least time between two edits of one message in a direct chat, in milliseconds.
    pub edit_interval_ms: u64,
    /// The same in group chats and channels (platforms limit groups harder).
    pub group_edit_interval_ms: u64,
    /// Whether `open_thread` can create threads or topics.
    pub threads: bool,
}

impl Limits {
    /// Whether the channel shows previews at all (see [`PREVIEWS_OFF_MS`]).
    pub fn previews(&self) -> bool {
        self.edit_interval_ms < PREVIEWS_OFF_MS
    }
}

/// A button under a message the bot sends (a Telegram inline keyboard button): its label and
/// the opaque data a press brings back (never a command: the gateway looks the data up).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    /// What the button says.
    pub label: String,
    /// What a press brings back.
    pub data: String,
}

/// Someone pressed a [`Button`] the bot sent (or chose an option of its menu).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Press {
    /// Where the message with the button is.
    pub conversation: Conversation,
    /// Who pressed.
    pub sender: Sender,
    /// The message that carries the button.
    pub message_id: String,
    /// The button's data (the chosen option's, for a menu).
    pub data: String,
    /// The platform's handle for answering this press ([`Channel::answer_press`]).
    pub handle: String,
}

/// A message the channel sent, so it can be edited later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentMessage {
    /// Platform message id.
    pub message_id: String,
}

/// Why a channel operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The channel does not support this operation.
    #[error("{0} is not supported by this channel")]
    Unsupported(&'static str),
    /// The platform asked to slow down.
    #[error("rate limited; retry after {retry_after_ms} ms")]
    RateLimited {
        /// How long to wait.
        retry_after_ms: u64,
    },
    /// The platform rejected the request.
    #[error("the platform refused: {0}")]
    Rejected(String),
    /// Transport failure (network, closed stream).
    #[error("transport error: {0}")]
    Transport(String),
}

impl ChannelError {
    /// True when trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ChannelError::RateLimited { .. } | ChannelError::Transport(_)
        )
    }
}

/// Why the sink refused an inbound message.
#[derive(Debug, thiserror::Error)]
#[error("inbound not accepted: {0}")]
pub struct SinkError(pub String);

/// Where a channel hands its inbound messages. `accept` returns once the message is durable
/// (or deliberately dropped by admission); only then may the channel acknowledge the platform.
pub trait InboundSink: Send + Sync {
    /// Accepts one normalized message.
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>>;
    /// [`InboundSink::accept`], saying whether the message was admitted for its session
    /// (`false`: deliberately dropped: a stranger's, a blank one, a group message that only
    /// stays as context). A channel keeps state for a conversation only for admitted
    /// messages, so strangers cannot fill it. By default every accepted message counts.
    fn accept_admitted(&self, inbound: Inbound) -> BoxFuture<'_, Result<bool, SinkError>> {
        Box::pin(async move { self.accept(inbound).await.map(|()| true) })
    }
    /// Accepts one message of a sequential input (a script piped into the terminal) and
    /// returns only once it is handled far enough that the next message of the same
    /// conversation cannot overtake it: a command has answered, a message is in its
    /// session's queue. Input lines are then handled in input order. By default the same
    /// as [`InboundSink::accept`].
    fn accept_in_order(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        self.accept(inbound)
    }
    /// Accepts a message the channel confirms to its platform only through a later
    /// [`save_cursor`](InboundSink::save_cursor) (Telegram's update offset): the sink may
    /// leave making the message durable to that save, so a batch of messages costs one
    /// durable write instead of one each. Until then a crash may lose it, and the platform
    /// sends it again. Whatever the sink records of its turn later (a final reply before it
    /// is sent, a preview once sent) is a durable write that takes the message along. By
    /// default the same as [`InboundSink::accept`].
    fn accept_before_cursor(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        self.accept(inbound)
    }
    /// Someone pressed a button the bot sent. Answered at once, like a command; a press that
    /// is lost is pressed again, so nothing is stored. By default ignored.
    fn press(&self, press: Press) -> BoxFuture<'_, ()> {
        let _ = press;
        Box::pin(async {})
    }
    /// A durable platform cursor (e.g. the Telegram update offset) saved under `name`.
    fn cursor<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<i64>> {
        let _ = name;
        Box::pin(async { None })
    }
    /// Every cursor whose name starts with `prefix`, by name (e.g. a channel's per-chat
    /// cursors, to know which chats to catch up after a restart).
    fn cursors<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Vec<(String, i64)>> {
        let _ = prefix;
        Box::pin(async { Vec::new() })
    }
    /// Saves a platform cursor durably; call it only after the messages below it were accepted.
    fn save_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        let _ = (name, value);
        Box::pin(async { Ok(()) })
    }
    /// Saves a platform cursor durably unless a larger one is saved already (one that only
    /// moves forward, written by several processes). This default saves it as
    /// [`save_cursor`](InboundSink::save_cursor) does: right for a sink with one writer.
    fn raise_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        self.save_cursor(name, value)
    }
}

/// A chat platform adapter.
pub trait Channel: Send + Sync {
    /// Channel name (`telegram`, `discord`, `terminal`).
    fn name(&self) -> &str;
    /// Platform limits and pacing.
    fn limits(&self) -> Limits;
    /// Receives messages until `shutdown` fires, handing each to `sink`.
    fn run(
        &self,
        sink: std::sync::Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>>;
    /// How many parts the intake is split into, each of which can run on its own (Discord's
    /// shards); 1 for most channels. [`Channel::run`] runs them all.
    fn intake_parts(&self) -> u32 {
        1
    }
    /// Runs part `part` (below [`Channel::intake_parts`]) of the intake until `shutdown`
    /// fires, handing each message to `sink`: on a cluster, each part runs on the node
    /// holding its lease. With one part this is [`Channel::run`].
    fn run_part(
        &self,
        part: u32,
        sink: std::sync::Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        let _ = part;
        self.run(sink, shutdown)
    }
    /// Whether the channel reaches its platform now: its last attempt to receive got through
    /// (readiness, the gateway's `/readyz`). A channel that needs no connection says `true`.
    fn connected(&self) -> bool {
        true
    }
    /// Sends a new message into `to`.
    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>>;
    /// Sends a new message into `to` quoting the platform message `quote` (a reply in a busy
    /// group); channels without quoting just send.
    fn send_reply<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        quote: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let _ = quote;
        self.send(to, text)
    }
    /// [`Channel::send_reply`] with an idempotency key: the caller passes the same `key` when
    /// it sends the same thing again (a final's part resent after a restart), and a platform
    /// that can refuse a repeated send (Discord's `enforce_nonce`) answers with the message
    /// the first send made instead of making a second one. Channels without that ignore `key`.
    fn send_keyed<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        quote: Option<&'a str>,
        key: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let _ = key;
        self.send_reply(to, text, quote)
    }
    /// A collapsed block titled `title` holding `body` (the model's reasoning), as text
    /// [`Channel::send`] takes: by default the title, then the body as a quote (`> ` lines),
    /// which a channel may show collapsed (Telegram's expandable quote).
    fn collapsed(&self, title: &str, body: &str) -> String {
        let quoted: Vec<String> = body.lines().map(|line| format!("> {line}")).collect();
        format!("{title}\n{}", quoted.join("\n"))
    }
    /// Replaces the text of a sent message.
    fn edit<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>>;
    /// Whether [`Channel::send_buttons`] shows buttons (else questions keep their typed form).
    fn has_buttons(&self) -> bool {
        false
    }
    /// Sends `text` into `to` with `buttons` under it, in one row. Channels without buttons
    /// send the text alone.
    fn send_buttons<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        buttons: &'a [Button],
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let _ = buttons;
        self.send(to, text)
    }
    /// Sends `text` into `to` offering one choice among `options`: a select menu where the
    /// platform has one (Discord), else the same as [`Channel::send_buttons`]. A choice comes
    /// back as a [`Press`] whose data is the chosen option's.
    fn send_menu<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        options: &'a [Button],
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        self.send_buttons(to, text, options)
    }
    /// Answers a [`Press`] (by its handle) with a short note only the presser sees.
    fn answer_press<'a>(
        &'a self,
        handle: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = (handle, text);
        Box::pin(async { Ok(()) })
    }
    /// The direct conversation with user `user_id` (to write to them first, as to an owner
    /// about a pairing request). Unsupported by default.
    fn direct<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        let _ = user_id;
        Box::pin(async { Err(ChannelError::Unsupported("direct conversations")) })
    }
    /// Shows a typing indicator (a no-op where the platform has none).
    fn typing<'a>(&'a self, to: &'a Conversation) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = to;
        Box::pin(async { Ok(()) })
    }
    /// Called once a reply is complete (after its final edit); the terminal ends its line.
    fn reply_done<'a>(&'a self, to: &'a Conversation) -> BoxFuture<'a, ()> {
        let _ = to;
        Box::pin(async {})
    }
    /// Deletes a sent message.
    fn delete<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = (to, message);
        Box::pin(async { Err(ChannelError::Unsupported("delete")) })
    }
    /// Reacts to the platform message `message_id` in `to` with `emoji` (a Unicode emoji; on
    /// Discord also a custom one, `<:name:id>`). Any message of the conversation, not only
    /// the bot's. Unsupported by default.
    fn react<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
        emoji: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = (to, message_id, emoji);
        Box::pin(async { Err(ChannelError::Unsupported("reactions")) })
    }
    /// Pins the platform message `message_id` in `to` (any message of the conversation).
    /// Unsupported by default.
    fn pin<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = (to, message_id);
        Box::pin(async { Err(ChannelError::Unsupported("pinning")) })
    }
    /// Sends `poll` into `to` as the platform's native poll; the message it made.
    /// Unsupported by default.
    fn send_poll<'a>(
        &'a self,
        to: &'a Conversation,
        poll: &'a Poll,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let _ = (to, poll);
        Box::pin(async { Err(ChannelError::Unsupported("polls")) })
    }
    /// Whether replies stream as finished blocks (separate messages, never edited) instead
    /// of one preview edited as the text grows.
    fn block_streaming(&self) -> bool {
        false
    }
    /// Whether `conversation` is a thread of its own (a place `open_thread` would not create a
    /// new one under). A Telegram forum's General topic has a thread id but is not one.
    fn is_thread(&self, conversation: &Conversation) -> bool {
        conversation.thread_id.is_some()
    }

    /// Creates a thread or forum topic under `parent` and returns its conversation.
    fn open_thread<'a>(
        &'a self,
        parent: &'a Conversation,
        title: &'a str,
    ) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        let _ = (parent, title);
        Box::pin(async { Err(ChannelError::Unsupported("threads")) })
    }
    /// Whether `user_id` administers the group `conversation` (gates /new, /reset, /stop there).
    fn is_admin<'a>(
        &'a self,
        conversation: &'a Conversation,
        user_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, ChannelError>> {
        let _ = (conversation, user_id);
        Box::pin(async { Ok(false) })
    }
    /// Answers the native command `interaction` (see [`Inbound::interaction`]) privately, so
    /// that only the person who ran it sees `text` (at most [`Limits::max_chars`]). The first
    /// call for an interaction gives its answer; later calls add parts to it.
    fn answer_command<'a>(
        &'a self,
        to: &'a Conversation,
        interaction: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = (to, interaction, text);
        Box::pin(async { Err(ChannelError::Unsupported("command answers")) })
    }
    /// Where the file of `attachment` (one this channel produced) can be downloaded with a
    /// plain GET right now: Telegram asks `getFile`, Discord gives the CDN URL as is. The URL
    /// may hold a secret (Telegram's carries the bot token): never log it.
    fn media_url<'a>(
        &'a self,
        attachment: &'a Attachment,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        let _ = attachment;
        Box::pin(async { Err(ChannelError::Unsupported("attachments")) })
    }
    /// The `Authorization` header value a download from [`Channel::media_url`] needs
    /// (Slack's files want the bot token); `None` for a plain GET. A secret: never log it.
    fn media_authorization(&self) -> Option<String> {
        None
    }
    /// Longest caption a file may carry, in chars (Telegram 1,024); 0 when files carry no
    /// caption (the text then goes as a message of its own).
    fn caption_limit(&self) -> usize {
        0
    }
    /// Largest file [`Channel::send_file`] can send, in bytes (`None`: no known limit).
    fn max_file_bytes(&self) -> Option<u64> {
        None
    }
    /// Sends `file` into `to`, with `caption` (at most [`Channel::caption_limit`] chars, in
    /// the format of [`Channel::send`]'s text) under it. `key` works as in
    /// [`Channel::send_keyed`]: the same file sent again under the same key is not a second
    /// message where the platform can tell. The file is read from its open handle (streamed,
    /// never whole in memory); one bigger than [`Channel::max_file_bytes`] or that cannot be
    /// read fails with [`ChannelError::Rejected`].
    fn send_file<'a>(
        &'a self,
        to: &'a Conversation,
        file: &'a OutboundFile,
        caption: Option<&'a str>,
        key: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let _ = (to, file, caption, key);
        Box::pin(async { Err(ChannelError::Unsupported("sending files")) })
    }
    /// Registers native commands (name, description) with the platform.
    fn register_commands<'a>(
        &'a self,
        commands: &'a [(&'a str, &'a str)],
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = commands;
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbound_stored_before_attachments_still_loads() {
        let old = r#"{"conversation":{"channel":"telegram","account":"default","kind":"direct","chat_id":"42","thread_id":null},"sender":{"id":"42","name":"Ann","username":null},"message_id":"7","text":"hi","reply_to":null,"mentioned":true,"timestamp_ms":1}"#;
        let inbound: Inbound = serde_json::from_str(old).unwrap();
        assert!(inbound.attachments.is_empty());
        // Without attachments nothing new is written either.
        assert!(
            !serde_json::to_string(&inbound)
                .unwrap()
                .contains("attachments")
        );
        let mut with = inbound.clone();
        with.attachments.push(Attachment {
            kind: AttachmentKind::Voice,
            file_ref: "f1".into(),
            mime_type: Some("audio/ogg".into()),
            size: Some(3),
            file_name: None,
        });
        let json = serde_json::to_string(&with).unwrap();
        assert_eq!(serde_json::from_str::<Inbound>(&json).unwrap(), with);
    }
}
