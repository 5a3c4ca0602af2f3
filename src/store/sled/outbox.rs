//! The outbox: final replies recorded before they are sent (id, u64 big-endian -> JSON), marked
//! delivered once the platform confirms, dead-lettered when retries run out (SPEC 6).

use chela_channel::Conversation;
use sled::Transactional;

use super::{SledStore, abort, be_u64, db_err, tx_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{DeliveryStore, OutboxEntry, ReplyJournal, StoreFuture};

impl DeliveryStore for SledStore {
    fn record_final<'a>(
        &'a self,
        session_key: &'a str,
        conversation: &'a Conversation,
        text: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, u64> {
        Box::pin(self.record_final_now(session_key, conversation, text, now_ms))
    }

    /// Counts one send attempt of `id`; returns the new count (`None` if there is no such entry).
    fn note_attempt(&self, id: u64) -> Result<Option<u32>, StoreError> {
        Ok(self
            .update_outbox(id, |e| e.attempts += 1)?
            .map(|e| e.attempts))
    }

    /// Marks `id` delivered by removing it: a delivered final is never needed again, so the
    /// outbox only holds what is still to send. Returns whether it was in the outbox. Not
    /// flushed (a lost removal means one resend after a crash); call `flush` to make
    /// it durable at once.
    fn mark_delivered(&self, id: u64) -> Result<bool, StoreError> {
        let removed = self.inner.outbox.remove(id.to_be_bytes()).map_err(db_err)?;
        Ok(removed.is_some())
    }

    /// How many records the outbox holds, delivered ones of older versions included.
    fn outbox_len(&self) -> usize {
        self.inner.outbox.len()
    }

    /// Entries not yet delivered, oldest first.
    fn undelivered(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let mut out = read_all(&self.inner.outbox, "outbox")?;
        out.retain(|e| !e.delivered);
        Ok(out)
    }

    /// Removes delivered entries created before `older_than_ms` (records an older version
    /// kept after delivery); returns how many.
    fn prune_delivered(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        let mut removed = 0;
        for kv in self.inner.outbox.iter() {
            let (k, v) = kv.map_err(db_err)?;
            let entry: OutboxEntry = decode("outbox", &v)?;
            if entry.delivered && entry.created_ms < older_than_ms {
                self.inner.outbox.remove(k).map_err(db_err)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Moves `id` from the outbox to the dead letters; returns whether it was in the outbox.
    fn dead_letter(&self, id: u64) -> Result<bool, StoreError> {
        let key = id.to_be_bytes();
        let inner = &self.inner;
        (&inner.outbox, &inner.outbox_dead)
            .transaction(|(outbox, dead)| match outbox.remove(&key)? {
                Some(v) => {
                    dead.insert(&key, v)?;
                    Ok(true)
                }
                None => Ok(false),
            })
            .map_err(tx_err)
    }

    /// Every dead-lettered entry, oldest first.
    fn dead_letters(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        read_all(&self.inner.outbox_dead, "outbox_dead")
    }

    fn revive_dead_letter(&self, id: u64, now_ms: u64) -> StoreFuture<'_, Option<OutboxEntry>> {
        Box::pin(async move {
            let key = id.to_be_bytes();
            let inner = &self.inner;
            let revived = (&inner.outbox, &inner.outbox_dead)
                .transaction(|(outbox, dead)| {
                    let Some(v) = dead.remove(&key)? else {
                        return Ok(None);
                    };
                    let entry: OutboxEntry = match decode("outbox_dead", &v) {
                        Ok(entry) => entry,
                        Err(e) => return abort(e),
                    };
                    let entry = entry.revived(now_ms);
                    let bytes = match encode(&entry) {
                        Ok(bytes) => bytes,
                        Err(e) => return abort(e),
                    };
                    outbox.insert(&key, bytes)?;
                    Ok(Some(entry))
                })
                .map_err(tx_err)?;
            self.sync().await?;
            Ok(revived)
        })
    }

    fn drop_dead_letter(&self, id: u64) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let removed = self
                .inner
                .outbox_dead
                .remove(id.to_be_bytes())
                .map_err(db_err)?;
            self.sync().await?;
            Ok(removed.is_some())
        })
    }

    fn journal_sent<'a>(
        &'a self,
        run: &'a str,
        to: &'a Conversation,
        message_id: &'a str,
        durable: bool,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.note_sent(run, to, message_id, durable))
    }

    fn journal(&self, run: &str) -> Result<Option<ReplyJournal>, StoreError> {
        self.read_journal(run)
    }

    fn all_journals(&self) -> Result<Vec<(String, ReplyJournal)>, StoreError> {
        self.read_journals()
    }

    fn forget_journal(&self, run: &str) -> Result<(), StoreError> {
        self.drop_journal(run)
    }

    fn journal_taken_back(&self, run: &str, taken: &[String]) -> Result<(), StoreError> {
        self.take_back_journal(run, taken)
    }
}

