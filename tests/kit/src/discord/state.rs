//! The fake's state: guilds, channels with their messages, the gateway session with its
//! dispatch log, recorded calls, commands and rate limits, behind one mutex, plus the
//! notifications that wake gateway connections and `wait_for`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use super::json::{self, BOT_ID, ThreadMeta, iso_now};
use super::limits::Limiter;
use super::types::{ChannelKind, ChannelSpec, RecordedCall, UserSpec};

/// Intent `GUILDS` (guild, channel and thread events).
pub(crate) const INTENT_GUILDS: u64 = 1;
/// Intent `GUILD_MESSAGES`.
pub(crate) const INTENT_GUILD_MESSAGES: u64 = 1 << 9;
/// Intent `DIRECT_MESSAGES`.
pub(crate) const INTENT_DIRECT_MESSAGES: u64 = 1 << 12;
/// Privileged intent `MESSAGE_CONTENT`.
pub(crate) const INTENT_MESSAGE_CONTENT: u64 = 1 << 15;
/// The default heartbeat interval (Discord's usual value).
pub(crate) const HEARTBEAT_INTERVAL_MS: u64 = 41_250;

/// One message of a channel, user's or bot's, with its current REST JSON (no `guild_id` or
/// `member`: dispatches add those).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) json: Value,
    pub(crate) from_bot: bool,
    pub(crate) author_id: u64,
    pub(crate) content: String,
    pub(crate) mentions_bot: bool,
    pub(crate) edits: usize,
    pub(crate) deleted: bool,
    pub(crate) nonce: Option<String>,
    pub(crate) reference: Option<u64>,
    pub(crate) allowed_mentions: Option<Value>,
    pub(crate) attachments: Vec<String>,
    /// The thread started from this message.
    pub(crate) thread: Option<u64>,
    /// Reactions the bot added (emoji as given in the path).
    pub(crate) reactions: Vec<String>,
}

/// A channel (text channel, DM or thread) the fake knows.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub(crate) spec: ChannelSpec,
    /// The other party of a DM.
    pub(crate) recipient: Option<UserSpec>,
    pub(crate) thread: Option<ThreadMeta>,
    pub(crate) messages: BTreeMap<u64, Stored>,
    pub(crate) typing: usize,
}

impl Channel {
    /// The Discord `Channel` object.
    pub(crate) fn json(&self) -> Value {
        let recipient = self.recipient.as_ref().map(UserSpec::to_json);
        let last = self.messages.keys().next_back().copied();
        json::channel(&self.spec, recipient.as_ref(), self.thread.as_ref(), last)
    }

    /// The live (not deleted) message `id`.
    pub(crate) fn live(&self, id: u64) -> Option<&Stored> {
        self.messages.get(&id).filter(|m| !m.deleted)
    }
}

/// A gateway session: what READY started, every dispatch since (for RESUME) and the
/// connection it is bound to. One per shard.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    /// The shard it serves: `[id, num_shards]` from IDENTIFY (`[0, 1]` without one).
    pub(crate) shard: [u32; 2],
    pub(crate) seq: u64,
    /// Every dispatch payload (`op`, `t`, `s`, `d`) in sequence order.
    pub(crate) log: Vec<Value>,
    pub(crate) intents: u64,
    /// The connection that identified or last resumed; `None` while disconnected.
    pub(crate) conn: Option<u64>,
}

/// What a test asked an open connection to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kick {
    /// Drop the socket without a close frame.
    Drop,
    /// Send op 9 with `d: false`.
    InvalidSession,
    /// Send op 7 (reconnect).
    Reconnect,
    /// Send a close frame with this code, then drop.
    Close(u16),
}

/// Who may see a dispatch, by the session's intents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Everyone.
    Always,
    /// Sessions with this intent.
    Intent(u64),
    /// A message event: `GUILD_MESSAGES` or `DIRECT_MESSAGES`; without `MESSAGE_CONTENT`
    /// the content, embeds, attachments and components are emptied unless `content_visible`.
    Message { guild: bool, content_visible: bool },
}

/// A guild the fake knows.
#[derive(Debug, Clone)]
pub(crate) struct Guild {
    pub(crate) name: String,
}

