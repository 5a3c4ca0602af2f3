//! [`QueueStore`] over PostgreSQL: `pending` (seq -> turn), `dedupe` (key -> first seen),
//! `finished` (seq -> run record). Accepting a turn is one statement (the dedupe insert feeds
//! the pending insert), so of concurrent callers, here or on another node, exactly one wins;
//! settling a turn is one transaction over `outbox`, `pending` and `finished`.

use super::conn::Conn;
use chela_channel::Conversation;

use super::{PgStore, big, bigs, pg_err, transaction, unbig};
use crate::domain::run::RunRecord;
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{OutboxEntry, PendingTurn, QueueStore, StoreFuture};

/// Queues an encoded turn of `session_key` under `dedupe_key` unless that key was seen;
/// returns its seq. One statement: atomic.
pub(super) async fn enqueue_marked(
    c: &Conn,
    dedupe_key: &str,
    session_key: &str,
    turn: &[u8],
) -> Result<Option<u64>, StoreError> {
    let now = big(crate::domain::message::now_ms());
    let row = c
        .query_opt(
            "WITH mark AS (INSERT INTO dedupe (key, seen_ms) VALUES ($1, $2) \
             ON CONFLICT (key) DO NOTHING RETURNING 1) \
             INSERT INTO pending (seq, session_key, turn) \
             SELECT nextval('chela_ids'), $3, $4 FROM mark RETURNING seq",
            &[&dedupe_key, &now, &session_key, &turn],
        )
        .await
        .map_err(pg_err)?;
    Ok(row.map(|r| unbig(r.get(0))))
}

/// Queues an encoded turn of `session_key`; returns its seq.
pub(super) async fn enqueue_plain(
    c: &Conn,
    session_key: &str,
    turn: &[u8],
) -> Result<u64, StoreError> {
    let row = c
        .query_one(
            "INSERT INTO pending (seq, session_key, turn) \
             VALUES (nextval('chela_ids'), $1, $2) RETURNING seq",
            &[&session_key, &turn],
        )
        .await
        .map_err(pg_err)?;
    Ok(unbig(row.get(0)))
}

/// Removes the pending turns `seqs` and, given one, keeps `record` for each.
async fn settle_seqs(
    c: &Conn,
    seqs: &[i64],
    record: Option<(i64, &[u8])>,
) -> Result<u64, StoreError> {
    let removed = c
        .execute("DELETE FROM pending WHERE seq = ANY($1)", &[&seqs])
        .await
        .map_err(pg_err)?;
    if let Some((ended, record)) = record {
        c.execute(
            "INSERT INTO finished (seq, ended_ms, run) SELECT s, $2, $3 FROM unnest($1::bigint[]) s \
             ON CONFLICT (seq) DO UPDATE SET ended_ms = EXCLUDED.ended_ms, run = EXCLUDED.run",
            &[&seqs, &ended, &record],
        )
        .await
        .map_err(pg_err)?;
    }
    Ok(removed)
}

