//! The fake Discord: [`FakeDiscord`] serves a gateway (WebSocket, JSON text frames) and the
//! REST API under `/api/v10` on 127.0.0.1 for one bot (`chela_test`, id
//! [`FakeDiscord::BOT_ID`]), lets tests play users in guild channels, threads and DMs, and
//! records what the bot did.
//!
//! Point serenity 0.12 at it with
//! `HttpBuilder::new(fake.token()).proxy(fake.rest_url()).ratelimiter_disabled(true)` and
//! `*client.ws_url.lock().await = fake.gateway_url()` before `start()` (`GET /gateway` also
//! answers that URL).
//!
//! Gateway (`ws://127.0.0.1:PORT/gateway`, any query): HELLO (op 10) on connect; IDENTIFY
//! (op 2, token with or without `Bot `) starts a session: READY (`v`, `user`, `guilds`,
//! `session_id`, `resume_gateway_url` = this gateway, `application{id,flags}`), then
//! GUILD_CREATE per known guild. Heartbeats (op 1) get op 11. RESUME (op 6) of the current
//! session replays every dispatch after its `seq`, then RESUMED; any other RESUME gets op 9
//! `false`. Every dispatch has `"s"`. Close codes: 4001 unknown opcode, 4002 undecodable
//! payload, 4003 not authenticated, 4004 bad token, 4005 second IDENTIFY, 4014 intents
//! `GUILD_MEMBERS`/`GUILD_PRESENCES` (not enabled for this bot unless
//! [`FakeDiscord::allow_privileged_intents`]). Dispatches follow the
//! session's intents as on Discord: `GUILDS` for GUILD_CREATE/THREAD_*/CHANNEL_UPDATE,
//! `GUILD_MESSAGES` or `DIRECT_MESSAGES` for MESSAGE_*, and without `MESSAGE_CONTENT` guild
//! messages arrive with empty `content`/`embeds`/`attachments` unless they mention the bot or
//! are the bot's. Dispatches happen only while a session exists (they queue while its
//! connection is down, for RESUME); with no session they are lost.
//!
//! Shards: IDENTIFY's `shard: [id, num_shards]` starts a session of that shard (one per
//! `[id, num_shards]`, each on its own connection, so clients of another `num_shards` do not
//! replace each other's); a guild's events go only to the sessions of shard
//! `(guild_id >> 22) % num_shards` ([`shard_of`]), DMs and events without a guild only to shard
//! 0's; READY lists the shard's guilds. `GET /gateway/bot` answers `shards` as set with
//! [`FakeDiscord::set_recommended_shards`] (1). [`FakeDiscord::connected_shards`] tells which
//! shards are connected.
//!
//! REST (header `Authorization: Bot <token>`, else 401 `{"code":0,"message":"401:
//! Unauthorized"}`; errors are `{"code":N,"message":"..."}`, validation errors add Discord's
//! `errors` tree; unknown routes 404 `{"code":0,"message":"404: Not Found"}`):
//! - `GET /gateway`, `/gateway/bot`, `/users/@me`, `/applications/@me`;
//!   `POST /users/@me/channels` (DM with a known user, else 400 50033 `Invalid Recipient(s)`).
//! - `POST /channels/{c}/messages` (JSON or multipart with `payload_json`): `content` over 2000
//!   characters 400 `{"code":50035,"message":"Invalid Form Body","errors":{"content":...}}`;
//!   nothing to send 400 50006 `Cannot send an empty message`; `message_reference` to an
//!   unknown message 400 50035 unless `fail_if_not_exists: false`; `enforce_nonce: true` with
//!   a nonce the bot already used in the channel returns that message and creates nothing;
//!   answers the full Message (author = the bot, no `guild_id`) and dispatches MESSAGE_CREATE.
//! - `PATCH /channels/{c}/messages/{m}`: edited Message with `edited_timestamp`,
//!   MESSAGE_UPDATE; others' messages 403 50005; `GET` one, `GET` a page (`limit`, `before`,
//!   `after`), `DELETE` 204 + MESSAGE_DELETE; unknown message 404 `{"code":10008,"message":
//!   "Unknown Message"}`, unknown channel 404 `{"code":10003,"message":"Unknown Channel"}`.
//! - `POST /channels/{c}/typing` 204 (counted); reactions `PUT`/`DELETE .../reactions/{e}/@me`
//!   204; `GET`/`PATCH /channels/{c}` (threads: `name`, `archived`, `locked`).
//! - Pins `PUT`/`DELETE /channels/{c}/pins/{m}` 204 (the message's `pinned`); a create with a
//!   `poll` (question 1-300 characters, 1-10 answers of 1-55) needs no content and shows the
//!   poll in the message. Read back with [`FakeDiscord::pinned`] and [`FakeDiscord::polls`].
//! - `POST /channels/{c}/messages/{m}/threads` (thread id = message id, type 11; a second one
//!   400 160004) and `POST /channels/{c}/threads` (type 12 unless `type: 11`): thread channel
//!   with `parent_id`, `guild_id`, `thread_metadata`; THREAD_CREATE; non-text parents 400
//!   50024.
//! - Application commands, global and per guild: `GET`, `PUT` (bulk overwrite), `POST`,
//!   `GET`/`PATCH`/`DELETE` one.
//! - Slash commands: [`FakeDiscord::user_runs_command`] dispatches `INTERACTION_CREATE`; the
//!   bot answers with `POST /interactions/{id}/{token}/callback` (204; once), `PATCH`/`GET
//!   /webhooks/{app}/{token}/messages/@original` and follow-ups `POST /webhooks/{app}/{token}`
//!   (no bot token needed: the interaction token authorizes), read back with
//!   [`FakeDiscord::interactions`].
//! - Rate limits on message sends and edits: see [`FakeDiscord::inject_429`] and
//!   [`FakeDiscord::enforce_rate_limits`]. The 429 body has no `code` (as on Discord), so
//!   serenity with its ratelimiter off reports `code: -1` and a decode message: only the
//!   status 429 reaches the caller, not `retry_after`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use chela_testkit::discord::{ChannelSpec, FakeDiscord, UserSpec};
//! let discord = FakeDiscord::start().await?;
//! // ... start the bot against discord.rest_url() / discord.gateway_url() ...
//! discord.wait_for(|d| d.connected(), std::time::Duration::from_secs(5)).await;
//! let id = discord.user_sends(ChannelSpec::dm(500), UserSpec::new(42, "ann"), "hello");
//! let replied = discord
//!     .wait_for(|d| !d.sent(500).is_empty(), std::time::Duration::from_secs(5))
//!     .await;
//! # let _ = (id, replied);
//! # Ok(()) }
//! ```

