//! Scheduled jobs (`cron_jobs`: id, next run, JSON [`CronJob`]).

use super::conn::Conn;
use super::{PgStore, big, pg_err, transaction};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{CronJob, CronStore, StoreFuture};

/// Writes `job` on `c` (insert or replace).
async fn put(c: &Conn, job: &CronJob) -> Result<(), StoreError> {
    let next = job.next_ms.map(big);
    c.execute(
        "INSERT INTO cron_jobs (id, next_ms, job) VALUES ($1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET next_ms = EXCLUDED.next_ms, job = EXCLUDED.job",
        &[&job.id, &next, &encode(job)?],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

impl CronStore for PgStore {
    fn put_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, ()> {
        let job = job.clone();
        Box::pin(self.call(move |c| async move { put(&c, &job).await }))
    }

    fn add_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, bool> {
        let job = job.clone();
        Box::pin(self.call(move |c| async move {
            let next = job.next_ms.map(big);
            let added = c
                .execute(
                    "INSERT INTO cron_jobs (id, next_ms, job) VALUES ($1, $2, $3) \
                     ON CONFLICT (id) DO NOTHING",
                    &[&job.id, &next, &encode(&job)?],
                )
                .await
                .map_err(pg_err)?;
            Ok(added == 1)
        }))
    }

    fn cron_job(&self, id: &str) -> Result<Option<CronJob>, StoreError> {
        let id = id.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt("SELECT job FROM cron_jobs WHERE id = $1", &[&id])
                .await
                .map_err(pg_err)?;
            row.map(|r| decode("cron", r.get::<_, &[u8]>(0)))
                .transpose()
        })
    }

    fn cron_jobs(&self) -> Result<Vec<CronJob>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c
                .query("SELECT job FROM cron_jobs ORDER BY id", &[])
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| decode("cron", r.get::<_, &[u8]>(0)))
                .collect()
        })
    }

    fn remove_cron<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        Box::pin(self.call(move |c| async move {
            let n = c
                .execute("DELETE FROM cron_jobs WHERE id = $1", &[&id])
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        }))
    }

    fn advance_cron<'a>(
        &'a self,
        id: &'a str,
        due_ms: u64,
        next_ms: Option<u64>,
        fired: bool,
    ) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        Box::pin(self.call(move |c| async move {
            transaction(&c, async |c: &Conn| {
                // The row lock makes concurrent callers (other nodes) wait and then see the
                // job already moved on.
                let row = c
                    .query_opt(
                        "SELECT job FROM cron_jobs WHERE id = $1 AND next_ms = $2 FOR UPDATE",
                        &[&id, &big(due_ms)],
                    )
                    .await
                    .map_err(pg_err)?;
                let Some(row) = row else {
                    return Ok(false);
                };
                let job: CronJob = decode("cron", row.get::<_, &[u8]>(0))?;
                match job.advanced(due_ms, next_ms, fired) {
                    None => Ok(false),
                    Some(None) => {
                        c.execute("DELETE FROM cron_jobs WHERE id = $1", &[&id])
                            .await
                            .map_err(pg_err)?;
                        Ok(true)
                    }
                    Some(Some(job)) => put(c, &job).await.map(|()| true),
                }
            })
            .await
        }))
    }
}
