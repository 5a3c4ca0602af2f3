//! Long polling: `getUpdates` with the offset persisted only after the updates below it are
//! accepted; the save makes the whole batch durable at once (`accept_before_cursor`), and
//! Telegram keeps a batch until the next poll confirms its offset, so a failed save is tried
//! again before that poll. One loop per token; a 409 Conflict (another poller) backs off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chela_channel::{ChannelError, InboundSink};
use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::{AllowedUpdate, Me, UpdateKind};
use tokio_util::sync::CancellationToken;

use crate::errors::{channel_error, is_conflict};
use crate::narrow::{Narrowed, count_skipped, narrow};
use crate::normalize::normalize;

/// Longest pause between two failed polls.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Asks `getMe` until it answers (the bot must know its own name to see mentions).
pub async fn who_am_i(bot: &Bot, shutdown: &CancellationToken) -> Option<Me> {
    let mut backoff = Duration::from_millis(500);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            me = bot.get_me() => match me {
                Ok(me) => return Some(me),
                Err(e) => tracing::warn!(error = %channel_error(e), "telegram getMe failed; retrying"),
            },
        }
        if pause(&mut backoff, shutdown).await {
            return None;
        }
    }
}

/// Polls until `shutdown`, handing every message to `sink` and advancing the durable offset;
/// `connected` says whether the last `getUpdates` got an answer.
pub async fn poll(
    bot: &Bot,
    me: &Me,
    account: &str,
    timeout_s: u32,
    sink: Arc<dyn InboundSink>,
    shutdown: CancellationToken,
    connected: &AtomicBool,
) -> Result<(), ChannelError> {
    let cursor = format!("telegram:{account}:offset");
    let mut offset = sink.cursor(&cursor).await.unwrap_or(0);
    let mut backoff = Duration::from_millis(500);
    loop {
        let request = bot
            .get_updates()
            .offset(i32::try_from(offset).unwrap_or(i32::MAX))
            .timeout(timeout_s)
            .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
        let updates = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            updates = request.send() => updates,
        };
        // Any answer, even one that cannot be decoded, means Telegram is reached.
        let reached = !matches!(&updates, Err(e) if !matches!(e, RequestError::InvalidJson { .. }));
        connected.store(reached, Ordering::Relaxed);
        let updates = match updates {
            Ok(updates) => updates,
            Err(RequestError::InvalidJson { source, .. }) => {
                tracing::warn!(error = %source, offset, "telegram: a getUpdates batch cannot be decoded; fetching one update at a time");
                match narrow(bot, offset).await {
                    Narrowed::Updates(updates) => updates,
                    Narrowed::Skip(id, error) => {
                        count_skipped(sink.as_ref(), account, id, &error).await;
                        offset = id + 1;
                        if let Err(e) = sink.save_cursor(&cursor, offset).await {
                            tracing::error!(error = %e, "telegram: cannot save the update offset");
                        }
                        continue;
                    }
                    Narrowed::Retry => {
                        if pause(&mut backoff, &shutdown).await {
                            return Ok(());
                        }
                        continue;
                    }
                }
            }
            Err(e) => {
                if is_conflict(&e) {
                    tracing::warn!(
                        "telegram: another process is polling this bot token (409 Conflict); backing off"
                    );
                } else {
                    tracing::warn!(error = %channel_error(e), "telegram getUpdates failed; retrying");
                }
                if pause(&mut backoff, &shutdown).await {
                    return Ok(());
                }
                continue;
            }
        };
        backoff = Duration::from_millis(500);
        let before = offset;
        for update in updates {
            let next = i64::from(update.id.0) + 1;
            if let UpdateKind::Error(value) = &update.kind {
                // teloxide read its id but not its content.
                let error = format!("unknown update shape: {}", excerpt(value));
                count_skipped(sink.as_ref(), account, next - 1, &error).await;
            }
            if let UpdateKind::CallbackQuery(query) = &update.kind
                && let Some(press) = crate::press::press(query, account)
            {
                sink.press(press).await;
            }
            if let UpdateKind::Message(message) = &update.kind
                && let Some(inbound) = normalize(message, me, account)
                && let Err(e) = sink.accept_before_cursor(inbound).await
            {
                // Not accepted: stop here; the update comes again with the next poll.
                tracing::error!(error = %e, "telegram: inbound not accepted; will retry");
                break;
            }
            offset = next;
        }
        if offset != before && !save_offset(sink.as_ref(), &cursor, offset, &shutdown).await {
            return Ok(());
        }
    }
}

/// Saves `offset`, which makes the batch below it durable, trying again after a pause until
/// it is saved; false when `shutdown` came first. The next poll would confirm the batch to
/// Telegram, so it waits for the save. (Fetching the batch again instead would repeat what
/// keeps no dedupe mark: an answer to a question, a pairing prompt, group context.)
async fn save_offset(
    sink: &dyn InboundSink,
    cursor: &str,
    offset: i64,
    shutdown: &CancellationToken,
) -> bool {
    let mut backoff = Duration::from_millis(500);
    loop {
        match sink.save_cursor(cursor, offset).await {
            Ok(()) => return true,
            Err(e) => {
                tracing::error!(error = %e, "telegram: cannot save the update offset; trying again");
            }
        }
        if pause(&mut backoff, shutdown).await {
            return false;
        }
    }
}

/// The start of `value` as JSON, for a log line.
fn excerpt(value: &serde_json::Value) -> String {
    value.to_string().chars().take(120).collect()
}

/// Sleeps for the backoff (doubling it); true when shutdown fired meanwhile.
pub(crate) async fn pause(backoff: &mut Duration, shutdown: &CancellationToken) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(wait) => false,
    }
}

#[cfg(test)]
#[path = "poll_tests.rs"]
mod tests;
