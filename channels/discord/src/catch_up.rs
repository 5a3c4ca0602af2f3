//! The catch-up on history after READY and RESUME: what was posted while chela was down or
//! reconnecting never reaches it through the gateway (a new session does not replay), so each
//! channel worth reading is asked for its messages after the last one taken and those go
//! through the same intake as live ones (dedupe drops what was taken already).
//!
//! Read: the configured channel allowlist (`channels.discord.channels`) and every channel,
//! thread or DM chela took a message from before (it has a cursor, see [`crate::seen`]); each
//! shard keeps the channels of its guilds (DMs: shard 0), as its READY or RESUME says only it
//! is back, and of those reads at most [`MAX_CHANNELS`]: the configured ones first, then its
//! own known ones, the most recently active first, then those whose guild is not known yet.
//! Where a channel sits is known without asking Discord (kept beside its cursor, see
//! [`crate::guilds`]); a channel whose place is not known yet is looked up once. Bounded: one
//! page of [`PER_CHANNEL`] messages per channel, none older than [`WINDOW`]. A DM from
//! someone chela never heard from cannot be found (Discord has no list of a bot's DMs). Live
//! messages wait (bounded) until the catch-up is done, so a conversation's older messages go
//! first.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use serenity::builder::GetMessages;
use serenity::http::Http;
use serenity::model::channel::{Channel as DiscordChannelKind, Message};
use serenity::model::id::{ChannelId, GuildId, MessageId};

use crate::guilds::Guild;
use crate::intake::Intake;
use crate::shard::Shard;
use crate::state::{State, place_of};

/// How far back the catch-up reads.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Messages read per channel at most (one page).
pub const PER_CHANNEL: u8 = 100;
/// Channels read at most by one shard.
pub const MAX_CHANNELS: usize = 500;
/// Channels read at the same time.
const CONCURRENCY: usize = 4;
/// Discord's epoch (2015-01-01), in ms since the Unix epoch.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// The smallest snowflake of instant `ms` (ms since the Unix epoch).
pub fn snowflake_at(ms: u64) -> u64 {
    ms.saturating_sub(DISCORD_EPOCH_MS) << 22
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Reads every channel worth reading and takes what it finds; ends the catch-up that the
/// caller began with [`State::begin_catch_up`].
pub async fn catch_up(intake: Intake, http: Arc<Http>, _end: EndCatchUp) {
    let state = intake.state.clone();
    let channels = to_read(&state, &intake.shard, intake.sink.as_ref()).await;
    let floor = snowflake_at(now_ms().saturating_sub(WINDOW.as_millis() as u64));
    let count = channels.len();
    let mut pages = futures_util::stream::iter(channels)
        .map(|channel| {
            let (http, state, shard) = (http.clone(), state.clone(), intake.shard.clone());
            async move { read(&http, &state, &shard, channel, floor).await }
        })
        .buffer_unordered(CONCURRENCY);
    let mut read_count = 0usize;
    while let Some(messages) = pages.next().await {
        for message in messages {
            read_count += 1;
            intake.take_now(message).await;
        }
    }
    tracing::info!(
        channels = count,
        messages = read_count,
        shard = intake.shard.id(),
        "discord caught up on history"
    );
}

/// Ends a catch-up when dropped: made right after [`State::begin_catch_up`] and moved into
/// the task, so the catch-up ends however the task does (a panic, an abort, or a drop before
/// it ever ran) and live messages never wait on one that is gone.
pub struct EndCatchUp(pub Arc<Shard>);

impl Drop for EndCatchUp {
    fn drop(&mut self) {
        self.0.end_catch_up();
    }
}

/// A channel to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ToRead {
    channel: u64,
    /// The last message taken in it (0: none).
    last: u64,
    /// Where it sits, when known (`Some(None)`: a DM).
    guild: Option<Guild>,
}

