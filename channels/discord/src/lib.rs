//! chela-discord: the Discord channel, on serenity.
//!
//! Module map:
//! - [`normalize`]: Discord messages -> normalized inbound records (channels, threads, DMs).
//! - [`interaction`]: slash-command interactions -> normalized inbound records.
//! - `run`: the gateway connection, each shard on a serenity client of its own.
//! - [`shard`]: what one shard remembers (its READY, catch-up, collector, connection).
//! - `handler`: the serenity event handler (normalize and hand on, nothing else).
//! - `catch_up`: after READY and RESUME, what was posted meanwhile is read from history.
//! - `seen`: the last message taken per channel, kept as a durable cursor.
//! - `guilds`: the guild of each channel with a cursor (none: a DM), kept beside it.
//! - `command_intake`: slash commands acknowledged (deferred, private) and handed on.
//! - `slash`: which slash commands are registered, once READY gave the application id.
//! - `pending`: interaction tokens awaiting their private answer.
//! - `state`: the bot id, where channels sit (thread parents, guilds), allowlists.
//! - `errors`: REST errors -> channel errors.
//! - `message_rest`: message create and edit, with a 429's `retry_after` kept.
//! - `upload`: files the bot sends (one attachment per message, nonce as for text).
//! - `actions`: the agent's message actions (reactions, pins, native polls).
//!
//! Pointed at a non-default `api_url` (a fake), serenity's ratelimiter is off and chela paces
//! itself (messages go through `message_rest`, which hands Discord's `retry_after` to the reply
//! path, in production too); every send carries a nonce with `enforce_nonce`, so a retried send cannot duplicate.
//! A keyed send ([`Channel::send_keyed`], a final's part) derives its nonce from the key, so
//! the same part sent again after a restart is answered with the first message.

mod actions;
mod buttons;
mod catch_up;
mod command_intake;
mod connection;
mod errors;
mod guilds;
mod handler;
mod intake;
pub mod interaction;
mod message_rest;
mod nonce;
pub mod normalize;
mod pending;
mod record;
mod run;
mod seen;
pub mod shard;
mod slash;
mod state;
mod upload;

use std::sync::Arc;

use chela_channel::{
    BoxFuture, Channel, ChannelError, ChatKind, Conversation, InboundSink, Limits, Poll,
    SentMessage,
};
use serenity::builder::{
    Builder, CreateAllowedMentions, CreateInteractionResponseFollowup, CreateMessage, CreateThread,
    EditInteractionResponse, EditMessage,
};
use serenity::http::{Http, HttpBuilder};
use serenity::model::channel::{ChannelType, MessageReference, Nonce};
use serenity::model::id::{ChannelId, GuildId, MessageId, UserId};
use tokio_util::sync::CancellationToken;

use errors::channel_error;
use message_rest::MessageRest;
use normalize::Place;
use pending::Pending;
use slash::Registrar;
use state::State;

/// Discord's REST base; any other `api_url` is a proxy or fake.
pub const DEFAULT_API_URL: &str = "https://discord.com";
/// Most chars in one message.
pub const MAX_CHARS: usize = 2000;
/// Most lines before Discord folds a message.
pub const MAX_LINES: usize = 17;
/// Attempts of one send when the connection fails (same nonce: no duplicates).
const SEND_ATTEMPTS: u32 = 3;

/// What the Discord channel needs to run.
#[derive(Debug, Clone)]
pub struct DiscordSettings {
    /// Bot token.
    pub token: String,
    /// REST base URL.
    pub api_url: String,
    /// Gateway URL; empty: ask the REST API.
    pub gateway_url: String,
    /// Account id in session keys.
    pub account: String,
    /// Edit a preview as the reply grows (false: one message at the end).
    pub stream_previews: bool,
    /// Send finished blocks as separate messages instead of editing a preview.
    pub block_streaming: bool,
    /// Guilds whose messages are taken (empty: all).
    pub guilds: Vec<u64>,
    /// Channels whose messages are taken (empty: all).
    pub channels: Vec<u64>,
    /// Roles whose members may /new, /reset and /stop in guild channels.
    pub admin_roles: Vec<u64>,
    /// Largest file the bot attaches, in bytes.
    pub max_upload_bytes: u64,
    /// Gateway shards (0 counts as 1): shard `id` IDENTIFYs with `[id, shards]` and gets the
    /// events of the guilds with `(guild_id >> 22) % shards == id`, DMs on shard 0.
    pub shards: u32,
}

