//! The durable queue of accepted turns, inbound dedupe, and the turn's two exactly-once steps.

use chela_channel::{Conversation, Inbound};
use serde::{Deserialize, Serialize};

use super::StoreFuture;
use crate::domain::run::RunRecord;
use crate::store::error::StoreError;

/// A turn waiting for its session's lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTurn {
    /// The session it belongs to.
    pub session_key: String,
    /// The message to run.
    pub inbound: Inbound,
    /// When it was queued, ms since the epoch.
    pub queued_ms: u64,
}

/// The dedupe key of an inbound message: `channel|account|chat|thread|message_id` (an empty
/// thread when there is none).
pub fn dedupe_key(inbound: &Inbound) -> String {
    let c = &inbound.conversation;
    format!(
        "{}|{}|{}|{}|{}",
        c.channel,
        c.account,
        c.chat_id,
        c.thread_id.as_deref().unwrap_or(""),
        inbound.message_id
    )
}

/// Pending turns (seq -> [`PendingTurn`]: accepted, not yet settled), inbound dedupe marks
/// (dedupe key -> first-seen time), and the two steps that make a turn exactly-once (SPEC
/// 1.4, SPEC 3): accepting it ([`QueueStore::enqueue_unique`]: dedupe mark + pending turn)
/// and settling it ([`QueueStore::settle_turn`]: outbox record + removal of its pending
/// turns). Both steps sit here, though settling also writes the outbox, because together
/// they are the queue's invariant: a turn is pending until its final is recorded, and never
/// both or neither. A crash before a step repeats it; after it, the restart finds the work
/// recorded and does not do it twice.
///
/// Seqs increase across the whole store, also across restarts (see the module page).
pub trait QueueStore {
    /// Queues `turn` and returns its seq. Durable.
    fn enqueue<'a>(&'a self, turn: &'a PendingTurn) -> StoreFuture<'a, u64>;

    /// Queues `turn` unless `dedupe_key` was marked before; returns its seq, or `None` for a
    /// duplicate (nothing written). The mark and the turn are written atomically: of several
    /// concurrent callers with one key exactly one gets a seq. Durable.
    ///
    /// A backend that accepted a rollback of lost writes may also answer `None` for a message
    /// dated before the rollback (it was likely handled by the writes that were lost).
    fn enqueue_unique<'a>(
        &'a self,
        dedupe_key: &'a str,
        turn: &'a PendingTurn,
    ) -> StoreFuture<'a, Option<u64>>;

    /// [`QueueStore::enqueue_unique`], written at once but made durable only by the next
    /// durable write (anyone's) or flush, for a caller that makes it durable itself before
    /// the message is confirmed to where it came from (a channel saving its cursor). Every
    /// durable write makes all earlier writes durable, so a reply recorded for the turn
    /// takes the turn along. By default the same as `enqueue_unique`.
    fn enqueue_unique_buffered<'a>(
        &'a self,
        dedupe_key: &'a str,
        turn: &'a PendingTurn,
    ) -> StoreFuture<'a, Option<u64>> {
        self.enqueue_unique(dedupe_key, turn)
    }

    /// Removes turn `seq` (it has run or was dropped); returns whether it was there. Buffered.
    fn remove_pending(&self, seq: u64) -> Result<bool, StoreError>;

    /// Removes pending turns that will never run. Durable.
    fn clear_pending<'a>(&'a self, seqs: &'a [u64]) -> StoreFuture<'a, ()>;

    /// Whether turn `seq` is still pending (queued, running, or to run again at the next start).
    fn is_pending(&self, seq: u64) -> Result<bool, StoreError>;

    /// Every pending turn, by seq (oldest first).
    fn all_pending(&self) -> Result<Vec<(u64, PendingTurn)>, StoreError>;

    /// How many turns are pending (`/metrics`); without decoding them where the engine can.
    fn pending_count(&self) -> Result<u64, StoreError> {
        self.all_pending().map(|p| p.len() as u64)
    }

    /// The pending turns of session `key`, oldest first.
    fn pending_for(&self, key: &str) -> Result<Vec<(u64, PendingTurn)>, StoreError> {
        let mut out = self.all_pending()?;
        out.retain(|(_, turn)| turn.session_key == key);
        Ok(out)
    }

    /// Records the final reply `text` of run `run` (going to `conversation`) in the outbox and
    /// removes the run's pending turns (`run.seqs`), and with `keep_record` keeps `run` as the
    /// record of each of them ([`QueueStore::finished_run`]), atomically; returns the outbox
    /// id. A final with nothing to send (blank: NO_REPLY, a silent stop) gets an id but no
    /// outbox record. Durable.
    fn settle_turn<'a>(
        &'a self,
        run: &'a RunRecord,
        keep_record: bool,
        conversation: &'a Conversation,
        text: &'a str,
    ) -> StoreFuture<'a, u64>;

    /// Removes the pending turns of run `run` (`run.seqs`) and with `keep_record` keeps `run`
    /// as their record, atomically: a run whose reply goes nowhere (no chat, no channel).
    /// Durable.
    fn finish_run<'a>(&'a self, run: &'a RunRecord, keep_record: bool) -> StoreFuture<'a, ()>;

    /// Keeps `run` as the record of its turns (`run.seqs`) without touching the queue: for a
    /// run whose turns leave the queue in a step of their own (a sub-agent's hand-over), made
    /// before that step so a waiter never finds a turn neither pending nor answered. Buffered.
    fn keep_run_record(&self, run: &RunRecord) -> Result<(), StoreError>;

    /// The record of the run that answered turn `seq`, if it settled and its record was not
    /// pruned yet. With [`QueueStore::is_pending`] it tells a waiter, without a gap, whether a
    /// turn is still being answered, was answered, or is unknown.
    fn finished_run(&self, seq: u64) -> Result<Option<RunRecord>, StoreError>;

    /// Forgets run records kept since before `older_than_ms` (by their end); returns how many
    /// turns' records went. Buffered.
    fn prune_finished(&self, older_than_ms: u64) -> Result<usize, StoreError>;

    /// Marks `dedupe_key` as seen at `now_ms`; true when it was not seen before. Atomic: of
    /// several concurrent callers with the same key exactly one gets true. Buffered. (Like
    /// [`QueueStore::enqueue_unique`], may answer false for a message dated before an
    /// accepted rollback.)
    fn mark_seen(&self, dedupe_key: &str, now_ms: u64) -> Result<bool, StoreError>;

    /// Forgets marks first seen before `older_than_ms`, but never one written after it was
    /// read; returns how many were removed. Buffered.
    fn prune_seen(&self, older_than_ms: u64) -> Result<usize, StoreError>;

    /// Removes the mark `dedupe_key`, so the next [`QueueStore::mark_seen`] with it answers
    /// true again (a send that failed for good may be tried once more); true when there was
    /// one. Buffered.
    fn forget_seen(&self, dedupe_key: &str) -> Result<bool, StoreError>;
}
