//! [`QueueStore`] over sled, with the gateway's exactly-once steps, each one sled
//! transaction across trees: accepting an inbound (dedupe mark + pending turn) and settling a
//! turn (outbox record + removal of its pending turns). A crash before either step repeats
//! it; after it, the restart finds the work recorded and does not do it twice. The plain
//! queue and dedupe operations are in `pending.rs` and `dedupe.rs`.

use chela_channel::Conversation;
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionalTree};

use super::{SledStore, db_err, now_ms, tx_err};
use crate::domain::run::RunRecord;
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{OutboxEntry, PendingTurn, QueueStore, StoreFuture};

impl QueueStore for SledStore {
    fn enqueue<'a>(&'a self, turn: &'a PendingTurn) -> StoreFuture<'a, u64> {
        Box::pin(self.put_pending(turn))
    }

    fn enqueue_unique<'a>(
        &'a self,
        dedupe_key: &'a str,
        turn: &'a PendingTurn,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(self.enqueue_unique_now(dedupe_key, turn, true))
    }

    fn enqueue_unique_buffered<'a>(
        &'a self,
        dedupe_key: &'a str,
        turn: &'a PendingTurn,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(self.enqueue_unique_now(dedupe_key, turn, false))
    }

    fn remove_pending(&self, seq: u64) -> Result<bool, StoreError> {
        self.drop_pending(seq)
    }

    fn clear_pending<'a>(&'a self, seqs: &'a [u64]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            for seq in seqs {
                self.drop_pending(*seq)?;
            }
            self.sync().await
        })
    }

    fn is_pending(&self, seq: u64) -> Result<bool, StoreError> {
        self.has_pending(seq)
    }

    fn all_pending(&self) -> Result<Vec<(u64, PendingTurn)>, StoreError> {
        self.read_pending()
    }

    fn pending_count(&self) -> Result<u64, StoreError> {
        Ok(self.inner.pending.len() as u64)
    }

    fn settle_turn<'a>(
        &'a self,
        run: &'a RunRecord,
        keep_record: bool,
        conversation: &'a Conversation,
        text: &'a str,
    ) -> StoreFuture<'a, u64> {
        Box::pin(self.settle_turn_now(run, keep_record, conversation, text))
    }

    fn finish_run<'a>(&'a self, run: &'a RunRecord, keep_record: bool) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let record = keep_record.then(|| encode(run)).transpose()?;
            (&self.inner.pending, &self.inner.finished)
                .transaction(|(pending, finished)| {
                    settle_seqs(pending, finished, &run.seqs, record.as_deref())
                })
                .map_err(tx_err)?;
            self.sync().await
        })
    }

    fn keep_run_record(&self, run: &RunRecord) -> Result<(), StoreError> {
        let record = encode(run)?;
        for seq in &run.seqs {
            self.inner
                .finished
                .insert(seq.to_be_bytes(), record.as_slice())
                .map_err(db_err)?;
        }
        Ok(())
    }

    fn finished_run(&self, seq: u64) -> Result<Option<RunRecord>, StoreError> {
        match self.inner.finished.get(seq.to_be_bytes()).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("finished", &bytes)?)),
            None => Ok(None),
        }
    }

    fn prune_finished(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        let mut pruned = 0;
        for item in self.inner.finished.iter() {
            let (key, bytes) = item.map_err(db_err)?;
            let ended = decode::<RunRecord>("finished", &bytes).map_or(0, |r| r.ended_ms);
            if ended < older_than_ms {
                self.inner.finished.remove(key).map_err(db_err)?;
                pruned += 1;
            }
        }
        Ok(pruned)
    }

    fn mark_seen(&self, dedupe_key: &str, now_ms: u64) -> Result<bool, StoreError> {
        self.mark(dedupe_key, now_ms)
    }

    fn prune_seen(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        self.prune_marks(older_than_ms)
    }

    fn forget_seen(&self, dedupe_key: &str) -> Result<bool, StoreError> {
        let removed = self.inner.dedupe.remove(dedupe_key).map_err(db_err)?;
        Ok(removed.is_some())
    }
}

impl SledStore {
    /// [`QueueStore::enqueue_unique`]: one transaction over `dedupe` and `pending`, then a
    /// flush when `durable` (else the next flush takes it along).
    async fn enqueue_unique_now(
        &self,
        dedupe_key: &str,
        turn: &PendingTurn,
        durable: bool,
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
        if durable {
            self.sync().await?;
        }
        Ok(Some(seq))
    }

    /// [`QueueStore::settle_turn`]: one transaction over `outbox` and `pending`, then a flush.
    async fn settle_turn_now(
        &self,
        run: &RunRecord,
        keep_record: bool,
        conversation: &Conversation,
        text: &str,
    ) -> Result<u64, StoreError> {
        let id = self.inner.db.generate_id().map_err(db_err)?;
        let entry = OutboxEntry {
            id,
            session_key: run.session_key.clone(),
            conversation: conversation.clone(),
            text: text.to_string(),
            created_ms: now_ms(),
            delivered: false,
            attempts: 0,
            run_id: Some(run.run_id.clone()),
        };
        // Nothing to send counts as delivered: no record.
        let bytes = (!text.trim().is_empty())
            .then(|| encode(&entry))
            .transpose()?;
        let record = keep_record.then(|| encode(run)).transpose()?;
        (
            &self.inner.outbox,
            &self.inner.pending,
            &self.inner.finished,
        )
            .transaction(|(outbox, pending, finished)| {
                if let Some(bytes) = &bytes {
                    outbox.insert(&id.to_be_bytes(), bytes.as_slice())?;
                }
                settle_seqs(pending, finished, &run.seqs, record.as_deref())
            })
            .map_err(tx_err)?;
        self.sync().await?;
        Ok(id)
    }
}

/// Inside a transaction: removes the pending turns `seqs` and, given one, keeps `record` (an
/// encoded `RunRecord`) as the record of each.
fn settle_seqs(
    pending: &TransactionalTree,
    finished: &TransactionalTree,
    seqs: &[u64],
    record: Option<&[u8]>,
) -> Result<(), ConflictableTransactionError<StoreError>> {
    for seq in seqs {
        pending.remove(&seq.to_be_bytes())?;
        if let Some(record) = record {
            finished.insert(&seq.to_be_bytes(), record)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chela_channel::{ChatKind, Conversation, Inbound, Sender};

    use crate::store::{PendingTurn, Store};

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
                attachments: Vec::new(),
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
            .settle_turn(
                &crate::domain::run::RunRecord::for_test("run-1", "agent:main:main", &[seq]),
                true,
                &conv,
                "answer",
            )
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
            .settle_turn(
                &crate::domain::run::RunRecord::for_test("run-1", "agent:main:main", &[seq]),
                true,
                &conv,
                " ",
            )
            .await
            .unwrap();
        assert!(store.all_pending().unwrap().is_empty());
        assert_eq!(store.outbox_len(), 0);
    }
}
