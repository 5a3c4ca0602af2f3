//! The store's interface: one trait per concern, and [`Backend`], all of them together.
//!
//! Callers hold a `Store`, which derefs to `dyn Backend`, so they never name the backend:
//! `RedbStore` or `SledStore` (embedded) or `PgStore` (PostgreSQL); all pass the same
//! contract tests (`src/store/contract_tests/`). The traits name nothing of the backends
//! nor of `store/mod.rs`, which re-exports them.
//!
//! **Durability.** Every method states what is durable when it returns:
//!
//! - *durable*: the write is on disk (or committed) before the call returns; a crash right
//!   after keeps it. These methods are async.
//! - *buffered*: the write is visible to every later read at once, but may be lost by a crash
//!   until the next [`BaseStore::flush`] returns (a backend may make it durable sooner).
//!
//! **Atomicity.** A method that changes several records (say a dedupe mark and a pending turn)
//! changes all of them or none, also across a crash; concurrent callers see either none or all.
//!
//! **Blocking.** Synchronous methods are short point operations or scans of one concern; they
//! are called from async tasks, so a backend must not block the thread for long (a backend on
//! a network database answers them from its own cache of what this node owns, or through
//! `tokio::task::block_in_place`).
//!
//! **Ids.** Pending seqs and outbox ids come from one counter per store: they increase, also
//! across restarts, and are never reused.

mod bindings;
mod cluster;
mod cron;
mod cursors;
mod delivery;
mod pairing;
mod queue;
mod sessions;
#[cfg(test)]
pub(crate) mod test_support;
pub(super) mod version;

use chela_channel::BoxFuture;

pub use bindings::{Binding, BindingStore, SubagentLink, SubagentState};
pub use cluster::{Coordinator, Lease, MAX_EVENT_PAYLOAD, NodeInfo, PARTITIONS, partition_of};
pub use cron::{CronJob, CronOrigin, CronStore};
pub use cursors::CursorStore;
pub use delivery::{DeliveryStore, OutboxEntry, ReplyJournal};
pub use pairing::{CODE_TTL_MS, MAX_PENDING, PairingOutcome, PairingRequest, PairingStore};
pub use queue::{PendingTurn, QueueStore, dedupe_key};
pub use sessions::{SUMMARY_HEADING, SessionMeta, SessionStore, WindowMessage};
pub use version::{NodeVersion, PROTOCOL};

#[cfg(all(test, feature = "sled"))]
pub(super) use pairing::ALPHABET;
pub(super) use pairing::new_code;
pub(super) use pairing::pending_outcome;

use crate::store::error::StoreError;

/// The future of an async store method.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// What every backend has besides its concerns: making buffered writes durable.
pub trait BaseStore {
    /// Makes every write that returned before this call durable; returns once it is. Cheap
    /// for concurrent callers (they may share one disk sync) and for a backend whose writes
    /// are durable already (it may return at once).
    fn flush(&self) -> StoreFuture<'_, ()>;

    /// Makes this store a cluster node's, `node` (see [`Coordinator`]): from now on
    /// `settle_turn` and `note_attempt` fail with [`StoreError::NotOwner`] for a session
    /// whose partition's lease `node` does not hold unexpired (checked by the database in
    /// the same transaction), and `enqueue_unique` wakes the partition's owner. A backend
    /// that holds one node's data alone ignores it.
    fn fence(&self, node: &str) {
        let _ = node;
    }

    /// The cluster's nodes, with what each holds (`chela status`); none for a backend
    /// that cannot be shared.
    fn cluster_nodes(&self) -> Result<Vec<NodeInfo>, StoreError> {
        Ok(Vec::new())
    }

    /// Bytes the store takes inside its database (`/metrics`); `None` for an embedded
    /// store, whose folder on disk is measured instead.
    fn stored_bytes(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// The first damage a read or a write of this store met since it was opened
    /// ([`StoreError::Damaged`]: its file is corrupted or the disk fails); the gateway stops
    /// on it rather than going on without a store. `None` for a backend that does not tell.
    fn damage(&self) -> Option<StoreError> {
        None
    }

    /// Reads every record of every collection; returns how many each holds (`chela store
    /// check`). Empty for a backend that checks itself (PostgreSQL).
    fn walk(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        Ok(Vec::new())
    }
}

/// A whole store: every concern, shareable across tasks. Implemented for every type that
/// implements all the traits; `Store` holds one as `Arc<dyn Backend>`.
pub trait Backend:
    BaseStore
    + SessionStore
    + QueueStore
    + DeliveryStore
    + BindingStore
    + PairingStore
    + CursorStore
    + CronStore
    + Send
    + Sync
{
}

impl<T> Backend for T where
    T: BaseStore
        + SessionStore
        + QueueStore
        + DeliveryStore
        + BindingStore
        + PairingStore
        + CursorStore
        + CronStore
        + Send
        + Sync
{
}