impl QueueStore for PgStore {
    fn enqueue<'a>(&'a self, turn: &'a PendingTurn) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let (bytes, key) = (encode(turn)?, turn.session_key.clone());
            self.call(move |c| async move { enqueue_plain(&c, &key, &bytes).await })
                .await
        })
    }

    fn enqueue_unique<'a>(
        &'a self,
        dedupe_key: &'a str,
        turn: &'a PendingTurn,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let (bytes, key) = (encode(turn)?, turn.session_key.clone());
            let mark = dedupe_key.to_owned();
            let clustered = self.node().is_some();
            self.call(move |c| async move {
                let seq = enqueue_marked(&c, &mark, &key, &bytes).await?;
                if clustered && seq.is_some() {
                    // Committed: the owner of the session's partition reads it when woken.
                    super::cluster::wake(&c, &key).await?;
                }
                Ok(seq)
            })
            .await
        })
    }

    fn remove_pending(&self, seq: u64) -> Result<bool, StoreError> {
        self.blocking(move |c| async move {
            let n = c
                .execute("DELETE FROM pending WHERE seq = $1", &[&big(seq)])
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        })
    }

    fn clear_pending<'a>(&'a self, seqs: &'a [u64]) -> StoreFuture<'a, ()> {
        let seqs = bigs(seqs);
        Box::pin(self.call(move |c| async move {
            c.execute("DELETE FROM pending WHERE seq = ANY($1)", &[&seqs])
                .await
                .map_err(pg_err)?;
            Ok(())
        }))
    }

    fn is_pending(&self, seq: u64) -> Result<bool, StoreError> {
        self.blocking(move |c| async move {
            let row = c
                .query_opt("SELECT 1 FROM pending WHERE seq = $1", &[&big(seq)])
                .await
                .map_err(pg_err)?;
            Ok(row.is_some())
        })
    }

    fn all_pending(&self) -> Result<Vec<(u64, PendingTurn)>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query("SELECT seq, turn FROM pending ORDER BY seq", &[])
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| Ok((unbig(r.get(0)), decode("pending", r.get::<_, &[u8]>(1))?)))
                .collect()
        })
    }

    fn pending_count(&self) -> Result<u64, StoreError> {
        self.blocking(move |c| async move {
            let row = c
                .query_one("SELECT count(*) FROM pending", &[])
                .await
                .map_err(pg_err)?;
            Ok(unbig(row.get(0)))
        })
    }

    fn pending_for(&self, key: &str) -> Result<Vec<(u64, PendingTurn)>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT seq, turn FROM pending WHERE session_key = $1 ORDER BY seq",
                    &[&key],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| Ok((unbig(r.get(0)), decode("pending", r.get::<_, &[u8]>(1))?)))
                .collect()
        })
    }

    fn settle_turn<'a>(
        &'a self,
        run: &'a RunRecord,
        keep_record: bool,
        conversation: &'a Conversation,
        text: &'a str,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let mut entry = OutboxEntry {
                id: 0,
                session_key: run.session_key.clone(),
                conversation: conversation.clone(),
                text: text.to_string(),
                created_ms: crate::domain::message::now_ms(),
                delivered: false,
                attempts: 0,
                run_id: Some(run.run_id.clone()),
            };
            let send = !text.trim().is_empty();
            let record = keep_record.then(|| encode(run)).transpose()?;
            let (seqs, ended) = (bigs(&run.seqs), big(run.ended_ms));
            let fence = self.node().map(|node| (node, run.session_key.clone()));
            self.call(move |c| async move {
                transaction(&c, async |c: &Conn| {
                    if let Some((node, session)) = &fence {
                        super::cluster::check_lease(c, node, session).await?;
                    }
                    let row = c
                        .query_one("SELECT nextval('chela_ids')", &[])
                        .await
                        .map_err(pg_err)?;
                    entry.id = unbig(row.get(0));
                    // Nothing to send counts as delivered: no record.
                    if send {
                        super::delivery::insert_outbox(c, &entry).await?;
                    }
                    let record = record.as_deref().map(|r| (ended, r));
                    let removed = settle_seqs(c, &seqs, record).await?;
                    // On a cluster a turn is answered once: when none of its messages was
                    // still pending, another run answered them, and this final is dropped
                    // (the transaction, its outbox entry included, rolls back).
                    if let Some((_, session)) =
                        fence.as_ref().filter(|_| removed == 0 && !seqs.is_empty())
                    {
                        return Err(StoreError::AlreadySettled {
                            session: session.clone(),
                        });
                    }
                    Ok(entry.id)
                })
                .await
            })
            .await
        })
    }

    fn finish_run<'a>(&'a self, run: &'a RunRecord, keep_record: bool) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let record = keep_record.then(|| encode(run)).transpose()?;
            let (seqs, ended) = (bigs(&run.seqs), big(run.ended_ms));
            self.call(move |c| async move {
                transaction(&c, async |c: &Conn| {
                    settle_seqs(c, &seqs, record.as_deref().map(|r| (ended, r)))
                        .await
                        .map(|_| ())
                })
                .await
            })
            .await
        })
    }

    fn keep_run_record(&self, run: &RunRecord) -> Result<(), StoreError> {
        let record = encode(run)?;
        let (seqs, ended) = (bigs(&run.seqs), big(run.ended_ms));
        self.blocking(move |c| async move {
            c.execute(
                "INSERT INTO finished (seq, ended_ms, run) SELECT s, $2, $3 FROM unnest($1::bigint[]) s \
                 ON CONFLICT (seq) DO UPDATE SET ended_ms = EXCLUDED.ended_ms, run = EXCLUDED.run",
                &[&seqs, &ended, &record],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        })
    }

    fn finished_run(&self, seq: u64) -> Result<Option<RunRecord>, StoreError> {
        self.blocking(move |c| async move {
            let row = c
                .query_opt("SELECT run FROM finished WHERE seq = $1", &[&big(seq)])
                .await
                .map_err(pg_err)?;
            row.map(|r| decode("finished", r.get::<_, &[u8]>(0)))
                .transpose()
        })
    }

    fn prune_finished(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        self.blocking(move |c| async move {
            let n = c
                .execute(
                    "DELETE FROM finished WHERE ended_ms < $1",
                    &[&big(older_than_ms)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n as usize)
        })
    }

    fn mark_seen(&self, dedupe_key: &str, now_ms: u64) -> Result<bool, StoreError> {
        let key = dedupe_key.to_owned();
        self.blocking(move |c| async move {
            let n = c
                .execute(
                    "INSERT INTO dedupe (key, seen_ms) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                    &[&key, &big(now_ms)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n == 1)
        })
    }

    fn prune_seen(&self, older_than_ms: u64) -> Result<usize, StoreError> {
        self.blocking(move |c| async move {
            let n = c
                .execute(
                    "DELETE FROM dedupe WHERE seen_ms < $1",
                    &[&big(older_than_ms)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n as usize)
        })
    }

    fn forget_seen(&self, dedupe_key: &str) -> Result<bool, StoreError> {
        let key = dedupe_key.to_owned();
        self.blocking(move |c| async move {
            let n = c
                .execute("DELETE FROM dedupe WHERE key = $1", &[&key])
                .await
                .map_err(pg_err)?;
            Ok(n == 1)
        })
    }
}
