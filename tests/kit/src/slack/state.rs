//! The fake's state: conversations with their messages, users, files, Socket Mode
//! connections and envelopes, recorded calls and rate limits, behind one mutex, plus the
//! notifications that wake `wait_for` and the redelivery timer.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::json::{self, BOT_USER};
use super::messages::Channel;
use super::types::{ChannelSpec, Ephemeral, RecordedCall, UserSpec};

/// The default time a client has to acknowledge an envelope before it is sent again.
pub(crate) const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(3);

/// A file: uploaded by the bot (`files.getUploadURLExternal`) or sent by a user.
#[derive(Debug, Clone)]
pub(crate) struct FileRec {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) title: String,
    pub(crate) mimetype: String,
    /// The bytes; `None` until uploaded.
    pub(crate) bytes: Option<Vec<u8>>,
    /// The `length` announced for an upload.
    pub(crate) length: u64,
    /// Who it belongs to.
    pub(crate) user: String,
}

/// What a test or the fake asks an open socket to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outgoing {
    /// Send this text frame.
    Text(String),
    /// Send this `disconnect` frame, then close about a second later.
    Disconnect(String),
    /// Close the TCP connection at once, without a close frame.
    Drop,
}

/// An open Socket Mode connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) tx: mpsc::UnboundedSender<Outgoing>,
    /// Told to disconnect: used only when no other connection is open.
    pub(crate) draining: bool,
}

/// An envelope not acknowledged yet.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) envelope: Value,
    pub(crate) attempt: u64,
    /// When it is sent again; `None` while it waits for a connection.
    pub(crate) deadline: Option<Instant>,
}

/// Everything behind the mutex.
#[derive(Debug)]
pub(crate) struct State {
    /// `http://127.0.0.1:PORT`, for the URLs of files.
    pub(crate) base_url: String,
    pub(crate) calls: Vec<RecordedCall>,
    pub(crate) channels: BTreeMap<String, Channel>,
    pub(crate) users: BTreeMap<String, UserSpec>,
    pub(crate) files: BTreeMap<String, FileRec>,
    next_file: u64,
    last_ts: u64,
    pub(crate) ephemerals: Vec<Ephemeral>,
    /// Injected 429s by method: how many are left and their `Retry-After`.
    pub(crate) limits: HashMap<String, (usize, u64)>,
    pub(crate) rate_limited: usize,
    /// Tickets handed out by `apps.connections.open`.
    pub(crate) tickets: u64,
    pub(crate) conns: BTreeMap<u64, Conn>,
    next_conn: u64,
    pub(crate) opened_total: usize,
    pub(crate) pending: BTreeMap<String, Pending>,
    /// Ids of pending envelopes waiting for a connection, in order.
    pub(crate) waiting: VecDeque<String>,
    pub(crate) envelopes_sent: Vec<Value>,
    pub(crate) acks: Vec<String>,
    pub(crate) ack_payloads: Vec<(String, Value)>,
    /// Every frame clients sent over Socket Mode, parsed (non-JSON as a string).
    pub(crate) received: Vec<Value>,
    pub(crate) dropped: usize,
    /// Envelopes that found no connection and were not queued.
    pub(crate) undelivered: Vec<Value>,
    pub(crate) ack_timeout: Duration,
    pub(crate) deliver_while_down: bool,
    pub(crate) next_event: u64,
    /// Bodies posted to `response_url`s: the URL's number and the body.
    pub(crate) responses: Vec<(u64, Value)>,
    pub(crate) next_response: u64,
    /// Ids of the files downloaded with the bot token.
    pub(crate) downloads: Vec<String>,
}

impl State {
    fn new(base_url: String) -> State {
        let mut users = BTreeMap::new();
        let bot = UserSpec::new(BOT_USER, "chela").bot();
        users.insert(bot.id.clone(), bot);
        State {
            base_url,
            calls: Vec::new(),
            channels: BTreeMap::new(),
            users,
            files: BTreeMap::new(),
            next_file: 0,
            last_ts: 0,
            ephemerals: Vec::new(),
            limits: HashMap::new(),
            rate_limited: 0,
            tickets: 0,
            conns: BTreeMap::new(),
            next_conn: 0,
            opened_total: 0,
            pending: BTreeMap::new(),
            waiting: VecDeque::new(),
            envelopes_sent: Vec::new(),
            acks: Vec::new(),
            ack_payloads: Vec::new(),
            received: Vec::new(),
            dropped: 0,
            undelivered: Vec::new(),
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            deliver_while_down: false,
            next_event: 0,
            responses: Vec::new(),
            next_response: 0,
            downloads: Vec::new(),
        }
    }

