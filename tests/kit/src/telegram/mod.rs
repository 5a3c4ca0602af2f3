//! The fake Telegram Bot API: [`FakeTelegram`] serves `/bot{token}/{method}` on 127.0.0.1 for
//! one bot (`@chela_test_bot`, id 123456, token `123456:TEST`), lets tests play users in
//! private chats, groups and forum topics, and records what the bot did.
//!
//! Point teloxide at it with `Bot::new(fake.token()).set_api_url(fake.api_url().parse()?)`.
//! Method names match case-insensitively (teloxide sends `SendMessage`); parameters come as
//! JSON, `application/x-www-form-urlencoded`, multipart text fields or a query string.
//! Answers are Bot API shaped; unknown methods get 404 `Not Found`, other tokens 401
//! `Unauthorized` (never 5xx, on which teloxide sleeps 10 s).
//!
//! Behaviour (every error is `{"ok":false,"error_code":N,"description":...}`):
//! - `getUpdates`: `offset` confirms everything below it (negative keeps the last `-offset`),
//!   `limit` 1-100, `timeout` seconds of long polling woken by new updates,
//!   `allowed_updates` remembered. A second `getUpdates` while one is in flight gets 409
//!   `Conflict: terminated by other getUpdates request; make sure that only one bot instance
//!   is running` (the real API terminates the older request instead; either way both pollers
//!   see the conflict). With a webhook set: 409 `Conflict: can't use getUpdates method while
//!   webhook is active; use deleteWebhook to delete the webhook first`.
//! - `sendMessage` / `editMessageText`: message ids per chat (shared with user messages),
//!   `date` and `edit_date` in seconds; text limits in UTF-16 code units (4096): 400
//!   `Bad Request: message is too long`, `Bad Request: message text is empty`; `parse_mode`
//!   checked as described in `markup` (400 `Bad Request: can't parse entities: ...`); edits:
//!   `Bad Request: message to edit not found`, `Bad Request: message can't be edited` (not
//!   the bot's), `Bad Request: message is not modified: specified new message content and
//!   reply markup are exactly the same as a current content and reply markup of the
//!   message`; replies: `Bad Request: message to be replied not found` unless
//!   `allow_sending_without_reply`; unknown chat: `Bad Request: chat not found`.
//! - `setMessageReaction` (emoji reactions on a live message, the last call's kept),
//!   `pinChatMessage`, `sendPoll` (question 1-300 characters, 2-12 options of 1-100; the
//!   poll is a bot message without `text`, so [`FakeTelegram::sent`] leaves it out): read
//!   back with [`FakeTelegram::reactions`], [`FakeTelegram::pinned`], [`FakeTelegram::polls`].
//! - Forums: thread id 1 (General) or an unknown topic in `sendMessage`: `Bad Request: message
//!   thread not found`; `sendChatAction` accepts 1. Non-forum chats ignore
//!   `message_thread_id`. Messages in a topic carry `message_thread_id`, `is_topic_message`
//!   and, without an explicit reply, `reply_to_message` = the topic's creation message, as
//!   Telegram does.
//! - Rate limits (off by default, see [`FakeTelegram::enforce_rate_limits`]) and injected 429s
//!   answer 429 `Too Many Requests: retry after N` with `parameters.retry_after` N.
//! - Fault injection (off by default, see [`FakeTelegram::inject_faults`]): sends, edits and
//!   deletes fail at seeded random rates with 429s, JSON 500s, HTML 502s and dropped
//!   connections, without being executed.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use chela_testkit::telegram::{ChatSpec, FakeTelegram, UserSpec};
//! let tg = FakeTelegram::start().await?;
//! let id = tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), "hello");
//! // ... run the adapter against tg.api_url() with tg.token() ...
//! let replied = tg
//!     .wait_for(|t| !t.sent(42).is_empty(), std::time::Duration::from_secs(5))
//!     .await;
//! # let _ = (id, replied);
//! # Ok(()) }
//! ```

mod actions;
mod body;
mod entities;
mod faults;
mod files;
mod inspect;
mod limits;
mod markup;
mod messages;
mod misc;
mod reply;
mod server;
mod state;
mod types;
mod updates;
mod uploads;
mod users;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use faults::{FaultCounts, Faults};
pub use files::{FileKind, FileSpec, GET_FILE_LIMIT};
use state::Shared;
pub use types::{
    BotCommand, BotMessage, ChatAction, ChatKind, ChatSpec, Entity, ForumTopic, Pollers, Rate,
    RateLimits, RecordedCall, SendOptions, UserSpec,
};
pub use uploads::{CAPTION_LIMIT, Upload};

/// A running fake Bot API server for one bot. Dropping it (or calling
/// [`FakeTelegram::shutdown`]) stops it: the listener closes and long polls end.
#[derive(Debug)]
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: JoinHandle<io::Result<()>>,
}

impl FakeTelegram {
    /// The one token the fake accepts.
    pub const TOKEN: &'static str = state::TOKEN;
    /// The bot's user id.
    pub const BOT_ID: i64 = state::BOT_ID;
    /// The bot's username (without `@`).
    pub const BOT_USERNAME: &'static str = state::BOT_USERNAME;

    /// Starts a server on `127.0.0.1:0` (a free port) in a background tokio task.
    pub async fn start() -> io::Result<FakeTelegram> {
        FakeTelegram::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Starts a server on `addr` in a background tokio task.
    pub async fn bind(addr: SocketAddr) -> io::Result<FakeTelegram> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared::new(stopped.clone()));
        let app = server::router(Arc::clone(&shared));
        let task = crate::serve::spawn(listener, app, stopped);
        Ok(FakeTelegram {
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

    /// `http://127.0.0.1:PORT`, the API URL to give the bot (calls go to
    /// `{api_url}/bot{token}/{Method}`).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The one accepted bot token, `123456:TEST`; other tokens get 401 `Unauthorized`.
    pub fn token(&self) -> &'static str {
        Self::TOKEN
    }

    /// Stops the server: ends long polls, stops accepting, and waits for the server task.
    pub async fn shutdown(self) -> io::Result<()> {
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(result) => result,
            Err(join) => Err(io::Error::other(join)),
        }
    }
}
