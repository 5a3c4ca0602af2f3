//! Inbound dedupe marks: dedupe key -> first-seen time (ms, u64 big-endian) (SPEC 1.4).

use super::{SledStore, be_u64, db_err};
use crate::store::error::StoreError;

impl SledStore {
    /// [`QueueStore::mark_seen`](crate::store::ports::QueueStore::mark_seen): a compare and swap.
    /// A message dated at or before an accepted rollback's floor counts as seen (see
    /// [`SledStore::open_with`]).
    pub(super) fn mark(&self, dedupe_key: &str, now_ms: u64) -> Result<bool, StoreError> {
        if self.before_rollback(now_ms) {
            return Ok(false);
        }
        let swapped = self
            .inner
            .dedupe
            .compare_and_swap(
                dedupe_key,
                None as Option<&[u8]>,
                Some(&now_ms.to_be_bytes()[..]),
            )
            .map_err(db_err)?;
        Ok(swapped.is_ok())
    }

    /// Whether a message dated `timestamp_ms` predates an accepted store rollback: it was
    /// likely handled by the writes that were lost, so it is not answered again. Platform
    /// dates may have whole seconds only, so the floor's own second still counts as new.
    pub(super) fn before_rollback(&self, timestamp_ms: u64) -> bool {
        let floor = self.inner.rollback_floor_ms / 1000 * 1000;
        let before = floor > 0 && timestamp_ms < floor;
        if before {
            tracing::info!(
                timestamp_ms,
                floor,
                "inbound older than the accepted store rollback; dropped"
            );
        }
        before
    }

    /// Forgets marks first seen before `older_than_ms`; returns how many were removed.
    pub(super) fn prune_marks(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        let mut removed = 0;
        for kv in self.inner.dedupe.iter() {
            let (k, v) = kv.map_err(db_err)?;
            if be_u64("dedupe", &v)? < older_than_ms {
                // Only remove the mark we read, not one written since.
                let swapped = self
                    .inner
                    .dedupe
                    .compare_and_swap(&k, Some(&v), None as Option<&[u8]>)
                    .map_err(db_err)?;
                removed += usize::from(swapped.is_ok());
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::store::sled::pending::tests::inbound;
    use crate::store::{Store, dedupe_key};

    #[test]
    fn dedupe_key_names_every_part() {
        let mut msg = inbound("42", "m7", "hi");
        assert_eq!(dedupe_key(&msg), "telegram|default|42||m7");
        msg.conversation.thread_id = Some("t9".into());
        assert_eq!(dedupe_key(&msg), "telegram|default|42|t9|m7");
    }

    #[test]
    fn only_one_of_many_concurrent_marks_is_new() {
        let store = Store::temporary().unwrap();
        let fresh = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    if store.mark_seen("k", 1).unwrap() {
                        fresh.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(fresh.load(Ordering::SeqCst), 1);
        assert!(!store.mark_seen("k", 2).unwrap());
    }

    #[test]
    fn prune_forgets_only_old_marks() {
        let store = Store::temporary().unwrap();
        assert!(store.mark_seen("old", 100).unwrap());
        assert!(store.mark_seen("new", 300).unwrap());
        assert_eq!(store.prune_seen(200).unwrap(), 1);
        assert!(store.mark_seen("old", 400).unwrap());
        assert!(!store.mark_seen("new", 400).unwrap());
    }
}
