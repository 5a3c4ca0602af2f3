//! The gateway's exactly-once steps, each one sled transaction across trees:
//! accepting an inbound (dedupe mark + pending turn) and settling a turn (outbox record +
//! removal of its pending turns). A crash before either step repeats it; after it, the
//! restart finds the work recorded and does not do it twice.

use chela_channel::Conversation;
use sled::Transactional;
use sled::transaction::ConflictableTransactionError;

use super::{OutboxEntry, PendingTurn, Store, StoreError, db_err, encode, now_ms, tx_err};
use crate::domain::message::Message;
use crate::store::EntryKind;

impl Store {
    /// Durably queues `turn` unless `dedupe_key` was seen before; returns its pending seq,
    /// or `None` for a duplicate.
    pub async fn enqueue_unique(
        &self,
        dedupe_key: &str,
        turn: &PendingTurn,
    ) -> Result<Option<u64>, StoreError> {
        if self.before_rollback(turn.inbound.timestamp_ms) {
            return Ok(None);
        }
        let bytes = encode(turn)?;
        let seq = self.inner.db.generate_id().map_err(db_err)?;
        let mark = now_ms().to_be_bytes();
        let fresh = (&self.inner.dedupe, &self.inner.pending)
            .transaction(|(dedupe, pending)| {
                if dedupe.get(dedupe_key)?.is_some() {
                    return Ok(false);
                }
                dedupe.insert(dedupe_key, &mark[..])?;
                pending.insert(&seq.to_be_bytes(), bytes.as_slice())?;
                Ok::<_, ConflictableTransactionError<StoreError>>(true)
            })
            .map_err(tx_err)?;
        if !fresh {
            return Ok(None);
        }
        self.flush().await?;
        Ok(Some(seq))
    }

    /// Records the final reply of run `run_id` in the outbox and removes the turn's pending
    /// entries, atomically and durably; returns the outbox id. A final with nothing to send
    /// (NO_REPLY, a silent stop) gets an id but no record.
    pub async fn settle_turn(
        &self,
        run_id: &str,
        session_key: &str,
        conversation: &Conversation,
        text: &str,
        seqs: &[u64],
    ) -> Result<u64, StoreError> {
        let id = self.inner.db.generate_id().map_err(db_err)?;
        let entry = OutboxEntry {
            id,
            session_key: session_key.to_string(),
            conversation: conversation.clone(),
            text: text.to_string(),
            created_ms: now_ms(),
            delivered: false,
            attempts: 0,
            run_id: Some(run_id.to_owned()),
        };
        // Nothing to send counts as delivered: no record.
        let bytes = (!text.trim().is_empty())
            .then(|| encode(&entry))
            .transpose()?;
        (&self.inner.outbox, &self.inner.pending)
            .transaction(|(outbox, pending)| {
                if let Some(bytes) = &bytes {
                    outbox.insert(&id.to_be_bytes(), bytes.as_slice())?;
                }
                for seq in seqs {
                    pending.remove(&seq.to_be_bytes())?;
                }
                Ok::<_, ConflictableTransactionError<StoreError>>(())
            })
            .map_err(tx_err)?;
        self.flush().await?;
        Ok(id)
    }

    /// Removes pending turns that will never run, durably.
    pub async fn clear_pending(&self, seqs: &[u64]) -> Result<(), StoreError> {
        for seq in seqs {
            self.remove_pending(*seq)?;
        }
        self.flush().await
    }

    /// Appends a message to the session's transcript (creating the session if needed).
    pub fn append_message(&self, key: &str, message: &Message) -> Result<String, StoreError> {
        self.append_creating(key, EntryKind::Message(message.clone()))
    }

    /// Appends a `reset` entry (`/new`, `/reset`): the model window starts after it; nothing
    /// is deleted.
    pub fn append_reset(&self, key: &str, reason: &str) -> Result<(), StoreError> {
        self.append_creating(
            key,
            EntryKind::Reset {
                reason: reason.to_string(),
            },
        )
        .map(|_| ())
    }

    fn append_creating(&self, key: &str, kind: EntryKind) -> Result<String, StoreError> {
        if self.get_session(key)?.is_none() {
            let cwd = std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            self.ensure_session(key, &cwd)?;
        }
        self.append(key, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_channel::{ChatKind, Inbound, Sender};

    fn turn(id: &str) -> PendingTurn {
        PendingTurn {
            session_key: "agent:main:main".into(),
            inbound: Inbound {
                conversation: Conversation {
                    channel: "terminal".into(),
                    account: "default".into(),
                    kind: ChatKind::Direct,
                    chat_id: "me".into(),
                    thread_id: None,
                },
                sender: Sender::default(),
                message_id: id.into(),
                text: "hi".into(),
                reply_to: None,
                mentioned: true,
                timestamp_ms: 1,
                interaction: None,
            },
            queued_ms: 1,
        }
    }

    #[tokio::test]
    async fn a_duplicate_inbound_is_not_queued_twice() {
        let store = Store::temporary().unwrap();
        assert!(
            store
                .enqueue_unique("k1", &turn("1"))
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            store
                .enqueue_unique("k1", &turn("1"))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.all_pending().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn settling_records_the_final_and_clears_pending_together() {
        let store = Store::temporary().unwrap();
        let seq = store
            .enqueue_unique("k1", &turn("1"))
            .await
            .unwrap()
            .unwrap();
        let conv = turn("1").inbound.conversation;
        let id = store
            .settle_turn("run-1", "agent:main:main", &conv, "answer", &[seq])
            .await
            .unwrap();
        assert!(store.all_pending().unwrap().is_empty());
        let undelivered = store.undelivered().unwrap();
        assert_eq!(undelivered.len(), 1);
        assert_eq!(undelivered[0].id, id);
        store.mark_delivered(id).unwrap();
        assert!(store.undelivered().unwrap().is_empty());
    }

    #[tokio::test]
    async fn settling_a_silent_final_clears_pending_and_records_nothing() {
        let store = Store::temporary().unwrap();
        let seq = store
            .enqueue_unique("k1", &turn("1"))
            .await
            .unwrap()
            .unwrap();
        let conv = turn("1").inbound.conversation;
        store
            .settle_turn("run-1", "agent:main:main", &conv, " ", &[seq])
            .await
            .unwrap();
        assert!(store.all_pending().unwrap().is_empty());
        assert_eq!(store.outbox_len(), 0);
    }
}
