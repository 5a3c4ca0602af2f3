//! The outbox of final replies, its dead letters, and the reply journal.

use chela_channel::Conversation;
use serde::{Deserialize, Serialize};

use super::StoreFuture;
use crate::store::error::StoreError;

/// One final reply and its delivery state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEntry {
    /// Outbox id (increasing).
    pub id: u64,
    /// The session that produced it.
    pub session_key: String,
    /// Where it goes.
    pub conversation: Conversation,
    /// The reply text.
    pub text: String,
    /// When it was recorded, ms since the epoch.
    pub created_ms: u64,
    /// True once the platform confirmed it.
    pub delivered: bool,
    /// How many sends were attempted.
    pub attempts: u32,
    /// The run that produced it, when it has a reply journal (see `reply_journal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

impl OutboxEntry {
    /// The entry sent again from `now_ms`: undelivered, no attempts yet, its time to live
    /// counted from now.
    pub fn revived(mut self, now_ms: u64) -> OutboxEntry {
        self.delivered = false;
        self.attempts = 0;
        self.created_ms = now_ms;
        self
    }
}

/// The messages one reply has sent so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyJournal {
    /// Where they were sent.
    pub conversation: Conversation,
    /// Their platform message ids, in the order they were sent.
    pub messages: Vec<String>,
}

/// The outbox (id -> [`OutboxEntry`]): final replies recorded before they are sent and
/// removed once the platform confirmed them, so it only holds what is still to send; dead
/// letters (finals not delivered in time); and the reply journal (run id ->
/// [`ReplyJournal`]): the chat messages an unfinished reply has sent, taken back after a
/// crash so a restart never leaves a reply in the chat twice (SPEC 6).
///
/// Outbox ids come from the store's one counter, so ordering by id is ordering by record
/// time. A turn's final is recorded by [`QueueStore::settle_turn`](super::QueueStore).
pub trait DeliveryStore {
    /// Records a final reply to send (no run, no journal) and returns its id. Durable.
    fn record_final<'a>(
        &'a self,
        session_key: &'a str,
        conversation: &'a Conversation,
        text: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, u64>;

    /// Counts one send attempt of `id`, atomically; returns the new count (`None` if there is
    /// no such entry). Buffered.
    fn note_attempt(&self, id: u64) -> Result<Option<u32>, StoreError>;

    /// Marks `id` delivered by removing it; returns whether it was in the outbox. Buffered (a
    /// lost removal means one resend after a crash): flush to make it durable at once.
    fn mark_delivered(&self, id: u64) -> Result<bool, StoreError>;

    /// How many records the outbox holds, delivered ones of older versions included.
    fn outbox_len(&self) -> usize;

    /// Entries not yet delivered, oldest (lowest id) first.
    fn undelivered(&self) -> Result<Vec<OutboxEntry>, StoreError>;

    /// Removes delivered entries created before `older_than_ms` (records an older version
    /// kept after delivery); returns how many. Buffered.
    fn prune_delivered(&self, older_than_ms: u64) -> Result<usize, StoreError>;

    /// Moves `id` from the outbox to the dead letters, atomically; returns whether it was in
    /// the outbox. Buffered.
    fn dead_letter(&self, id: u64) -> Result<bool, StoreError>;

    /// Every dead-lettered entry, oldest first.
    fn dead_letters(&self) -> Result<Vec<OutboxEntry>, StoreError>;

    /// Moves dead letter `id` back into the outbox to be sent again, its attempts counted
    /// from 0 and its time to live from `now_ms` (see [`OutboxEntry::revived`]); returns it,
    /// `None` when there is no such dead letter. Atomic: of two callers one gets it. Durable.
    fn revive_dead_letter(&self, id: u64, now_ms: u64) -> StoreFuture<'_, Option<OutboxEntry>>;

    /// Removes dead letter `id` for good; returns whether it was there. Durable.
    fn drop_dead_letter(&self, id: u64) -> StoreFuture<'_, bool>;

    /// Notes that run `run` sent message `message_id` into `to` (once per id; the journal's
    /// conversation is the first one noted). With `durable`, returns once it is durable,
    /// else it is buffered.
    fn journal_sent<'a>(
        &'a self,
        run: &'a str,
        to: &'a Conversation,
        message_id: &'a str,
        durable: bool,
    ) -> StoreFuture<'a, ()>;

    /// What run `run` has sent, if anything is journaled.
    fn journal(&self, run: &str) -> Result<Option<ReplyJournal>, StoreError>;

    /// Every journaled run, by run id. A record that cannot be read is logged and skipped, so
    /// it cannot hide the others.
    fn all_journals(&self) -> Result<Vec<(String, ReplyJournal)>, StoreError>;

    /// Forgets run `run`'s journal (its reply is delivered, or was taken back). Buffered.
    fn forget_journal(&self, run: &str) -> Result<(), StoreError>;

    /// Removes `taken` from run `run`'s journal (they were taken back) and keeps what was
    /// noted meanwhile (the run going again); an emptied journal goes. Buffered.
    fn journal_taken_back(&self, run: &str, taken: &[String]) -> Result<(), StoreError>;
}
