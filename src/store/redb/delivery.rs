//! The outbox of finals (`outbox`, `outbox_dead`: id -> [`OutboxEntry`]) and the reply
//! journal (`reply_journal`: run id -> [`ReplyJournal`]).

use chela_channel::Conversation;
use redb::ReadableTableMetadata;

use super::queue::put;
use super::{OUTBOX, OUTBOX_DEAD, REPLY_JOURNAL, RedbStore, be_u64, db_err, get, next_id};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{DeliveryStore, OutboxEntry, ReplyJournal, StoreFuture};

impl DeliveryStore for RedbStore {
    fn record_final<'a>(
        &'a self,
        session_key: &'a str,
        conversation: &'a Conversation,
        text: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let id = self.write(|tx| {
                let id = next_id(tx)?;
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
                put(tx, OUTBOX, &id.to_be_bytes(), &encode(&entry)?)?;
                Ok(id)
            })?;
            self.sync().await?;
            Ok(id)
        })
    }

    fn note_attempt(&self, id: u64) -> Result<Option<u32>, StoreError> {
        let key = id.to_be_bytes();
        self.write(|tx| {
            let mut outbox = tx.open_table(OUTBOX).map_err(db_err)?;
            let Some(v) = get(&outbox, &key)? else {
                return Ok(None);
            };
            let mut entry: OutboxEntry = decode("outbox", &v)?;
            entry.attempts += 1;
            outbox
                .insert(&key[..], encode(&entry)?.as_slice())
                .map_err(db_err)?;
            Ok(Some(entry.attempts))
        })
    }

    fn mark_delivered(&self, id: u64) -> Result<bool, StoreError> {
        Ok(self.remove(OUTBOX, &id.to_be_bytes())?.is_some())
    }

    fn outbox_len(&self) -> usize {
        self.read(|tx| tx.open_table(OUTBOX).map_err(db_err)?.len().map_err(db_err))
            .map_or(0, |n| n as usize)
    }

    fn undelivered(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        let mut out = self.read_all(OUTBOX, "outbox")?;
        out.retain(|e| !e.delivered);
        Ok(out)
    }

    fn prune_delivered(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        let old: Vec<u64> = self
            .read_all(OUTBOX, "outbox")?
            .into_iter()
            .filter(|e| e.delivered && e.created_ms < older_than_ms)
            .map(|e| e.id)
            .collect();
        self.write(|tx| {
            let mut outbox = tx.open_table(OUTBOX).map_err(db_err)?;
            for id in &old {
                outbox.remove(&id.to_be_bytes()[..]).map_err(db_err)?;
            }
            Ok(old.len())
        })
    }

    fn dead_letter(&self, id: u64) -> Result<bool, StoreError> {
        let key = id.to_be_bytes();
        self.write(|tx| {
            let removed = tx
                .open_table(OUTBOX)
                .map_err(db_err)?
                .remove(&key[..])
                .map_err(db_err)?
                .map(|v| v.value().to_vec());
            let Some(v) = removed else {
                return Ok(false);
            };
            put(tx, OUTBOX_DEAD, &key, &v)?;
            Ok(true)
        })
    }

    fn dead_letters(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.read_all(OUTBOX_DEAD, "outbox_dead")
    }

    fn revive_dead_letter(&self, id: u64, now_ms: u64) -> StoreFuture<'_, Option<OutboxEntry>> {
        Box::pin(async move {
            let key = id.to_be_bytes();
            let revived = self.write(|tx| {
                let removed = tx
                    .open_table(OUTBOX_DEAD)
                    .map_err(db_err)?
                    .remove(&key[..])
                    .map_err(db_err)?
                    .map(|v| v.value().to_vec());
                let Some(v) = removed else {
                    return Ok(None);
                };
                let entry = decode::<OutboxEntry>("outbox_dead", &v)?.revived(now_ms);
                put(tx, OUTBOX, &key, &encode(&entry)?)?;
                Ok(Some(entry))
            })?;
            self.sync().await?;
            Ok(revived)
        })
    }

    fn drop_dead_letter(&self, id: u64) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let removed = self.remove(OUTBOX_DEAD, &id.to_be_bytes())?.is_some();
            self.sync().await?;
            Ok(removed)
        })
    }

    fn journal_sent<'a>(
        &'a self,
        run: &'a str,
        to: &'a Conversation,
        message_id: &'a str,
        durable: bool,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.write(|tx| {
                let mut table = tx.open_table(REPLY_JOURNAL).map_err(db_err)?;
                let mut journal = match get(&table, run.as_bytes())? {
                    Some(bytes) => decode("reply_journal", &bytes)?,
                    None => ReplyJournal {
                        conversation: to.clone(),
                        messages: Vec::new(),
                    },
                };
                if !journal.messages.iter().any(|m| m == message_id) {
                    journal.messages.push(message_id.to_owned());
                }
                table
                    .insert(run.as_bytes(), encode(&journal)?.as_slice())
                    .map_err(db_err)?;
                Ok(())
            })?;
            if durable {
                self.sync().await?;
            }
            Ok(())
        })
    }

    fn journal(&self, run: &str) -> Result<Option<ReplyJournal>, StoreError> {
        match self.get(REPLY_JOURNAL, run.as_bytes())? {
            Some(bytes) => Ok(Some(decode("reply_journal", &bytes)?)),
            None => Ok(None),
        }
    }

    fn all_journals(&self) -> Result<Vec<(String, ReplyJournal)>, StoreError> {
        let mut out = Vec::new();
        for (key, bytes) in self.scan(REPLY_JOURNAL, &[])? {
            let run = String::from_utf8_lossy(&key).into_owned();
            match decode("reply_journal", &bytes) {
                Ok(journal) => out.push((run, journal)),
                Err(e) => {
                    tracing::warn!(error = %e, run_id = %run, "skipping an unreadable reply journal")
                }
            }
        }
        Ok(out)
    }

    fn forget_journal(&self, run: &str) -> Result<(), StoreError> {
        self.remove(REPLY_JOURNAL, run.as_bytes()).map(|_| ())
    }

    /// Drops `taken` from the journal of `run`; an emptied journal is removed. An unreadable
    /// journal is left as it is.
    fn journal_taken_back(&self, run: &str, taken: &[String]) -> Result<(), StoreError> {
        self.write(|tx| {
            let mut table = tx.open_table(REPLY_JOURNAL).map_err(db_err)?;
            let Some(bytes) = get(&table, run.as_bytes())? else {
                return Ok(());
            };
            let Ok(mut journal) = decode::<ReplyJournal>("reply_journal", &bytes) else {
                return Ok(());
            };
            journal.messages.retain(|m| !taken.contains(m));
            if journal.messages.is_empty() {
                table.remove(run.as_bytes()).map_err(db_err)?;
            } else {
                table
                    .insert(run.as_bytes(), encode(&journal)?.as_slice())
                    .map_err(db_err)?;
            }
            Ok(())
        })
    }
}

impl RedbStore {
    /// Every outbox entry of `table`, by id.
    fn read_all(
        &self,
        table: super::Bytes,
        name: &'static str,
    ) -> Result<Vec<OutboxEntry>, StoreError> {
        self.scan(table, &[])?
            .iter()
            .map(|(k, v)| {
                be_u64(name, k)?;
                decode(name, v)
            })
            .collect()
    }
}
