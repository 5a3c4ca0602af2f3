//! What the Discord channel remembers: the bot's id, where each channel sits (plain channel
//! or thread under a parent, and its guild), and the allowlists. Bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serenity::http::Http;
use serenity::model::channel::{Channel as DiscordChannelKind, ChannelType, GuildChannel};
use serenity::model::id::{ChannelId, GuildId, UserId};
use tokio::sync::watch;

use crate::normalize::Place;
pub use crate::shard::READY_WAIT;
use crate::shard::Shard;

/// Channels remembered before the map is cleared.
const MAX_PLACES: usize = 10_000;

/// Shared state of the Discord channel.
pub struct State {
    bot: watch::Sender<Option<UserId>>,
    /// The last message taken per channel.
    seen: crate::seen::Seen,
    /// The guild of each channel with a cursor.
    channel_guilds: crate::guilds::Guilds,
    places: Mutex<HashMap<u64, (Place, Option<u64>)>>,
    /// The bot's roles per guild (for role mentions), looked up once.
    bot_roles: Mutex<HashMap<u64, Vec<u64>>>,
    account: String,
    guilds: Vec<u64>,
    channels: Vec<u64>,
    http: std::sync::Arc<Http>,
    /// The shards this process runs now.
    shards: Mutex<Vec<Arc<Shard>>>,
}

impl State {
    /// New state for `account` with guild and channel allowlists (empty: all).
    pub fn new(
        account: String,
        guilds: Vec<u64>,
        channels: Vec<u64>,
        http: std::sync::Arc<Http>,
    ) -> Self {
        State {
            bot: watch::channel(None).0,
            seen: crate::seen::Seen::new(&account),
            channel_guilds: crate::guilds::Guilds::new(&account),
            places: Mutex::new(HashMap::new()),
            bot_roles: Mutex::new(HashMap::new()),
            account,
            guilds,
            channels,
            http,
            shards: Mutex::new(Vec::new()),
        }
    }

    /// Notes that `shard` runs here until [`State::stopped`].
    pub fn running(&self, shard: Arc<Shard>) {
        if let Ok(mut shards) = self.shards.lock() {
            shards.retain(|s| s.id() != shard.id());
            shards.push(shard);
        }
    }

    /// Notes that shard `id` no longer runs here.
    pub fn stopped(&self, id: u32) {
        if let Ok(mut shards) = self.shards.lock() {
            shards.retain(|s| s.id() != id);
        }
    }

    /// Whether the gateway connection is up: some shard runs here and every shard that does
    /// is connected.
    pub fn connected(&self) -> bool {
        self.shards
            .lock()
            .is_ok_and(|s| !s.is_empty() && s.iter().all(|shard| shard.connected()))
    }

    /// Records the bot's user id.
    pub fn set_bot(&self, id: UserId) {
        self.bot.send_replace(Some(id));
    }

    /// The bot's user id, waiting for it (at most [`READY_WAIT`]): a message can reach the
    /// handler before READY's handler has set it.
    pub async fn wait_bot(&self) -> Option<UserId> {
        let mut rx = self.bot.subscribe();
        let found = tokio::time::timeout(READY_WAIT, rx.wait_for(Option::is_some)).await;
        found.ok().and_then(|r| r.ok().and_then(|id| *id))
    }

    /// The last message taken per channel.
    pub fn seen(&self) -> &crate::seen::Seen {
        &self.seen
    }

    /// The guild of each channel with a cursor.
    pub fn channel_guilds(&self) -> &crate::guilds::Guilds {
        &self.channel_guilds
    }

    /// Saves the moved cursors and the guilds of new channels.
    pub async fn save_cursors(&self, sink: &dyn chela_channel::InboundSink) {
        self.channel_guilds.save(sink).await;
        self.seen.save(sink).await;
    }

    /// Saves a new channel's guild and first cursor now, beside a save under way (the
    /// catch-up after a restart knows the channel from them); the other moved cursors are
    /// left to the periodic save.
    pub async fn save_first_cursor(&self, sink: &dyn chela_channel::InboundSink, channel: u64) {
        self.channel_guilds.save_one(sink, channel).await;
        self.seen.save_one(sink, channel).await;
    }

    /// The configured channel allowlist (caught up after a restart).
    pub fn configured_channels(&self) -> &[u64] {
        &self.channels
    }

    /// The bot's role ids in `guild`, asked once over REST (empty when that fails).
    pub async fn bot_roles(&self, guild: u64, bot: UserId) -> Vec<u64> {
        if let Some(roles) = self
            .bot_roles
            .lock()
            .ok()
            .and_then(|r| r.get(&guild).cloned())
        {
            return roles;
        }
        let roles: Vec<u64> = match self.http.get_member(GuildId::new(guild), bot).await {
            Ok(member) => member.roles.iter().map(|r| r.get()).collect(),
            Err(e) => {
                tracing::debug!(error = %e, "discord: cannot look up the bot's roles");
                Vec::new()
            }
        };
        if let Ok(mut cache) = self.bot_roles.lock() {
            if cache.len() >= MAX_PLACES {
                cache.clear();
            }
            cache.insert(guild, roles.clone());
        }
        roles
    }

    /// Account id in session keys.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// Whether messages from `guild` are taken.
    pub fn guild_allowed(&self, guild: u64) -> bool {
        self.guilds.is_empty() || self.guilds.contains(&guild)
    }

    /// Whether messages from channel `chat` (a thread's parent for threads) are taken.
    pub fn channel_allowed(&self, chat: u64) -> bool {
        self.channels.is_empty() || self.channels.contains(&chat)
    }

    /// Remembers where `channel` sits.
    pub fn remember(&self, channel: u64, place: Place, guild: Option<u64>) {
        if let Ok(mut places) = self.places.lock() {
            if places.len() >= MAX_PLACES {
                places.clear();
            }
            places.insert(channel, (place, guild));
        }
    }

    /// The guild of a channel seen before.
    pub fn guild_of(&self, channel: u64) -> Option<u64> {
        self.places
            .lock()
            .ok()?
            .get(&channel)
            .and_then(|(_, guild)| *guild)
    }

    /// Where a guild channel sits: asked once over REST, then remembered.
    pub async fn place(&self, channel: ChannelId, guild: u64) -> Place {
        let known = self
            .places
            .lock()
            .ok()
            .and_then(|p| p.get(&channel.get()).map(|(place, _)| *place));
        if let Some(place) = known {
            return place;
        }
        let place = match self.http.get_channel(channel).await {
            Ok(DiscordChannelKind::Guild(c)) => place_of(&c),
            Ok(_) => Place::Channel,
            Err(e) => {
                tracing::debug!(error = %e, "discord: cannot look up a channel; taking it as a plain channel");
                Place::Channel
            }
        };
        self.remember(channel.get(), place, Some(guild));
        place
    }
}

/// Where a guild channel sits: a thread under its parent, or a plain channel.
pub fn place_of(c: &GuildChannel) -> Place {
    match c.kind {
        ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread => c
            .parent_id
            .map_or(Place::Channel, |p| Place::Thread(p.get())),
        _ => Place::Channel,
    }
}

impl State {
    /// Saves moved channel cursors every [`SAVE_EVERY`](crate::seen::SAVE_EVERY) until
    /// `shutdown`, then once more.
    pub async fn keep_saving_cursors(
        state: std::sync::Arc<State>,
        sink: std::sync::Arc<dyn chela_channel::InboundSink>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(crate::seen::SAVE_EVERY) => {}
            }
            state.save_cursors(sink.as_ref()).await;
        }
        state.save_cursors(sink.as_ref()).await;
    }
}