/// The Discord channel.
pub struct DiscordChannel {
    http: Arc<Http>,
    /// Message create and edit (serenity builds the bodies).
    rest: MessageRest,
    settings: DiscordSettings,
    state: Arc<State>,
    /// Interactions awaiting their private answer.
    pending: Arc<Pending>,
    registrar: Arc<Registrar>,
    /// When the shards may IDENTIFY.
    starts: run::Starts,
}

impl DiscordChannel {
    /// Builds the channel (no network yet).
    pub fn new(settings: DiscordSettings) -> Arc<Self> {
        let client = reqwest::Client::builder()
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let http = Arc::new(build_http(&settings, client.clone()));
        let api_url = match settings.api_url.trim() {
            "" => DEFAULT_API_URL,
            url => url,
        };
        let rest = MessageRest::new(client, api_url, &settings.token);
        let state = Arc::new(State::new(
            settings.account.clone(),
            settings.guilds.clone(),
            settings.channels.clone(),
            http.clone(),
        ));
        Arc::new(DiscordChannel {
            registrar: Arc::new(Registrar::new(http.clone())),
            pending: Arc::new(Pending::default()),
            starts: run::Starts::default(),
            http,
            rest,
            settings,
            state,
        })
    }

    /// Delivers one part of the private answer to interaction `handle`: the first replaces
    /// the deferred response, later ones are private follow-ups.
    async fn answer_once(&self, handle: &str, text: &str) -> Result<(), ChannelError> {
        let id = id_of(handle)?;
        let Some(pending) = self.pending.get(id) else {
            return Err(ChannelError::Rejected(format!(
                "interaction {id} is unknown or expired"
            )));
        };
        let mentions = CreateAllowedMentions::new();
        let sent = if pending.answered {
            CreateInteractionResponseFollowup::new()
                .content(text)
                .ephemeral(true)
                .allowed_mentions(mentions)
                .execute(&*self.http, (None, &pending.token))
                .await
        } else {
            EditInteractionResponse::new()
                .content(text)
                .allowed_mentions(mentions)
                .execute(&*self.http, &pending.token)
                .await
        };
        sent.map_err(channel_error)?;
        self.pending.mark_answered(id);
        Ok(())
    }

    /// Sends `text` into `to`. Unkeyed: a fresh random nonce. Keyed: the nonce comes from
    /// `key`, so a send repeated after a restart is answered with the first message; one that
    /// answers with a message older than the request which is gone (taken back by recovery)
    /// is sent again under the key's next nonce.
    async fn send_once(
        &self,
        to: &Conversation,
        text: &str,
        quote: Option<&str>,
        key: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let channel = target(to)?;
        let Some(key) = key else {
            let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_string();
            let body = Body {
                text,
                quote,
                components: Components::None,
            };
            return self.create(channel, &body, &nonce).await.map(sent);
        };
        let body = Body {
            text,
            quote,
            components: Components::None,
        };
        for round in 0..nonce::KEYED_ROUNDS {
            let since = nonce::snowflake_now();
            let id = self
                .create(channel, &body, &nonce::derive(key, round))
                .await?;
            if id >= since || self.still_there(channel, id).await {
                return Ok(sent(id));
            }
            tracing::info!(
                message = id,
                "discord: a resent part's nonce answered with a deleted message; sending it anew"
            );
        }
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_string();
        self.create(channel, &body, &nonce).await.map(sent)
    }

    /// Sends `text` with `components` under it (a question: never a reply part, so a fresh
    /// nonce).
    async fn send_components(
        &self,
        to: &Conversation,
        text: &str,
        components: Components<'_>,
    ) -> Result<SentMessage, ChannelError> {
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_string();
        let body = Body {
            text,
            quote: None,
            components,
        };
        self.create(target(to)?, &body, &nonce).await.map(sent)
    }

    /// Whether message `id` of `channel` still exists (true when that cannot be told).
    async fn still_there(&self, channel: ChannelId, id: u64) -> bool {
        match self.http.get_message(channel, MessageId::new(id)).await {
            Ok(_) => true,
            Err(serenity::Error::Http(serenity::http::HttpError::UnsuccessfulRequest(r))) => {
                r.status_code.as_u16() != 404
            }
            Err(_) => true,
        }
    }

