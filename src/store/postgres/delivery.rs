//! [`DeliveryStore`] over PostgreSQL: `outbox` (id -> entry, with its delivery state and
//! attempt count as columns), `dead_letters`, and `reply_journal` (run id -> journal).

use chela_channel::Conversation;
use tokio_postgres::Row;

use super::conn::Conn;

use super::{PgStore, big, pg_err, transaction, unbig};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{DeliveryStore, OutboxEntry, ReplyJournal, StoreFuture};

/// Records `entry` in the outbox (its id set).
pub(super) async fn insert_outbox(c: &Conn, entry: &OutboxEntry) -> Result<(), StoreError> {
    let bytes = encode(entry)?;
    c.execute(
        "INSERT INTO outbox (id, created_ms, delivered, attempts, entry) VALUES ($1, $2, $3, $4, $5)",
        &[
            &big(entry.id),
            &big(entry.created_ms),
            &entry.delivered,
            &i32::try_from(entry.attempts).unwrap_or(i32::MAX),
            &bytes,
        ],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

/// A row of `id, delivered, attempts, entry` as an entry (the columns win over the JSON).
fn entry_of(collection: &'static str, row: &Row) -> Result<OutboxEntry, StoreError> {
    let mut entry: OutboxEntry = decode(collection, row.get::<_, &[u8]>(3))?;
    entry.id = unbig(row.get(0));
    entry.delivered = row.get(1);
    entry.attempts = u32::try_from(row.get::<_, i32>(2)).unwrap_or(0);
    Ok(entry)
}

/// The journal of run `run`, if any.
async fn journal_of(c: &Conn, run: &str, lock: bool) -> Result<Option<ReplyJournal>, StoreError> {
    let sql = if lock {
        "SELECT journal FROM reply_journal WHERE run_id = $1 FOR UPDATE"
    } else {
        "SELECT journal FROM reply_journal WHERE run_id = $1"
    };
    let row = c.query_opt(sql, &[&run]).await.map_err(pg_err)?;
    row.map(|r| decode("reply_journal", r.get::<_, &[u8]>(0)))
        .transpose()
}

/// Replaces (or with `None` removes) the journal of run `run`.
async fn put_journal(
    c: &Conn,
    run: &str,
    journal: Option<&ReplyJournal>,
) -> Result<(), StoreError> {
    match journal {
        Some(journal) => {
            let bytes = encode(journal)?;
            c.execute(
                "INSERT INTO reply_journal (run_id, journal) VALUES ($1, $2) \
                 ON CONFLICT (run_id) DO UPDATE SET journal = EXCLUDED.journal",
                &[&run, &bytes],
            )
            .await
        }
        None => {
            c.execute("DELETE FROM reply_journal WHERE run_id = $1", &[&run])
                .await
        }
    }
    .map_err(pg_err)?;
    Ok(())
}

impl DeliveryStore for PgStore {
    fn record_final<'a>(
        &'a self,
        session_key: &'a str,
        conversation: &'a Conversation,
        text: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, u64> {
        let mut entry = OutboxEntry {
            id: 0,
            session_key: session_key.to_string(),
            conversation: conversation.clone(),
            text: text.to_string(),
            created_ms: now_ms,
            delivered: false,
            attempts: 0,
            run_id: None,
        };
        Box::pin(self.call(move |c| async move {
            let row = c
                .query_one("SELECT nextval('chela_ids')", &[])
                .await
                .map_err(pg_err)?;
            entry.id = unbig(row.get(0));
            insert_outbox(&c, &entry).await?;
            Ok(entry.id)
        }))
    }

    fn note_attempt(&self, id: u64) -> Result<Option<u32>, StoreError> {
        let node = self.node();
        self.blocking(move |c| async move {
            if let Some(node) = node {
                // A cluster node sends only the finals of the sessions it holds.
                let row = c
                    .query_opt("SELECT entry FROM outbox WHERE id = $1", &[&big(id)])
                    .await
                    .map_err(pg_err)?;
                let Some(row) = row else { return Ok(None) };
                let entry: OutboxEntry = decode("outbox", row.get(0))?;
                super::cluster::check_lease(&c, &node, &entry.session_key).await?;
            }
            let row = c
                .query_opt(
                    "UPDATE outbox SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts",
                    &[&big(id)],
                )
                .await
                .map_err(pg_err)?;
            Ok(row.map(|r| u32::try_from(r.get::<_, i32>(0)).unwrap_or(0)))
        })
    }

    fn mark_delivered(&self, id: u64) -> Result<bool, StoreError> {
        self.blocking(move |c| async move {
            let n = c
                .execute("DELETE FROM outbox WHERE id = $1", &[&big(id)])
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        })
    }

    fn outbox_len(&self) -> usize {
        let counted = self.blocking(move |c| async move {
            let row = c
                .query_one("SELECT count(*) FROM outbox", &[])
                .await
                .map_err(pg_err)?;
            Ok(usize::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        });
        counted.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "store: cannot count the outbox");
            0
        })
    }

    fn undelivered(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT id, delivered, attempts, entry FROM outbox WHERE NOT delivered ORDER BY id",
                    &[],
                )
                .await
                .map_err(pg_err)?;
            rows.iter().map(|r| entry_of("outbox", r)).collect()
        })
    }

    fn prune_delivered(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        self.blocking(move |c| async move {
            let n = c
                .execute(
                    "DELETE FROM outbox WHERE delivered AND created_ms < $1",
                    &[&big(older_than_ms)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n as usize)
        })
    }

    fn dead_letter(&self, id: u64) -> Result<bool, StoreError> {
        self.blocking(move |c| async move {
            let n = c
                .execute(
                    "WITH moved AS (DELETE FROM outbox WHERE id = $1 \
                     RETURNING id, attempts, delivered, entry) \
                     INSERT INTO dead_letters (id, attempts, delivered, entry) \
                     SELECT id, attempts, delivered, entry FROM moved \
                     ON CONFLICT (id) DO NOTHING",
                    &[&big(id)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        })
    }

    fn dead_letters(&self) -> Result<Vec<OutboxEntry>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT id, delivered, attempts, entry FROM dead_letters ORDER BY id",
                    &[],
                )
                .await
                .map_err(pg_err)?;
            rows.iter().map(|r| entry_of("outbox_dead", r)).collect()
        })
    }

    fn revive_dead_letter(&self, id: u64, now_ms: u64) -> StoreFuture<'_, Option<OutboxEntry>> {
        Box::pin(self.call(move |c| async move {
            transaction(&c, async |c: &Conn| {
                let row = c
                    .query_opt(
                        "DELETE FROM dead_letters WHERE id = $1 \
                         RETURNING id, delivered, attempts, entry",
                        &[&big(id)],
                    )
                    .await
                    .map_err(pg_err)?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let entry = entry_of("outbox_dead", &row)?.revived(now_ms);
                insert_outbox(c, &entry).await?;
                Ok(Some(entry))
            })
            .await
        }))
    }

    fn drop_dead_letter(&self, id: u64) -> StoreFuture<'_, bool> {
        Box::pin(self.call(move |c| async move {
            let n = c
                .execute("DELETE FROM dead_letters WHERE id = $1", &[&big(id)])
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        }))
    }

    fn journal_sent<'a>(
        &'a self,
        run: &'a str,
        to: &'a Conversation,
        message_id: &'a str,
        _durable: bool,
    ) -> StoreFuture<'a, ()> {
        let (run, to, message) = (run.to_owned(), to.clone(), message_id.to_owned());
        Box::pin(self.call(move |c| async move {
            transaction(&c, async |c: &Conn| {
                // The first noter creates the row; later ones (any node) wait on its lock.
                let fresh = ReplyJournal {
                    conversation: to,
                    messages: Vec::new(),
                };
                c.execute(
                    "INSERT INTO reply_journal (run_id, journal) VALUES ($1, $2) \
                     ON CONFLICT (run_id) DO NOTHING",
                    &[&run, &encode(&fresh)?],
                )
                .await
                .map_err(pg_err)?;
                let mut journal = journal_of(c, &run, true).await?.unwrap_or(fresh);
                if !journal.messages.contains(&message) {
                    journal.messages.push(message);
                }
                put_journal(c, &run, Some(&journal)).await
            })
            .await
        }))
    }

    fn journal(&self, run: &str) -> Result<Option<ReplyJournal>, StoreError> {
        let run = run.to_owned();
        self.blocking(move |c| async move { journal_of(&c, &run, false).await })
    }

    fn all_journals(&self) -> Result<Vec<(String, ReplyJournal)>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query("SELECT run_id, journal FROM reply_journal ORDER BY run_id", &[])
                .await
                .map_err(pg_err)?;
            let mut out = Vec::new();
            for row in &rows {
                let run: String = row.get(0);
                match decode("reply_journal", row.get::<_, &[u8]>(1)) {
                    Ok(journal) => out.push((run, journal)),
                    Err(e) => {
                        tracing::warn!(error = %e, run_id = %run, "skipping an unreadable reply journal")
                    }
                }
            }
            Ok(out)
        })
    }

    fn forget_journal(&self, run: &str) -> Result<(), StoreError> {
        let run = run.to_owned();
        self.blocking(move |c| async move { put_journal(&c, &run, None).await })
    }

    fn journal_taken_back(&self, run: &str, taken: &[String]) -> Result<(), StoreError> {
        let (run, taken) = (run.to_owned(), taken.to_vec());
        self.blocking(move |c| async move {
            transaction(&c, async |c: &Conn| {
                let Some(mut journal) = journal_of(c, &run, true).await? else {
                    return Ok(());
                };
                journal.messages.retain(|m| !taken.contains(m));
                let keep = (!journal.messages.is_empty()).then_some(&journal);
                put_journal(c, &run, keep).await
            })
            .await
        })
    }
}
