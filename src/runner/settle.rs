//! Settling a finished run: its final recorded in the outbox (its pending entries cleared in
//! the same step) and handed to delivery; a sub-agent's result handed to its parent.

use std::sync::Arc;

use chela_channel::Conversation;
use tokio::task::JoinHandle;

use super::{Handles, RunnerPort};
use crate::agent::run::{RunOutcome, RunStatus};
use crate::delivery::Delivery;
use crate::delivery::files::{self, FinalFiles};
use crate::delivery::journal::forget;
use crate::domain::run::RunRecord;
use crate::lane::QueuedTurn;
use crate::reply::Streamed;
use crate::store::StoreError;

/// Settles a finished run: its final is recorded in the outbox (its pending entries cleared
/// in the same step) and handed to the outbox worker; a sub-agent's goes to its parent.
pub(super) async fn settle(
    handles: &Handles,
    port: Arc<dyn RunnerPort>,
    key: &str,
    turn: &QueuedTurn,
    record: &RunRecord,
    outcome: &RunOutcome,
    reply: Option<JoinHandle<Streamed>>,
) {
    let run_id = &record.run_id;
    if handles.shutdown.is_cancelled() && outcome.status == RunStatus::Aborted {
        // Shutdown, not /stop: the turn stays pending and runs again at the next start
        // (its previews are taken back then); no preview goes out after this.
        if let Some(reply) = reply {
            reply.abort();
        }
        return;
    }
    // A sub-agent replies to its parent session, not to a chat.
    if let Ok(Some(link)) = handles.store.subagent(key) {
        if let Some(reply) = reply {
            reply.abort();
        }
        // Its turns leave the queue with the hand-over to the parent: the record goes first.
        if let Err(e) = handles.store.keep_run_record(record) {
            tracing::warn!(error = %e, "cannot keep a sub-agent run's record");
        }
        port.finish_subagent(key, link, turn, outcome).await;
        forget(&handles.store, run_id);
        return;
    }
    let streamed = match reply {
        Some(handle) => handle.await.ok(),
        None => None,
    };
    let Some(streamed) = streamed else {
        if turn.target.channel == super::INTERNAL_CHANNEL {
            tracing::info!(
                "the session has no chat to reply to; its reply stays in its transcript"
            );
            forget(&handles.store, run_id);
        } else {
            tracing::error!(channel = %turn.target.channel, "no channel to reply on; reply dropped");
        }
        let keep = keeps_record(turn, record);
        // Settling is idempotent: when the answer was lost (a connection dropped during
        // COMMIT), once more, after the store reconnected (its calls wait for that).
        let mut finished = handles.store.finish_run(record, keep).await;
        if !matches!(finished, Ok(()) | Err(StoreError::NotOwner { .. })) {
            finished = handles.store.finish_run(record, keep).await;
        }
        if let Err(e) = finished {
            tracing::error!(error = %e, "cannot settle a run whose reply goes nowhere; it runs again at the next start");
        }
        return;
    };
    // What the `message` tool already sent here is not said again.
    let text = streamed.final_text();
    // A heartbeat with nothing to report sends nothing (its preview, if any, is deleted),
    // unless someone's message was steered into its run: that one gets its answer.
    let quiet = turn.scheduled
        && turn.sender == crate::cron::HEARTBEAT_SENDER
        && record.seqs == turn.seqs
        && crate::cron::is_heartbeat_ok(&text);
    let text = match quiet {
        true => crate::reply::stream::NO_REPLY.to_owned(),
        false => text,
    };
    // File lines of the answer are checked now: what the outbox reads as one was allowed.
    let text = files::check_final(final_files(handles, key, &turn.target), text).await;
    // Once the final is durable the lane is free: the outbox worker delivers it.
    let keep = keeps_record(turn, record);
    let settled = match handles
        .store
        .settle_turn(record, keep, &turn.target, &text)
        .await
    {
        Ok(id) => Some(id),
        Err(StoreError::AlreadySettled { .. }) => {
            tracing::info!(run_id = %run_id, "cluster: the turn was answered by another run; this final is dropped");
            // What this run previewed goes too (the preview it shows last).
            let mut previews = streamed.reply;
            if let Err(e) = previews.deliver_once(crate::reply::stream::NO_REPLY).await {
                tracing::debug!(error = %e, "cannot take back the preview of a second run");
            }
            return;
        }
        Err(e) => {
            let done = super::settle_again::Final {
                record,
                keep_record: keep,
                to: &turn.target,
                text: &text,
            };
            super::settle_again::recorded_after(&handles.store, &e, &done).await
        }
    };
    if let Some(id) = settled {
        handles.notices.outbox().submit(Delivery {
            id,
            session_key: key.to_owned(),
            to: turn.target.clone(),
            text,
            created_ms: crate::domain::message::now_ms(),
            run_id: Some(run_id.clone()),
            stream: Some(streamed.reply),
            take_back: None,
        });
    }
}

/// What the file lines of session `key`'s final into `to` are checked against: the channel's
/// limit, and the session's tool policy (a conversation that may not use `message` sends no
/// file through its answer either, docs/media.md).
fn final_files(handles: &Handles, key: &str, to: &Conversation) -> FinalFiles {
    let channel = handles.notices.channel(&to.channel);
    FinalFiles {
        policy: handles.notices.outbox().files().for_session(key),
        channel: to.channel.clone(),
        max_bytes: channel.and_then(|c| c.max_file_bytes()),
        may_send: handles
            .agents
            .for_key(key)
            .allowed_for(key, Some(to))
            .allows("message"),
        own_media: format!("media/{}", super::media::safe_key(key)),
    }
}

/// Whether the store keeps the record of `turn`'s run: for messages sent through the RPC's
/// `agent`, whose callers wait with `agent.wait` (also after the end, or a restart), and for
/// any run that answered several messages (steered or merged ones may have come through the
/// RPC). A single chat message's run is told on the bus alone: no store space.
fn keeps_record(turn: &QueuedTurn, record: &RunRecord) -> bool {
    turn.target.channel == crate::inbound::route::RPC_CHANNEL || record.seqs.len() > 1
}
