//! The durable queue (`pending`: seq -> [`PendingTurn`]), inbound dedupe (`dedupe`: key ->
//! first seen ms), kept run records (`finished`: seq -> `RunRecord`), and the two
//! exactly-once steps, each one transaction followed by a group-committed flush.

use chela_channel::Conversation;
use redb::{ReadableTableMetadata, WriteTransaction};

use super::{DEDUPE, FINISHED, OUTBOX, PENDING, RedbStore, be_u64, db_err, get, next_id, now_ms};
use crate::domain::run::RunRecord;
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{OutboxEntry, PendingTurn, QueueStore, StoreFuture};

impl QueueStore for RedbStore {
    fn enqueue<'a>(&'a self, turn: &'a PendingTurn) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let bytes = encode(turn)?;
            let seq = self.write(|tx| {
                let seq = next_id(tx)?;
                put(tx, PENDING, &seq.to_be_bytes(), &bytes)?;
                Ok(seq)
            })?;
            self.sync().await?;
            Ok(seq)
        })
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
        Ok(self.remove(PENDING, &seq.to_be_bytes())?.is_some())
    }

    fn clear_pending<'a>(&'a self, seqs: &'a [u64]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.write(|tx| {
                let mut pending = tx.open_table(PENDING).map_err(db_err)?;
                for seq in seqs {
                    pending.remove(&seq.to_be_bytes()[..]).map_err(db_err)?;
                }
                Ok(())
            })?;
            self.sync().await
        })
    }

    fn is_pending(&self, seq: u64) -> Result<bool, StoreError> {
        Ok(self.get(PENDING, &seq.to_be_bytes())?.is_some())
    }

    fn all_pending(&self) -> Result<Vec<(u64, PendingTurn)>, StoreError> {
        self.scan(PENDING, &[])?
            .iter()
            .map(|(k, v)| Ok((be_u64("pending", k)?, decode("pending", v)?)))
            .collect()
    }

    fn pending_count(&self) -> Result<u64, StoreError> {
        self.read(|tx| {
            tx.open_table(PENDING)
                .map_err(db_err)?
                .len()
                .map_err(db_err)
        })
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
            self.write(|tx| settle_seqs(tx, &run.seqs, record.as_deref()))?;
            self.sync().await
        })
    }

    fn keep_run_record(&self, run: &RunRecord) -> Result<(), StoreError> {
        let record = encode(run)?;
        self.write(|tx| {
            for seq in &run.seqs {
                put(tx, FINISHED, &seq.to_be_bytes(), &record)?;
            }
            Ok(())
        })
    }

    fn finished_run(&self, seq: u64) -> Result<Option<RunRecord>, StoreError> {
        match self.get(FINISHED, &seq.to_be_bytes())? {
            Some(bytes) => Ok(Some(decode("finished", &bytes)?)),
            None => Ok(None),
        }
    }

    fn prune_finished(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        self.write(|tx| {
            let mut finished = tx.open_table(FINISHED).map_err(db_err)?;
            let mut pruned = 0;
            finished
                .retain(|_, v| {
                    let ended = decode::<RunRecord>("finished", v).map_or(0, |r| r.ended_ms);
                    let keep = ended >= older_than_ms;
                    pruned += usize::from(!keep);
                    keep
                })
                .map_err(db_err)?;
            Ok(pruned)
        })
    }

    /// A compare and swap: only the first mark of a key is new. A message dated at or before
    /// an accepted rollback's floor counts as seen.
    fn mark_seen(&self, dedupe_key: &str, now_ms: u64) -> Result<bool, StoreError> {
        if self.before_rollback(now_ms) {
            return Ok(false);
        }
        self.write(|tx| mark_new(tx, dedupe_key, now_ms))
    }

    fn prune_seen(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        self.write(|tx| {
            let mut dedupe = tx.open_table(DEDUPE).map_err(db_err)?;
            let mut pruned = 0;
            dedupe
                .retain(|_, v| {
                    let seen = be_u64("dedupe", v).unwrap_or(u64::MAX);
                    let keep = seen >= older_than_ms;
                    pruned += usize::from(!keep);
                    keep
                })
                .map_err(db_err)?;
            Ok(pruned)
        })
    }

    fn forget_seen(&self, dedupe_key: &str) -> Result<bool, StoreError> {
        self.write(|tx| {
            let mut dedupe = tx.open_table(DEDUPE).map_err(db_err)?;
            let removed = dedupe.remove(dedupe_key.as_bytes()).map_err(db_err)?;
            Ok(removed.is_some())
        })
    }
}

impl RedbStore {
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
        let seq = self.write(|tx| {
            if !mark_new(tx, dedupe_key, now_ms())? {
                return Ok(None);
            }
            let seq = next_id(tx)?;
            put(tx, PENDING, &seq.to_be_bytes(), &bytes)?;
            Ok(Some(seq))
        })?;
        if seq.is_some() && durable {
            self.sync().await?;
        }
        Ok(seq)
    }

    /// [`QueueStore::settle_turn`]: one transaction over `outbox`, `pending` and `finished`,
    /// then a flush.
    async fn settle_turn_now(
        &self,
        run: &RunRecord,
        keep_record: bool,
        conversation: &Conversation,
        text: &str,
    ) -> Result<u64, StoreError> {
        let record = keep_record.then(|| encode(run)).transpose()?;
        let id = self.write(|tx| {
            let id = next_id(tx)?;
            // Nothing to send counts as delivered: no record.
            if !text.trim().is_empty() {
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
                put(tx, OUTBOX, &id.to_be_bytes(), &encode(&entry)?)?;
            }
            settle_seqs(tx, &run.seqs, record.as_deref())?;
            Ok(id)
        })?;
        self.sync().await?;
        Ok(id)
    }
}

/// Inside a transaction: sets `key` in `table`.
pub(super) fn put(
    tx: &WriteTransaction,
    table: super::Bytes,
    key: &[u8],
    value: &[u8],
) -> Result<(), StoreError> {
    tx.open_table(table)
        .map_err(db_err)?
        .insert(key, value)
        .map_err(db_err)?;
    Ok(())
}

/// Inside a transaction: marks `dedupe_key` seen at `now_ms` unless it was; returns whether
/// it is new.
pub(super) fn mark_new(
    tx: &WriteTransaction,
    dedupe_key: &str,
    now_ms: u64,
) -> Result<bool, StoreError> {
    let mut dedupe = tx.open_table(DEDUPE).map_err(db_err)?;
    if get(&dedupe, dedupe_key.as_bytes())?.is_some() {
        return Ok(false);
    }
    dedupe
        .insert(dedupe_key.as_bytes(), &now_ms.to_be_bytes()[..])
        .map_err(db_err)?;
    Ok(true)
}

/// Inside a transaction: removes the pending turns `seqs` and, given one, keeps `record` (an
/// encoded `RunRecord`) as the record of each.
fn settle_seqs(
    tx: &WriteTransaction,
    seqs: &[u64],
    record: Option<&[u8]>,
) -> Result<(), StoreError> {
    let mut pending = tx.open_table(PENDING).map_err(db_err)?;
    let mut finished = tx.open_table(FINISHED).map_err(db_err)?;
    for seq in seqs {
        pending.remove(&seq.to_be_bytes()[..]).map_err(db_err)?;
        if let Some(record) = record {
            finished
                .insert(&seq.to_be_bytes()[..], record)
                .map_err(db_err)?;
        }
    }
    Ok(())
}
