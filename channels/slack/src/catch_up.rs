//! The catch-up after (re)starting: Slack does not keep Socket Mode events for an app that
//! is not connected, so each channel and thread chela took a message from (it has a cursor,
//! see [`Intake::cursor_name`]) is read through `conversations.history` /
//! `conversations.replies` from its cursor on, and what is newer goes through the same intake
//! as live events (dedupe drops what was taken already). Live events wait until it is done
//! (at most [`HOLD`]), so a conversation's older messages go first.
//!
//! Bounded: at most [`MAX_CHATS`] channels and threads, the most recently active first; one
//! page of [`PER_CHAT`] messages each; nothing older than [`WINDOW`]. A DM nobody wrote
//! before cannot be found (chela keeps no list of a bot's DMs).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::intake::Intake;
use crate::ts;

/// How far back the catch-up reads.
pub const WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Messages read per channel or thread at most (one page).
pub const PER_CHAT: u16 = 100;
/// Channels and threads read at most.
pub const MAX_CHATS: usize = 500;
/// How long live events wait for the catch-up at most.
pub const HOLD: Duration = Duration::from_secs(10);

/// Reads every channel and thread with a cursor and takes what it finds.
pub async fn catch_up(intake: &Intake) {
    let prefix = intake.cursor_prefix();
    let mut cursors = intake.sink.cursors(&prefix).await;
    cursors.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
    cursors.truncate(MAX_CHATS);
    let floor = now_micros().saturating_sub(i64::try_from(WINDOW.as_micros()).unwrap_or(i64::MAX));
    let mut taken = 0usize;
    for (name, at) in cursors {
        let Some(place) = name.strip_prefix(&prefix) else {
            continue;
        };
        let oldest = ts::from_micros(at.max(floor));
        let read = match place.split_once('/') {
            Some((channel, thread)) => {
                let thread = thread.to_string();
                intake.state.remember_thread(channel, &thread);
                replies(intake, channel, &thread, &oldest).await
            }
            None => history(intake, place, &oldest).await,
        };
        match read {
            Ok(n) => taken += n,
            Err(e) => {
                tracing::warn!(error = %e, "the Slack catch-up could not read a conversation")
            }
        }
    }
    if taken > 0 {
        tracing::info!(taken, "Slack catch-up");
    }
}

/// A channel's top-level messages after `oldest`, oldest first; how many were taken.
async fn history(
    intake: &Intake,
    channel: &str,
    oldest: &str,
) -> Result<usize, chela_channel::ChannelError> {
    let params = [
        ("channel", channel.to_string()),
        ("oldest", oldest.to_string()),
        ("limit", PER_CHAT.to_string()),
    ];
    let answer = intake.api.get("conversations.history", &params).await?;
    let channel_type = channel_type(intake, channel).await;
    let mut taken = 0;
    for message in newest_first(&answer).iter().rev() {
        taken += usize::from(take(intake, message, channel, &channel_type).await);
    }
    Ok(taken)
}

/// A thread's replies after `oldest`, oldest first; how many were taken.
async fn replies(
    intake: &Intake,
    channel: &str,
    thread: &str,
    oldest: &str,
) -> Result<usize, chela_channel::ChannelError> {
    let params = [
        ("channel", channel.to_string()),
        ("ts", thread.to_string()),
        ("oldest", oldest.to_string()),
        ("limit", PER_CHAT.to_string()),
    ];
    let answer = intake.api.get("conversations.replies", &params).await?;
    let channel_type = channel_type(intake, channel).await;
    let after = ts::to_micros(oldest).unwrap_or(0);
    let mut taken = 0;
    let messages = answer["messages"].as_array().cloned().unwrap_or_default();
    for message in messages {
        // Slack lists the thread's first message whatever `oldest` says.
        let at = message["ts"].as_str().and_then(ts::to_micros).unwrap_or(0);
        if at > after {
            taken += usize::from(take(intake, &message, channel, &channel_type).await);
        }
    }
    Ok(taken)
}

/// Takes one history message (which names no channel) as if it had come live.
async fn take(intake: &Intake, message: &Value, channel: &str, channel_type: &str) -> bool {
    let mut event = message.clone();
    event["channel"] = Value::String(channel.to_string());
    intake.take(&event, channel_type).await
}

/// `conversations.history`'s messages (newest first, as Slack lists them).
fn newest_first(answer: &Value) -> Vec<Value> {
    answer["messages"].as_array().cloned().unwrap_or_default()
}

/// A channel's type as events name it: `im` for `D…`, else asked (`mpim` or `channel`).
async fn channel_type(intake: &Intake, channel: &str) -> String {
    if channel.starts_with('D') {
        return "im".into();
    }
    match intake
        .api
        .get("conversations.info", &[("channel", channel.to_string())])
        .await
    {
        Ok(info) if info["channel"]["is_im"] == true => "im".into(),
        Ok(info) if info["channel"]["is_mpim"] == true => "mpim".into(),
        _ => "channel".into(),
    }
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