/// Everything behind the mutex.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) calls: Vec<RecordedCall>,
    pub(crate) guilds: BTreeMap<u64, Guild>,
    pub(crate) channels: BTreeMap<u64, Channel>,
    pub(crate) users: BTreeMap<u64, UserSpec>,
    last_id: u64,
    /// The live sessions, by shard (`[id, num_shards]`): a guild's events go to the session
    /// of its shard (`(guild_id >> 22) % num_shards`), DMs to shard 0's; clients of another
    /// `num_shards` have sessions of their own (each gets the events its shard serves).
    pub(crate) sessions: BTreeMap<[u32; 2], Session>,
    /// The `shards` `GET /gateway/bot` recommends (1 unless a test sets it).
    pub(crate) recommended_shards: u32,
    sessions_made: u64,
    pub(crate) identify_count: usize,
    pub(crate) resume_count: usize,
    pub(crate) heartbeat_count: usize,
    /// The intents of the last IDENTIFY.
    pub(crate) intents: Option<u64>,
    /// Bytes served at attachment URLs, by path (`/attachments/{channel}/{id}/{name}`).
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    /// Every payload clients sent over the gateway, in order.
    pub(crate) received: Vec<Value>,
    /// Open gateway connections.
    pub(crate) open: BTreeSet<u64>,
    next_conn: u64,
    pub(crate) kicks: HashMap<u64, Kick>,
    /// Application commands by guild (`None`: global), in order.
    pub(crate) commands: BTreeMap<Option<u64>, Vec<Value>>,
    /// Interaction callbacks: `{"interaction_id", "token", "body"}`.
    pub(crate) interaction_callbacks: Vec<Value>,
    /// Interactions dispatched to the bot, by id.
    pub(crate) interactions: BTreeMap<u64, super::interactions::Interaction>,
    pub(crate) limiter: Limiter,
    pub(crate) heartbeat_interval_ms: u64,
    /// Whether IDENTIFY may ask for `GUILD_MEMBERS` and `GUILD_PRESENCES`.
    pub(crate) privileged_allowed: bool,
    /// `ws://127.0.0.1:PORT/gateway`, READY's `resume_gateway_url`.
    pub(crate) gateway_url: String,
    /// Role ids of guild members, by (guild, user); unknown members have none.
    pub(crate) member_roles: HashMap<(u64, u64), Vec<u64>>,
    /// Placeholder texts and the raw JSON string content that replaces them in gateway
    /// frames (see `FakeDiscord::user_sends_raw`).
    pub(crate) raw_texts: Vec<(String, String)>,
    /// While set, users' messages are kept (in history) but dispatched only right after the
    /// next READY (see `FakeDiscord::hold_messages_until_ready`).
    pub(crate) hold_for_ready: bool,
    /// Messages (channel, id) to dispatch right after the next READY.
    pub(crate) after_ready: Vec<(u64, u64)>,
}

impl State {
    fn new(gateway_url: String) -> State {
        State {
            gateway_url,
            member_roles: HashMap::new(),
            raw_texts: Vec::new(),
            hold_for_ready: false,
            after_ready: Vec::new(),
            calls: Vec::new(),
            guilds: BTreeMap::new(),
            channels: BTreeMap::new(),
            users: BTreeMap::new(),
            last_id: 0,
            sessions: BTreeMap::new(),
            recommended_shards: 1,
            sessions_made: 0,
            identify_count: 0,
            resume_count: 0,
            heartbeat_count: 0,
            intents: None,
            files: BTreeMap::new(),
            received: Vec::new(),
            open: BTreeSet::new(),
            next_conn: 1,
            kicks: HashMap::new(),
            commands: BTreeMap::new(),
            interaction_callbacks: Vec::new(),
            interactions: BTreeMap::new(),
            limiter: Limiter::default(),
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            privileged_allowed: false,
        }
    }

    /// A new snowflake, greater than every one handed out before.
    pub(crate) fn next_id(&mut self) -> u64 {
        self.last_id = json::next_snowflake(self.last_id);
        self.last_id
    }

    /// Remembers `id` so that generated snowflakes never collide with test-chosen ones.
    fn reserve(&mut self, id: u64) {
        // Test ids are usually small; only ids in the generated range need to be skipped.
        if id > self.last_id && id >> 22 > 0 && id < json::next_snowflake(0) {
            self.last_id = id;
        }
    }