impl SledStore {
    /// [`DeliveryStore::record_final`]: one insert, then a flush.
    async fn record_final_now(
        &self,
        session_key: &str,
        conversation: &Conversation,
        text: &str,
        now_ms: u64,
    ) -> Result<u64, StoreError> {
        let id = self.inner.db.generate_id().map_err(db_err)?;
        let entry = OutboxEntry {
            id,
            session_key: session_key.to_string(),
            conversation: conversation.clone(),
            text: text.to_string(),
            created_ms: now_ms,
            delivered: false,
            attempts: 0,
            run_id: None,
        };
        self.inner
            .outbox
            .insert(id.to_be_bytes(), encode(&entry)?)
            .map_err(db_err)?;
        self.sync().await?;
        Ok(id)
    }

    /// Applies `change` to entry `id` atomically; returns the changed entry.
    fn update_outbox(
        &self,
        id: u64,
        change: impl Fn(&mut OutboxEntry),
    ) -> Result<Option<OutboxEntry>, StoreError> {
        let key = id.to_be_bytes();
        self.inner
            .outbox
            .transaction(|t| {
                let Some(v) = t.get(key)? else {
                    return Ok(None);
                };
                let mut entry: OutboxEntry = match decode("outbox", &v) {
                    Ok(e) => e,
                    Err(e) => return abort(e),
                };
                change(&mut entry);
                match encode(&entry) {
                    Ok(bytes) => t.insert(&key, bytes)?,
                    Err(e) => return abort(e),
                };
                Ok(Some(entry))
            })
            .map_err(tx_err)
    }
}

/// Decodes every entry of an outbox tree in id order.
fn read_all(tree: &sled::Tree, name: &'static str) -> Result<Vec<OutboxEntry>, StoreError> {
    tree.iter()
        .map(|kv| {
            let (k, v) = kv.map_err(db_err)?;
            be_u64(name, &k)?;
            decode(name, &v)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use chela_channel::ChatKind;

    use super::*;
    use crate::store::Store;

    fn to() -> Conversation {
        Conversation {
            channel: "discord".into(),
            account: "default".into(),
            kind: ChatKind::Channel,
            chat_id: "c1".into(),
            thread_id: Some("t1".into()),
        }
    }

    #[tokio::test]
    async fn outbox_lifecycle_record_attempt_deliver_prune() {
        let store = Store::temporary().unwrap();
        let a = store.record_final("k", &to(), "one", 10).await.unwrap();
        let b = store.record_final("k", &to(), "two", 20).await.unwrap();
        assert!(a < b);
        let pending = store.undelivered().unwrap();
        assert_eq!(pending.iter().map(|e| e.id).collect::<Vec<_>>(), [a, b]);
        assert_eq!(pending[0].text, "one");
        assert_eq!(pending[0].conversation, to());
        assert_eq!(store.note_attempt(a).unwrap(), Some(1));
        assert_eq!(store.note_attempt(a).unwrap(), Some(2));
        assert!(store.mark_delivered(a).unwrap());
        assert!(!store.mark_delivered(999_999).unwrap());
        let left = store.undelivered().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].id, b);
        assert_eq!(store.prune_delivered(5).unwrap(), 0);
        assert_eq!(store.prune_delivered(15).unwrap(), 0);
        assert_eq!(store.note_attempt(a).unwrap(), None);
    }

    #[tokio::test]
    async fn a_delivered_final_leaves_nothing_in_the_outbox() {
        let store = Store::temporary().unwrap();
        let a = store.record_final("k", &to(), "one", 10).await.unwrap();
        let b = store.record_final("k", &to(), "two", 20).await.unwrap();
        assert!(store.mark_delivered(a).unwrap());
        assert!(store.mark_delivered(b).unwrap());
        assert_eq!(store.outbox_len(), 0);
        assert!(!store.mark_delivered(a).unwrap());
    }

    #[tokio::test]
    async fn prune_removes_delivered_records_left_by_an_older_version() {
        let store = SledStore::temporary().unwrap();
        let id = store.record_final("k", &to(), "one", 10).await.unwrap();
        let mut old = store.undelivered().unwrap().remove(0);
        old.delivered = true;
        store
            .inner
            .outbox
            .insert(id.to_be_bytes(), encode(&old).unwrap())
            .unwrap();
        assert!(store.undelivered().unwrap().is_empty());
        assert_eq!(store.prune_delivered(u64::MAX).unwrap(), 1);
        assert_eq!(store.outbox_len(), 0);
    }

    #[tokio::test]
    async fn dead_letters_are_moved_aside() {
        let store = Store::temporary().unwrap();
        let id = store.record_final("k", &to(), "late", 1).await.unwrap();
        store.note_attempt(id).unwrap();
        assert!(store.dead_letter(id).unwrap());
        assert!(!store.dead_letter(id).unwrap());
        assert!(store.undelivered().unwrap().is_empty());
        let dead = store.dead_letters().unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].id, dead[0].attempts), (id, 1));
    }
}