    /// One message create with `nonce` and `enforce_nonce`, tried again on transport errors
    /// with the same nonce (no duplicates); the message id.
    async fn create(
        &self,
        channel: ChannelId,
        body: &Body<'_>,
        nonce: &str,
    ) -> Result<u64, ChannelError> {
        let mut attempt = 0;
        loop {
            let mut builder = CreateMessage::new()
                .content(body.text)
                .nonce(Nonce::String(nonce.to_owned()))
                .enforce_nonce(true)
                .allowed_mentions(CreateAllowedMentions::new().replied_user(false));
            match body.components {
                Components::None => {}
                Components::Buttons(list) => builder = builder.components(buttons::row(list)),
                Components::Menu(options) => builder = builder.components(buttons::menu(options)),
            }
            if let Some(id) = body
                .quote
                .and_then(|q| q.parse::<u64>().ok())
                .filter(|id| *id != 0)
            {
                builder = builder
                    .reference_message(MessageReference::from((channel, MessageId::new(id))));
            }
            match self.rest.create(channel.get(), &builder).await {
                Ok(id) => return Ok(id),
                Err(error) => {
                    attempt += 1;
                    if !matches!(error, ChannelError::Transport(_)) || attempt >= SEND_ATTEMPTS {
                        return Err(error);
                    }
                    tracing::debug!(error = %error, "discord send failed; retrying with the same nonce");
                }
            }
        }
    }
}

/// What a message create carries.
struct Body<'a> {
    text: &'a str,
    /// The message it answers, if any.
    quote: Option<&'a str>,
    /// Buttons or a menu under it.
    components: Components<'a>,
}