mod body;
mod channels;
mod commands;
mod components;
mod control;
mod error;
mod gateway;
mod inspect;
mod interactions;
mod json;
mod limits;
mod message;
mod messages;
mod poll;
mod presses;
mod rest;
mod shards;
mod state;
mod types;
mod users;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use shards::shard_of;
use state::Shared;
pub use types::{
    AttachmentSpec, BotMessage, ChannelKind, ChannelSpec, InteractionInfo, MessageOptions,
    RecordedCall, ThreadInfo, UserSpec,
};

/// A running fake Discord (gateway and REST) for one bot. Dropping it (or calling
/// [`FakeDiscord::shutdown`]) stops it: the listener closes and gateway connections end.
#[derive(Debug)]
pub struct FakeDiscord {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: JoinHandle<io::Result<()>>,
}

impl FakeDiscord {
    /// The one token the fake accepts (REST `Authorization: Bot <token>`, IDENTIFY, RESUME).
    pub const TOKEN: &'static str = json::TOKEN;
    /// The bot's user id.
    pub const BOT_ID: u64 = json::BOT_ID;
    /// The bot's username.
    pub const BOT_USERNAME: &'static str = json::BOT_USERNAME;
    /// The application id (equal to the bot's user id, as for every modern application).
    pub const APPLICATION_ID: u64 = json::APPLICATION_ID;
    /// The content limit of a message, in characters.
    pub const MAX_CONTENT: usize = messages::MAX_CONTENT;

    /// Starts a server on `127.0.0.1:0` (a free port) in a background tokio task.
    pub async fn start() -> io::Result<FakeDiscord> {
        FakeDiscord::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Starts a server on `addr` in a background tokio task.
    pub async fn bind(addr: SocketAddr) -> io::Result<FakeDiscord> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared::new(format!("http://{addr}"), stopped.clone()));
        let app = rest::router(Arc::clone(&shared));
        let task = crate::serve::spawn(listener, app, stopped);
        Ok(FakeDiscord {
            addr,
            shared,
            stop,
            task,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, serenity's `proxy` base: REST calls arrive under
    /// `/api/v10/...`.
    pub fn rest_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// `ws://127.0.0.1:PORT/gateway`, the gateway URL (also READY's `resume_gateway_url`).
    pub fn gateway_url(&self) -> String {
        self.shared.lock().gateway_url.clone()
    }

    /// The one accepted bot token (without the `Bot ` prefix).
    pub fn token(&self) -> &'static str {
        Self::TOKEN
    }

    /// The bot's user id.
    pub fn bot_id(&self) -> u64 {
        Self::BOT_ID
    }

    /// The application id.
    pub fn application_id(&self) -> u64 {
        Self::APPLICATION_ID
    }

    /// The bot as a [`UserSpec`] (`chela_test`, a bot).
    pub fn bot_user(&self) -> UserSpec {
        UserSpec::new(Self::BOT_ID, Self::BOT_USERNAME).bot()
    }

    /// Stops the server: ends gateway connections, stops accepting, and waits for the server
    /// task.
    pub async fn shutdown(self) -> io::Result<()> {
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(result) => result,
            Err(join) => Err(io::Error::other(join)),
        }
    }
}
