//! The fake Slack: [`FakeSlack`] serves the Web API (`/api/{method}`), Socket Mode
//! (`ws://127.0.0.1:PORT/socket`), upload URLs, private file URLs and `response_url`s on one
//! 127.0.0.1 listener for one bot app (user [`FakeSlack::BOT_USER`], bot `BBOT`, team `T1`,
//! app `A1`), lets tests play users in conversations, and records what the bot did.
//!
//! Web API (GET with a query, or POST with a JSON or form body; query and body merge; numbers
//! and flags may be strings): `Authorization: Bearer <token>` (or a `token` argument) with
//! [`FakeSlack::BOT_TOKEN`], except `apps.connections.open` which takes
//! [`FakeSlack::APP_TOKEN`]. No token is `not_authed`, the other of the two
//! `not_allowed_token_type`, any other `invalid_auth`. Errors are HTTP 200
//! `{"ok":false,"error":".."}`; an unknown method is 404 `unknown_method`;
//! [`FakeSlack::inject_429`] makes calls answer 429 `ratelimited` with `Retry-After`.
//! Methods: `auth.test`, `apps.connections.open`, `chat.postMessage` (`channel_not_found`,
//! `no_text`, `msg_too_long` over 40,000 characters, `thread_not_found`, `invalid_blocks`),
//! `chat.update`/`chat.delete` (`message_not_found`, `cant_update_message`,
//! `cant_delete_message`), `chat.postEphemeral`, `reactions.add`/`remove` (`invalid_name`,
//! `already_reacted`, `no_reaction`), `pins.add`/`remove` (`already_pinned`, `no_pin`),
//! `conversations.history` (top level and broadcast replies, newest first),
//! `conversations.replies` (parent first, replies oldest first), `conversations.open`,
//! `conversations.info`, `users.info`, `files.getUploadURLExternal` and
//! `files.completeUploadExternal` (`file_not_found`). Message `ts` values follow the wall
//! clock in steps of at least 100 µs (`1700000000.000100`), so they increase strictly and
//! compare alike as strings and as numbers. The bot's own posts are dispatched back as
//! `message` events with `bot_id`, as on Slack.
//!
//! Socket Mode: `hello` on connect; each event goes in an `events_api` envelope to the newest
//! open connection (one not told to disconnect, if any); the client acknowledges with
//! `{"envelope_id":..}`. Unacknowledged envelopes are sent again after the ack timeout
//! ([`FakeSlack::set_ack_timeout`], 3 s) with `retry_attempt` + 1 and `retry_reason:
//! "timeout"`, 3 times at most, then dropped ([`FakeSlack::dropped_envelopes`]). Events that
//! happen while no connection is open are lost (the messages stay in the history) unless
//! [`FakeSlack::set_deliver_while_down`]. [`FakeSlack::disconnect`] and
//! [`FakeSlack::drop_connections`] break connections; [`FakeSlack::user_presses`] and
//! [`FakeSlack::user_runs_command`] send `interactive` and `slash_commands` envelopes.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::time::Duration;
//! use chela_testkit::slack::{ChannelSpec, FakeSlack, UserSpec};
//! let slack = FakeSlack::start().await?;
//! // ... start the bot against slack.api_url() with FakeSlack::BOT_TOKEN / APP_TOKEN ...
//! slack.wait_for(|s| s.connected(), Duration::from_secs(5)).await;
//! let ann = UserSpec::new("U1", "ann");
//! slack.user_sends(&ChannelSpec::im("U1"), &ann, "hello");
//! let replied = slack.wait_for_sent("DU1", 1, Duration::from_secs(5)).await;
//! # let _ = replied;
//! # Ok(()) }
//! ```

mod chat;
mod control;
mod directory;
mod envelopes;
mod files;
mod history;
mod inspect;
mod interactive;
mod json;
mod marks;
mod messages;
mod multipart;
mod observe;
mod params;
mod socket;
mod state;
mod types;
mod users;
mod web;

#[cfg(test)]
mod tests;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use state::Shared;
pub use types::{ChannelKind, ChannelSpec, Ephemeral, RecordedCall, SentMessage, UserSpec};

/// A running fake Slack for one bot app. Dropping it (or calling [`FakeSlack::shutdown`])
/// stops it: the listener closes and Socket Mode connections end.
#[derive(Debug)]
pub struct FakeSlack {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<io::Result<()>>,
    /// Cancels `shared.stop` when the fake is dropped.
    _stop_on_drop: DropGuard,
}

impl FakeSlack {
    /// The bot token (`xoxb-`) every Web API method but `apps.connections.open` takes.
    pub const BOT_TOKEN: &'static str = json::BOT_TOKEN;
    /// The app-level token (`xapp-`) `apps.connections.open` takes.
    pub const APP_TOKEN: &'static str = json::APP_TOKEN;
    /// The bot's user id.
    pub const BOT_USER: &'static str = json::BOT_USER;
    /// The bot's bot id (`bot_id` of its messages).
    pub const BOT_ID: &'static str = json::BOT_ID;
    /// The workspace (team) id.
    pub const TEAM_ID: &'static str = json::TEAM_ID;
    /// The app id.
    pub const APP_ID: &'static str = json::APP_ID;
    /// The longest message text Slack takes, in characters.
    pub const MAX_TEXT: usize = chat::MAX_TEXT;

    /// Starts a server on `127.0.0.1:0` (a free port) in a background tokio task.
    pub async fn start() -> io::Result<FakeSlack> {
        FakeSlack::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Starts a server on `addr` in a background tokio task.
    pub async fn bind(addr: SocketAddr) -> io::Result<FakeSlack> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared::new(format!("http://{addr}"), stop.clone()));
        let (stopping, stopped) = watch::channel(false);
        let cancelled = stop.clone();
        tokio::spawn(async move {
            cancelled.cancelled().await;
            let _ = stopping.send(true);
        });
        envelopes::spawn_timer(Arc::clone(&shared));
        let app = web::router(Arc::clone(&shared));
        let task = crate::serve::spawn(listener, app, stopped);
        Ok(FakeSlack {
            addr,
            shared,
            task,
            _stop_on_drop: stop.drop_guard(),
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// `http://127.0.0.1:PORT/api`: the client calls `{api_url}/{method}`.
    pub fn api_url(&self) -> String {
        format!("{}/api", self.shared.base_url)
    }

    /// Stops the server: ends Socket Mode connections, stops accepting, and waits for the
    /// server task.
    pub async fn shutdown(self) -> io::Result<()> {
        self.shared.stop.cancel();
        match self.task.await {
            Ok(result) => result,
            Err(join) => Err(io::Error::other(join)),
        }
    }
}