    /// A new connection id, registered as open.
    pub(crate) fn open_connection(&mut self) -> u64 {
        let id = self.next_conn;
        self.next_conn += 1;
        self.open.insert(id);
        id
    }

    /// Forgets connection `id`; its session (if bound to it) waits for a RESUME.
    pub(crate) fn close_connection(&mut self, id: u64) {
        self.open.remove(&id);
        self.kicks.remove(&id);
        for session in self.sessions.values_mut() {
            if session.conn == Some(id) {
                session.conn = None;
            }
        }
    }

    /// Starts a new session for connection `conn` with `intents` on `shard` (`[id, total]`,
    /// `[0, 1]` when IDENTIFY named none), replacing that shard's session: READY, then
    /// GUILD_CREATE for every known guild of the shard (with `GUILDS`); returns its id.
    pub(crate) fn start_session(
        &mut self,
        conn: u64,
        intents: u64,
        shard: Option<Value>,
    ) -> String {
        self.sessions_made += 1;
        let id = format!("{:016x}{:016x}", json::now_ms(), self.sessions_made);
        let pair = super::shards::pair_of(shard.as_ref());
        self.sessions.insert(
            pair,
            Session {
                id: id.clone(),
                shard: pair,
                seq: 0,
                log: Vec::new(),
                intents,
                conn: Some(conn),
            },
        );
        let guilds: Vec<Value> = self
            .guilds
            .keys()
            .filter(|g| super::shards::serves(pair, Some(**g)))
            .map(|g| json!({ "id": g.to_string(), "unavailable": true }))
            .collect();
        let mut ready = json!({
            "v": 10,
            "user": json::current_user(),
            "guilds": guilds,
            "session_id": id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": { "id": json::APPLICATION_ID.to_string(), "flags": json::APPLICATION_FLAGS },
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "user_settings": {},
            "geo_ordered_rtc_regions": [],
            "_trace": ["[\"fake-discord\"]"],
        });
        if let Some(shard) = shard {
            ready["shard"] = shard;
        }
        self.dispatch_to(pair, "READY", ready, Gate::Always);
        let ids: Vec<u64> = self.guilds.keys().copied().collect();
        for guild in ids {
            if super::shards::serves(pair, Some(guild)) {
                self.dispatch_guild_create(guild);
            }
        }
        self.hold_for_ready = false;
        let held = std::mem::take(&mut self.after_ready);
        let mut mine = Vec::new();
        for (channel, message) in held {
            if super::shards::serves(pair, self.guild_of(channel)) {
                mine.push((channel, message));
            } else {
                self.after_ready.push((channel, message));
            }
        }
        for (channel, message) in mine {
            self.dispatch_message("MESSAGE_CREATE", channel, message);
        }
        id
    }

    /// The guild of channel `id`, if it is a guild's.
    pub(crate) fn guild_of(&self, id: u64) -> Option<u64> {
        self.channels.get(&id).and_then(|c| c.spec.guild_id)
    }

    /// Appends a dispatch to the log of the session of the shard it belongs to (the guild's
    /// in `guild_id`, or `id` for GUILD_CREATE; shard 0 without a guild) if there is one and
    /// `gate` lets it through; returns its sequence number.
    pub(crate) fn dispatch(&mut self, kind: &str, data: Value, gate: Gate) -> Option<u64> {
        let field = if kind == "GUILD_CREATE" {
            "id"
        } else {
            "guild_id"
        };
        let guild = data
            .get(field)
            .and_then(Value::as_str)
            .and_then(|g| g.parse::<u64>().ok());
        let shards: Vec<[u32; 2]> = self
            .sessions
            .keys()
            .filter(|shard| super::shards::serves(**shard, guild))
            .copied()
            .collect();
        shards
            .into_iter()
            .filter_map(|shard| self.dispatch_to(shard, kind, data.clone(), gate))
            .reduce(|first, _| first)
    }