/// The channels `shard` reads, at most [`MAX_CHANNELS`]: first the configured ones, whether
/// their guild is known or not (one not known yet is looked up by [`read`], which keeps it
/// only when it is this shard's); then its own known channels with a cursor, the most
/// recently active first; then those whose guild is not known yet (to be looked up: right
/// after an upgrade, mostly other shards'), so these never crowd its own out of the cap.
/// Another shard's known channels are left out (without a look-up).
async fn to_read(
    state: &State,
    shard: &Shard,
    sink: &dyn chela_channel::InboundSink,
) -> Vec<ToRead> {
    state.channel_guilds().load(sink).await;
    let known = state.seen().load(sink).await;
    let configured = state
        .configured_channels()
        .iter()
        .map(|c| (*c, state.seen().last(*c).unwrap_or(0)));
    let mut listed = HashSet::new();
    let (mut first, mut unknown) = (Vec::new(), Vec::new());
    for (channel, last) in configured {
        if first.len() < MAX_CHANNELS && listed.insert(channel) {
            let to_read = to_read_of(state, channel, last);
            if to_read.guild.is_none_or(|guild| shard.owns(guild)) {
                first.push(to_read);
            }
        }
    }
    for (channel, last) in known {
        if first.len() >= MAX_CHANNELS {
            break;
        }
        if !listed.insert(channel) {
            continue;
        }
        let to_read = to_read_of(state, channel, last);
        match to_read.guild {
            Some(guild) if shard.owns(guild) => first.push(to_read),
            Some(_) => {}
            None => unknown.push(to_read),
        }
    }
    first.extend(unknown);
    first.truncate(MAX_CHANNELS);
    first
}

/// `channel` to read after message `last`, with its guild when known.
fn to_read_of(state: &State, channel: u64, last: u64) -> ToRead {
    let guild = state
        .channel_guilds()
        .of(channel)
        .or_else(|| state.guild_of(channel).map(Some));
    ToRead {
        channel,
        last,
        guild,
    }
}

/// Where `channel` sits, asked once over REST and remembered; `None` when it cannot be
/// asked.
async fn look_up(http: &Http, state: &State, channel: u64) -> Option<Guild> {
    let guild = match http.get_channel(ChannelId::new(channel.max(1))).await {
        Ok(DiscordChannelKind::Guild(c)) => {
            state.remember(channel, place_of(&c), Some(c.guild_id.get()));
            Some(c.guild_id.get())
        }
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, channel, "discord: cannot look up a channel to catch up");
            return None;
        }
    };
    state.channel_guilds().note(channel, guild);
    Some(guild)
}

