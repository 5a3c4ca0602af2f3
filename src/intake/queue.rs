//! The durable queue: a message accepted once (its dedupe mark and its pending entry in one
//! step), then handed to where its session runs.

use chela_channel::{Inbound, SinkError};

use super::Intake;
use crate::inbound::route::queued_turn;
use crate::store::PendingTurn;

/// When a message [`enqueue`] accepts is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Durable {
    /// Before it is handed to where its session runs.
    Now,
    /// With the channel's next cursor save, or any durable write before it (a reply to it
    /// is one): see `InboundSink::accept_before_cursor`.
    WithCursor,
}

/// Queues a message (durable as `durable` says) and hands it to where its session runs;
/// its pending seq, or `None` for a duplicate.
pub(super) async fn enqueue(
    intake: &Intake,
    key: String,
    inbound: Inbound,
    durable: Durable,
) -> Result<Option<u64>, SinkError> {
    enqueue_counted(intake, key, inbound, true, durable).await
}

/// [`enqueue`], counting a new message in the inbound metric when `count`.
pub(super) async fn enqueue_counted(
    intake: &Intake,
    key: String,
    inbound: Inbound,
    count: bool,
    durable: Durable,
) -> Result<Option<u64>, SinkError> {
    let dedupe = crate::store::dedupe_key(&inbound);
    let channel = inbound.conversation.channel.clone();
    let pending = PendingTurn {
        session_key: key,
        inbound,
        queued_ms: crate::domain::message::now_ms(),
    };
    let queued = enqueue_keyed_as(intake, pending, &dedupe, durable).await?;
    if count && queued.is_some() {
        // Counted once it is known to be new: a redelivery is not a second message.
        crate::metrics::global().inbound(&channel);
    }
    Ok(queued)
}

/// Durably queues `pending` unless `dedupe` was queued before, and hands it to where its
/// session runs (its lane here; on a cluster, the partition's holder reads it from the
/// queue); its seq, or `None` for a duplicate. Scheduled turns come here with their own key
/// (`cron::run_key`).
pub async fn enqueue_keyed(
    intake: &Intake,
    pending: PendingTurn,
    dedupe: &str,
) -> Result<Option<u64>, SinkError> {
    enqueue_keyed_as(intake, pending, dedupe, Durable::Now).await
}

/// [`enqueue_keyed`], durable as `durable` says.
async fn enqueue_keyed_as(
    intake: &Intake,
    pending: PendingTurn,
    dedupe: &str,
    durable: Durable,
) -> Result<Option<u64>, SinkError> {
    let key = pending.session_key.clone();
    let queued = match durable {
        Durable::Now => intake.store.enqueue_unique(dedupe, &pending).await,
        Durable::WithCursor => intake.store.enqueue_unique_buffered(dedupe, &pending).await,
    };
    let Some(seq) = queued.map_err(|e| SinkError(e.to_string()))? else {
        tracing::debug!(session = %key, "duplicate inbound dropped");
        return Ok(None);
    };
    intake
        .placement
        .hand_over(&key, queued_turn(seq, &pending))
        .await
        .map_err(|e| SinkError(e.to_string()))?;
    Ok(Some(seq))
}

/// A store write's result, as the sink reports it.
pub(super) fn sink_result(result: Result<(), crate::store::StoreError>) -> Result<(), SinkError> {
    result.map_err(|e| SinkError(e.to_string()))
}