    /// Appends a dispatch to the log of shard `shard`'s session if there is one and `gate`
    /// lets it through; returns its sequence number.
    fn dispatch_to(
        &mut self,
        shard: [u32; 2],
        kind: &str,
        mut data: Value,
        gate: Gate,
    ) -> Option<u64> {
        let session = self.sessions.get_mut(&shard)?;
        let has = |intent: u64| session.intents & intent == intent;
        match gate {
            Gate::Always => {}
            Gate::Intent(intent) => {
                if !has(intent) {
                    return None;
                }
            }
            Gate::Message {
                guild,
                content_visible,
            } => {
                let needed = if guild {
                    INTENT_GUILD_MESSAGES
                } else {
                    INTENT_DIRECT_MESSAGES
                };
                if !has(needed) {
                    return None;
                }
                if !content_visible && !has(INTENT_MESSAGE_CONTENT) {
                    for (field, empty) in [
                        ("content", json!("")),
                        ("embeds", json!([])),
                        ("attachments", json!([])),
                        ("components", json!([])),
                    ] {
                        if data.get(field).is_some() {
                            data[field] = empty;
                        }
                    }
                }
            }
        }
        session.seq += 1;
        let seq = session.seq;
        session
            .log
            .push(json!({ "op": 0, "t": kind, "s": seq, "d": data }));
        Some(seq)
    }

    /// Dispatches a message event (`MESSAGE_CREATE`/`MESSAGE_UPDATE`) of `stored` in
    /// `channel`, adding `guild_id` and (for `MESSAGE_CREATE`) `member` in guilds.
    pub(crate) fn dispatch_message(&mut self, kind: &str, channel: u64, message: u64) {
        let Some(ch) = self.channels.get(&channel) else {
            return;
        };
        let Some(stored) = ch.messages.get(&message) else {
            return;
        };
        let mut data = stored.json.clone();
        let guild = ch.spec.guild_id;
        if let Some(guild) = guild {
            data["guild_id"] = json!(guild.to_string());
            if kind == "MESSAGE_CREATE" {
                data["member"] = json::member();
            }
        }
        let gate = Gate::Message {
            guild: guild.is_some(),
            content_visible: guild.is_none() || stored.mentions_bot || stored.from_bot,
        };
        self.dispatch(kind, data, gate);
    }

    /// Dispatches `GUILD_CREATE` for `guild` (needs `GUILDS`).
    pub(crate) fn dispatch_guild_create(&mut self, guild: u64) {
        let Some(info) = self.guilds.get(&guild) else {
            return;
        };
        let in_guild = |c: &&Channel| c.spec.guild_id == Some(guild);
        let channels = self
            .channels
            .values()
            .filter(in_guild)
            .filter(|c| !c.spec.kind.is_thread())
            .map(Channel::json)
            .collect();
        let threads = self
            .channels
            .values()
            .filter(in_guild)
            .filter(|c| c.spec.kind.is_thread())
            .map(Channel::json)
            .collect();
        let data = json::guild(guild, &info.name, channels, threads);
        self.dispatch("GUILD_CREATE", data, Gate::Intent(INTENT_GUILDS));
    }

    /// Registers guild `id` (named `name`, else `guild <id>`); a new guild is announced with
    /// `GUILD_CREATE`, a known one is renamed only if `name` is given.
    pub(crate) fn upsert_guild(&mut self, id: u64, name: Option<&str>) {
        self.reserve(id);
        match self.guilds.get_mut(&id) {
            Some(guild) => {
                if let Some(name) = name {
                    guild.name = name.to_owned();
                }
            }
            None => {
                let name = name.map_or_else(|| format!("guild {id}"), str::to_owned);
                self.guilds.insert(id, Guild { name });
                self.dispatch_guild_create(id);
            }
        }
    }

    /// Makes `spec` known with its guild and (for threads) parent; a thread new to the fake
    /// gets `ThreadMeta` with `owner` and is announced with `THREAD_CREATE`.
    pub(crate) fn ensure_channel(&mut self, spec: &ChannelSpec, owner: u64) {
        self.reserve(spec.id);
        if let Some(guild) = spec.guild_id {
            self.upsert_guild(guild, None);
        }
        if let (Some(guild), Some(parent)) = (spec.guild_id, spec.parent_id)
            && !self.channels.contains_key(&parent)
        {
            self.ensure_channel(&ChannelSpec::guild_text(guild, parent), owner);
        }
        if let Some(known) = self.channels.get_mut(&spec.id) {
            if spec.name.is_some() {
                known.spec.name.clone_from(&spec.name);
            }
            return;
        }
        let thread = spec.kind.is_thread().then(|| ThreadMeta {
            owner_id: owner,
            starter_message_id: None,
            archived: false,
            locked: false,
            auto_archive_duration: 1440,
            created: iso_now(),
            message_count: 0,
        });
        self.channels.insert(
            spec.id,
            Channel {
                spec: spec.clone(),
                recipient: None,
                thread,
                messages: BTreeMap::new(),
                typing: 0,
            },
        );
        if spec.kind.is_thread() {
            self.dispatch_thread_create(spec.id);
        }
    }