/// The components under a message chela creates.
#[derive(Clone, Copy)]
enum Components<'a> {
    /// Nothing.
    None,
    /// Buttons, in one row.
    Buttons(&'a [chela_channel::Button]),
    /// A select menu of these options.
    Menu(&'a [chela_channel::Button]),
}

fn sent(id: u64) -> SentMessage {
    SentMessage {
        message_id: id.to_string(),
    }
}

fn build_http(settings: &DiscordSettings, client: reqwest::Client) -> Http {
    let builder = HttpBuilder::new(&settings.token).client(client);
    let url = settings.api_url.trim_end_matches('/');
    if url.is_empty() || url == DEFAULT_API_URL {
        builder.build()
    } else {
        // serenity's ratelimiter ignores the proxy: off it goes, and chela paces itself.
        builder.proxy(url).ratelimiter_disabled(true).build()
    }
}

impl Channel for DiscordChannel {
    fn name(&self) -> &str {
        "discord"
    }

    fn connected(&self) -> bool {
        self.state.connected()
    }

    fn block_streaming(&self) -> bool {
        self.settings.block_streaming
    }

    fn limits(&self) -> Limits {
        // About 5 edits per 5 s per channel.
        let interval = if self.settings.stream_previews {
            1_000
        } else {
            chela_channel::PREVIEWS_OFF_MS
        };
        Limits {
            max_chars: MAX_CHARS,
            max_lines: Some(MAX_LINES),
            edit_interval_ms: interval,
            group_edit_interval_ms: interval,
            threads: true,
        }
    }

    fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.run_all(sink, shutdown))
    }

    fn intake_parts(&self) -> u32 {
        self.shards()
    }

    fn run_part(
        &self,
        part: u32,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(self.run_shard(part, sink, shutdown))
    }

    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_once(to, text, None, None))
    }

    fn send_keyed<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        quote: Option<&'a str>,
        key: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_once(to, text, quote, Some(key)))
    }

    fn send_reply<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        quote: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_once(to, text, quote, None))
    }

    /// Discord has no collapsed quote: the title as small text and the body as a spoiler,
    /// shown when tapped.
    fn collapsed(&self, title: &str, body: &str) -> String {
        format!("-# {title}\n||{}||", body.replace("||", "| |"))
    }

    fn edit<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            // An edit ends whatever question the message asked: its buttons go.
            let body = EditMessage::new().content(text).components(Vec::new());
            self.rest
                .edit(target(to)?.get(), message_id(message)?.get(), &body)
                .await
        })
    }

    fn has_buttons(&self) -> bool {
        true
    }

    fn send_buttons<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        buttons: &'a [chela_channel::Button],
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_components(to, text, Components::Buttons(buttons)))
    }

    fn send_menu<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
        options: &'a [chela_channel::Button],
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_components(to, text, Components::Menu(options)))
    }

    fn answer_press<'a>(
        &'a self,
        handle: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.answer_once(handle, text))
    }

    /// A Discord user's DM channel, opened (or found) through the API.
    fn direct<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        Box::pin(async move {
            let dm = UserId::new(id_of(user_id)?)
                .create_dm_channel(&self.http)
                .await
                .map_err(channel_error)?;
            self.state.remember(dm.id.get(), Place::Direct, None);
            Ok(Conversation {
                channel: "discord".into(),
                account: self.settings.account.clone(),
                kind: ChatKind::Direct,
                chat_id: dm.id.get().to_string(),
                thread_id: None,
            })
        })
    }

    fn typing<'a>(&'a self, to: &'a Conversation) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            target(to)?
                .broadcast_typing(&self.http)
                .await
                .map_err(channel_error)
        })
    }

    fn delete<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            target(to)?
                .delete_message(&self.http, message_id(message)?)
                .await
                .map_err(channel_error)
        })
    }

    fn react<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
        emoji: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.react_once(to, message_id, emoji))
    }

    fn pin<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.pin_once(to, message_id))
    }

    fn send_poll<'a>(
        &'a self,
        to: &'a Conversation,
        poll: &'a Poll,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_poll_once(to, poll))
    }

    fn open_thread<'a>(
        &'a self,
        parent: &'a Conversation,
        title: &'a str,
    ) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        Box::pin(async move {
            let parent_id = id_of(&parent.chat_id)?;
            let thread = ChannelId::new(parent_id)
                .create_thread(
                    &self.http,
                    CreateThread::new(title).kind(ChannelType::PublicThread),
                )
                .await
                .map_err(channel_error)?;
            self.state.remember(
                thread.id.get(),
                Place::Thread(parent_id),
                Some(thread.guild_id.get()),
            );
            Ok(Conversation {
                kind: ChatKind::Channel,
                thread_id: Some(thread.id.get().to_string()),
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
            let channel = id_of(
                conversation
                    .thread_id
                    .as_deref()
                    .unwrap_or(&conversation.chat_id),
            )?;
            let Some(guild) = self.state.guild_of(channel).or_else(|| {
                id_of(&conversation.chat_id)
                    .ok()
                    .and_then(|c| self.state.guild_of(c))
            }) else {
                return Ok(false);
            };
            let (guild, user) = (GuildId::new(guild), UserId::new(id_of(user_id)?));
            let partial = self.http.get_guild(guild).await.map_err(channel_error)?;
            if partial.owner_id == user {
                return Ok(true);
            }
            let member = self
                .http
                .get_member(guild, user)
                .await
                .map_err(channel_error)?;
            let by_role = member
                .roles
                .iter()
                .any(|r| self.settings.admin_roles.contains(&r.get()));
            let permissions = partial.member_permissions(&member);
            Ok(by_role || permissions.administrator() || permissions.manage_guild())
        })
    }

    fn answer_command<'a>(
        &'a self,
        to: &'a Conversation,
        interaction: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        let _ = to;
        Box::pin(self.answer_once(interaction, text))
    }

    /// A Discord attachment's reference is its CDN URL, fetched as is.
    fn media_url<'a>(
        &'a self,
        attachment: &'a chela_channel::Attachment,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async move { Ok(attachment.file_ref.clone()) })
    }

    fn caption_limit(&self) -> usize {
        upload::CAPTION_LIMIT
    }

    fn max_file_bytes(&self) -> Option<u64> {
        Some(self.settings.max_upload_bytes)
    }

    fn send_file<'a>(
        &'a self,
        to: &'a Conversation,
        file: &'a chela_channel::OutboundFile,
        caption: Option<&'a str>,
        key: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.send_file_once(to, file, caption, key))
    }

    fn register_commands<'a>(
        &'a self,
        commands: &'a [(&'a str, &'a str)],
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(self.registrar.set(commands))
    }
}

/// Where replies go: the thread when there is one, else the channel.
fn target(to: &Conversation) -> Result<ChannelId, ChannelError> {
    id_of(to.thread_id.as_deref().unwrap_or(&to.chat_id)).map(ChannelId::new)
}

fn message_id(message: &SentMessage) -> Result<MessageId, ChannelError> {
    id_of(&message.message_id).map(MessageId::new)
}

fn id_of(text: &str) -> Result<u64, ChannelError> {
    text.parse::<u64>()
        .ok()
        .filter(|id| *id != 0)
        .ok_or_else(|| ChannelError::Rejected(format!("bad discord id {text}")))
}
