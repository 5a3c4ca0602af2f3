//! What the Discord channel remembers: the bot's id, where each channel sits (plain channel
//! or thread under a parent, and its guild), and the allowlists. Bounded.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serenity::http::Http;
use serenity::model::channel::{Channel as DiscordChannelKind, ChannelType};
use serenity::model::id::{ChannelId, GuildId, UserId};

use crate::normalize::Place;

/// Channels remembered before the map is cleared.
const MAX_PLACES: usize = 10_000;

/// Shared state of the Discord channel.
pub struct State {
    bot: OnceLock<UserId>,
    /// Id of the first message the current collector saw: later ones are its to hand on.
    first_collected: Mutex<Option<u64>>,
    places: Mutex<HashMap<u64, (Place, Option<u64>)>>,
    /// The bot's roles per guild (for role mentions), looked up once.
    bot_roles: Mutex<HashMap<u64, Vec<u64>>>,
    account: String,
    guilds: Vec<u64>,
    channels: Vec<u64>,
    http: std::sync::Arc<Http>,
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
            bot: OnceLock::new(),
            first_collected: Mutex::new(None),
            places: Mutex::new(HashMap::new()),
            bot_roles: Mutex::new(HashMap::new()),
            account,
            guilds,
            channels,
            http,
        }
    }

    /// The bot's user id, once READY arrived.
    pub fn bot(&self) -> Option<UserId> {
        self.bot.get().copied()
    }

    /// Records the bot's user id.
    pub fn set_bot(&self, id: UserId) {
        let _ = self.bot.set(id);
    }

    /// A new collector is about to be registered: until it sees a message, the handler
    /// hands messages on itself.
    pub fn reset_collected(&self) {
        if let Ok(mut first) = self.first_collected.lock() {
            *first = None;
        }
    }

    /// Called by the collector (in gateway order) for every message it sees.
    pub fn note_collected(&self, id: u64) {
        if let Ok(mut first) = self.first_collected.lock() {
            first.get_or_insert(id);
        }
    }

    /// Whether the collector took (or will take) message `id`. Snowflakes grow with time, and
    /// the collector sees a message before its handler call is spawned.
    pub fn collected(&self, id: u64) -> bool {
        self.first_collected
            .lock()
            .ok()
            .and_then(|f| *f)
            .is_some_and(|first| id >= first)
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
            Ok(DiscordChannelKind::Guild(c))
                if matches!(
                    c.kind,
                    ChannelType::PublicThread
                        | ChannelType::PrivateThread
                        | ChannelType::NewsThread
                ) =>
            {
                c.parent_id
                    .map_or(Place::Channel, |p| Place::Thread(p.get()))
            }
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