    /// Dispatches `THREAD_CREATE` (with `newly_created`) for thread `id` (needs `GUILDS`).
    pub(crate) fn dispatch_thread_create(&mut self, id: u64) {
        if let Some(channel) = self.channels.get(&id) {
            let mut data = channel.json();
            data["newly_created"] = json!(true);
            self.dispatch("THREAD_CREATE", data, Gate::Intent(INTENT_GUILDS));
        }
    }

    /// Remembers `user` (for mentions and DMs).
    pub(crate) fn remember_user(&mut self, user: &UserSpec) {
        self.users.insert(user.id, user.clone());
    }

    /// The DM channel with `user`, created (with a new id) if there is none.
    pub(crate) fn dm_with(&mut self, user: &UserSpec) -> u64 {
        let existing = self
            .channels
            .values()
            .find(|c| {
                c.spec.kind == ChannelKind::Dm
                    && c.recipient.as_ref().is_some_and(|r| r.id == user.id)
            })
            .map(|c| c.spec.id);
        if let Some(id) = existing {
            return id;
        }
        let id = self.next_id();
        self.ensure_channel(&ChannelSpec::dm(id), user.id);
        if let Some(channel) = self.channels.get_mut(&id) {
            channel.recipient = Some(user.clone());
        }
        id
    }

    /// The users `<@id>` / `<@!id>` in `content` names that the fake knows (the bot included).
    pub(crate) fn mentioned_in(&self, content: &str) -> Vec<u64> {
        let mut found = Vec::new();
        let mut rest = content;
        while let Some(start) = rest.find("<@") {
            rest = &rest[start + 2..];
            let inner = rest.strip_prefix('!').unwrap_or(rest);
            let Some(end) = inner.find('>') else {
                break;
            };
            if let Ok(id) = inner[..end].parse::<u64>()
                && (id == BOT_ID || self.users.contains_key(&id))
                && !found.contains(&id)
            {
                found.push(id);
            }
        }
        found
    }

    /// The `User` JSON of a known user or the bot.
    pub(crate) fn user_json(&self, id: u64) -> Option<Value> {
        if id == BOT_ID {
            return Some(json::bot_user());
        }
        self.users.get(&id).map(UserSpec::to_json)
    }
}

/// State shared by the handlers, the gateway connections and the
/// [`FakeDiscord`](super::FakeDiscord) handle.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Notified on every change, for `wait_for`.
    pub(crate) changed: Notify,
    /// Bumped on every change, for gateway connections.
    pub(crate) gateway: watch::Sender<u64>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base_url: String,
    /// While true, message deletes are recorded but not answered (see
    /// `FakeDiscord::hold_deletes`).
    pub(crate) hold_deletes: watch::Sender<bool>,
    /// While true, message creates are carried out but not answered (see
    /// `FakeDiscord::hold_creates`).
    pub(crate) hold_creates: watch::Sender<bool>,
}

impl Shared {
    /// Empty state for a server at `base_url`; connections end when `shutdown` turns true.
    pub(crate) fn new(base_url: String, shutdown: watch::Receiver<bool>) -> Shared {
        let gateway_url = format!("{}/gateway", base_url.replacen("http://", "ws://", 1));
        Shared {
            state: Mutex::new(State::new(gateway_url)),
            changed: Notify::new(),
            gateway: watch::Sender::new(0),
            shutdown,
            base_url,
            hold_deletes: watch::Sender::new(false),
            hold_creates: watch::Sender::new(false),
        }
    }

    /// Locks the state (a poisoned lock is used anyway).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes everyone waiting for a change: tests and gateway connections.
    pub(crate) fn touch(&self) {
        self.changed.notify_waiters();
        self.gateway.send_modify(|n| *n = n.wrapping_add(1));
    }
}