    /// A new message `ts`: the wall clock in whole 100 µs, strictly after the last one.
    pub(crate) fn next_ts(&mut self) -> String {
        let now = json::now_micros() / 100 * 100;
        self.last_ts = now.max(self.last_ts + 100);
        json::format_ts(self.last_ts)
    }

    /// A new file id, `F1`, `F2`, ...
    pub(crate) fn next_file_id(&mut self) -> String {
        self.next_file += 1;
        format!("F{}", self.next_file)
    }

    /// Makes `spec` known (a known conversation keeps its messages).
    pub(crate) fn ensure_channel(&mut self, spec: &ChannelSpec) {
        if let Some(user) = &spec.user
            && !self.users.contains_key(user)
        {
            self.remember_user(&UserSpec::new(user, &user.to_ascii_lowercase()));
        }
        self.channels
            .entry(spec.id.clone())
            .or_insert_with(|| Channel {
                spec: spec.clone(),
                messages: BTreeMap::new(),
            });
    }

    /// Remembers `user` (replacing what was known of it).
    pub(crate) fn remember_user(&mut self, user: &UserSpec) {
        self.users.insert(user.id.clone(), user.clone());
    }

    /// Conversation `id`, or `channel_not_found`.
    pub(crate) fn channel(&self, id: &str) -> Result<&Channel, &'static str> {
        self.channels.get(id).ok_or("channel_not_found")
    }

    /// Conversation `id` to change, or `channel_not_found`.
    pub(crate) fn channel_mut(&mut self, id: &str) -> Result<&mut Channel, &'static str> {
        self.channels.get_mut(id).ok_or("channel_not_found")
    }

    /// The conversation the bot posts into for `channel`: a known conversation, or a known
    /// user's direct message (created if needed), as Slack allows a user id as `channel`.
    pub(crate) fn resolve_channel(&mut self, channel: &str) -> Result<String, &'static str> {
        if self.channels.contains_key(channel) {
            return Ok(channel.to_owned());
        }
        if channel != BOT_USER && self.users.contains_key(channel) {
            let spec = ChannelSpec::im(channel);
            self.ensure_channel(&spec);
            return Ok(spec.id);
        }
        Err("channel_not_found")
    }

    /// Registers an open socket; returns its id.
    pub(crate) fn open_connection(&mut self, tx: mpsc::UnboundedSender<Outgoing>) -> u64 {
        self.next_conn += 1;
        self.opened_total += 1;
        let id = self.next_conn;
        self.conns.insert(
            id,
            Conn {
                tx,
                draining: false,
            },
        );
        id
    }

    /// Forgets a closed socket.
    pub(crate) fn close_connection(&mut self, id: u64) {
        self.conns.remove(&id);
    }
}

/// State shared by the handlers, the sockets, the redelivery timer and the
/// [`FakeSlack`](super::FakeSlack) handle.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Notified on every change, for `wait_for`.
    pub(crate) changed: Notify,
    /// Wakes the redelivery timer (a deadline may have moved).
    pub(crate) timer: Notify,
    /// Cancelled when the fake stops.
    pub(crate) stop: CancellationToken,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base_url: String,
}

impl Shared {
    /// Empty state for a server at `base_url`, stopped by `stop`.
    pub(crate) fn new(base_url: String, stop: CancellationToken) -> Shared {
        Shared {
            state: Mutex::new(State::new(base_url.clone())),
            changed: Notify::new(),
            timer: Notify::new(),
            stop,
            base_url,
        }
    }

    /// Locks the state (a poisoned lock is used anyway).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes everyone waiting for a change: tests and the redelivery timer.
    pub(crate) fn touch(&self) {
        self.changed.notify_waiters();
        self.timer.notify_one();
    }
}
