//! The catch-up on history after READY and RESUME: what was posted while chela was down or
//! reconnecting never reaches it through the gateway (a new session does not replay), so each
//! channel worth reading is asked for its messages after the last one taken and those go
//! through the same intake as live ones (dedupe drops what was taken already).
//!
//! Read: the configured channel allowlist (`channels.discord.channels`) and every channel,
//! thread or DM chela took a message from before (it has a cursor, see [`crate::seen`]), at
//! most [`MAX_CHANNELS`] of them, the most recently active first; of those, each shard reads
//! the channels of its guilds (DMs: shard 0), as its READY or RESUME says only it is back. Bounded: one page of
//! [`PER_CHANNEL`] messages per channel, none older than [`WINDOW`]. A DM from someone chela
//! never heard from cannot be found (Discord has no list of a bot's DMs). Live messages wait
//! (bounded) until the catch-up is done, so a conversation's older messages go first.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use serenity::builder::GetMessages;
use serenity::http::Http;
use serenity::model::channel::{Channel as DiscordChannelKind, Message};
use serenity::model::id::{ChannelId, GuildId, MessageId};

use crate::intake::Intake;
use crate::shard::Shard;
use crate::state::{State, place_of};

/// How far back the catch-up reads.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Messages read per channel at most (one page).
pub const PER_CHANNEL: u8 = 100;
/// Channels read at most.
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
    let channels = to_read(&state, intake.sink.as_ref()).await;
    let floor = snowflake_at(now_ms().saturating_sub(WINDOW.as_millis() as u64));
    let count = channels.len();
    let mut pages = futures_util::stream::iter(channels)
        .map(|(channel, last)| {
            let (http, state, shard) = (http.clone(), state.clone(), intake.shard.clone());
            async move { read(&http, &state, &shard, channel, last.max(floor)).await }
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

/// The channels to read with the last message taken in each (0: none).
async fn to_read(state: &State, sink: &dyn chela_channel::InboundSink) -> Vec<(u64, u64)> {
    let known = state.seen().load(sink).await;
    let mut out: Vec<(u64, u64)> = state
        .configured_channels()
        .iter()
        .map(|c| (*c, state.seen().last(*c).unwrap_or(0)))
        .collect();
    for (channel, last) in known {
        if out.len() >= MAX_CHANNELS {
            break;
        }
        if !out.iter().any(|(c, _)| *c == channel) {
            out.push((channel, last));
        }
    }
    out
}

/// The messages of `channel` after `after`, oldest first, with their guild set (history
/// messages come without it); nothing when the channel cannot be read or is another shard's.
async fn read(http: &Http, state: &State, shard: &Shard, channel: u64, after: u64) -> Vec<Message> {
    let id = ChannelId::new(channel.max(1));
    let guild = match state.guild_of(channel) {
        Some(guild) => Some(guild),
        None => match http.get_channel(id).await {
            Ok(DiscordChannelKind::Guild(c)) => {
                state.remember(channel, place_of(&c), Some(c.guild_id.get()));
                Some(c.guild_id.get())
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(error = %e, channel, "discord: cannot look up a channel to catch up");
                return Vec::new();
            }
        },
    };
    if !shard.owns(guild) {
        return Vec::new();
    }
    let page = GetMessages::new()
        .after(MessageId::new(after.max(1)))
        .limit(PER_CHANNEL);
    let mut messages = match id.messages(http, page).await {
        Ok(messages) => messages,
        Err(e) => {
            tracing::warn!(error = %e, channel, "discord: cannot read a channel's history");
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
mod tests {
    use super::*;

    #[test]
    fn snowflakes_of_an_instant_order_with_discords_ids() {
        // 175928847299117063 is Discord's documented example, 2016-04-30 11:18:25.796 UTC.
        let example: u64 = 175_928_847_299_117_063;
        let at = snowflake_at(1_462_015_105_796);
        assert!(at <= example && example - at < 1 << 22);
        assert_eq!(snowflake_at(0), 0);
    }
}