/// The messages of `channel` after its last one (none older than `floor`), oldest first,
/// with their guild set (history messages come without it); nothing when the channel cannot
/// be read or is another shard's.
async fn read(
    http: &Http,
    state: &State,
    shard: &Shard,
    channel: ToRead,
    floor: u64,
) -> Vec<Message> {
    let guild = match channel.guild {
        Some(guild) => guild,
        None => match look_up(http, state, channel.channel).await {
            Some(guild) => guild,
            None => return Vec::new(),
        },
    };
    if !shard.owns(guild) {
        return Vec::new();
    }
    let (id, after) = (
        ChannelId::new(channel.channel.max(1)),
        channel.last.max(floor),
    );
    let page = GetMessages::new()
        .after(MessageId::new(after.max(1)))
        .limit(PER_CHANNEL);
    let mut messages = match id.messages(http, page).await {
        Ok(messages) => messages,
        Err(e) => {
            tracing::warn!(error = %e, channel = channel.channel, "discord: cannot read a channel's history");
            return Vec::new();
        }
    };
    messages.sort_by_key(|m| m.id);
    for message in &mut messages {
        message.guild_id = guild.map(GuildId::new);
    }
    messages
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::record::test_sink::Cursors;

    /// A guild of shard 0 and one of shard 1 (of 2).
    const EVEN: u64 = 1_000 << 22;
    const ODD: u64 = 1_001 << 22;

    /// Cursors of: a DM, the most recently active; 600 channels of the even guild; 5 of the
    /// odd guild; a channel whose guild was never recorded (an older chela's cursor).
    fn cursors() -> Cursors {
        let sink = Cursors::default();
        let mut saved = sink.0.lock().unwrap();
        let mut add = |channel: u64, last: i64, guild: Option<u64>| {
            saved.insert(format!("discord:default:last:{channel}"), last);
            if let Some(guild) = guild {
                saved.insert(format!("discord:default:guild:{channel}"), guild as i64);
            }
        };
        for c in 0..600 {
            add(10_000 + c, 1_000_000 + c as i64, Some(EVEN));
        }
        for c in 0..5 {
            add(20_000 + c, 1_000 + c as i64, Some(ODD));
        }
        add(30_000, 2_000_000, Some(0));
        add(40_000, 10, None);
        drop(saved);
        sink
    }

    fn state() -> State {
        let http = Arc::new(Http::new("token"));
        State::new("default".into(), vec![], vec![], http)
    }

    #[tokio::test]
    async fn a_shard_keeps_its_own_channels_before_the_cap_and_no_dm_but_shard_zero() {
        let sink = cursors();
        let odd = to_read(&state(), &Shard::new(1, 2), &sink).await;
        let mut channels: Vec<u64> = odd.iter().map(|c| c.channel).collect();
        channels.sort_unstable();
        assert_eq!(
            channels,
            [20_000, 20_001, 20_002, 20_003, 20_004, 40_000],
            "its 5 channels (behind 600 more recent ones of the other shard), the unknown one \
             (looked up), not the DM"
        );
        assert!(
            odd.iter()
                .filter(|c| c.channel != 40_000)
                .all(|c| c.guild == Some(Some(ODD))),
            "known without a look-up: {odd:?}"
        );
        let even = to_read(&state(), &Shard::new(0, 2), &sink).await;
        assert_eq!(even.len(), MAX_CHANNELS, "capped");
        assert!(
            even.iter()
                .all(|c| c.channel < 20_000 || c.channel == 30_000)
        );
        assert!(
            even.iter()
                .any(|c| c.channel == 30_000 && c.guild == Some(None)),
            "the DM is shard 0's, known as one"
        );
    }

    #[tokio::test]
    async fn channels_of_unknown_guild_do_not_crowd_a_shards_own_out_of_the_cap() {
        // Right after an upgrade: 600 channels more recently active whose guild was never
        // recorded (most of them another shard's), and 5 known ones of the odd guild.
        let sink = Cursors::default();
        {
            let mut saved = sink.0.lock().unwrap();
            for c in 0..600 {
                saved.insert(
                    format!("discord:default:last:{}", 50_000 + c),
                    2_000_000 + c,
                );
            }
            for c in 0..5 {
                saved.insert(format!("discord:default:last:{}", 20_000 + c), 1_000 + c);
                saved.insert(format!("discord:default:guild:{}", 20_000 + c), ODD as i64);
            }
        }
        let odd = to_read(&state(), &Shard::new(1, 2), &sink).await;
        assert_eq!(odd.len(), MAX_CHANNELS, "capped");
        let mut own: Vec<u64> = odd.iter().take(5).map(|c| c.channel).collect();
        own.sort_unstable();
        assert_eq!(
            own,
            [20_000, 20_001, 20_002, 20_003, 20_004],
            "its own known channels first: {odd:?}"
        );
        assert!(
            odd[5..].iter().all(|c| c.guild.is_none()),
            "then the unknown ones (looked up)"
        );
    }

    #[tokio::test]
    async fn configured_channels_come_first_whatever_their_guild_status() {
        // 600 known channels of the odd guild, more recently active than any configured one;
        // configured: one quiet with no cursor and no known guild, one of the odd guild, one
        // of the even guild (another shard's).
        let sink = Cursors::default();
        {
            let mut saved = sink.0.lock().unwrap();
            for c in 0..600 {
                saved.insert(
                    format!("discord:default:last:{}", 10_000 + c),
                    2_000_000 + c,
                );
                saved.insert(format!("discord:default:guild:{}", 10_000 + c), ODD as i64);
            }
            saved.insert("discord:default:guild:70001".into(), ODD as i64);
            saved.insert("discord:default:guild:70002".into(), EVEN as i64);
        }
        let http = Arc::new(Http::new("token"));
        let state = State::new("default".into(), vec![], vec![70_000, 70_001, 70_002], http);
        let odd = to_read(&state, &Shard::new(1, 2), &sink).await;
        assert_eq!(odd.len(), MAX_CHANNELS, "capped");
        assert_eq!(
            odd[..2].iter().map(|c| c.channel).collect::<Vec<_>>(),
            [70_000, 70_001],
            "configured first, the unknown one too (looked up): {:?}",
            &odd[..3]
        );
        assert_eq!(odd[0].guild, None, "to be looked up");
        assert!(
            odd.iter().all(|c| c.channel != 70_002),
            "another shard's configured channel left out"
        );
        assert!(odd[2..].iter().all(|c| c.guild == Some(Some(ODD))));
    }

    #[test]
    fn snowflakes_of_an_instant_order_with_discords_ids() {
        // 175928847299117063 is Discord's documented example, 2016-04-30 11:18:25.796 UTC.
        let example: u64 = 175_928_847_299_117_063;
        let at = snowflake_at(1_462_015_105_796);
        assert!(at <= example && example - at < 1 << 22);
        assert_eq!(snowflake_at(0), 0);
    }
}
