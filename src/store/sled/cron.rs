//! Scheduled jobs (`cron`: id -> JSON [`CronJob`]).

use super::{SledStore, abort, db_err, tx_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{CronJob, CronStore, StoreFuture};

impl CronStore for SledStore {
    fn put_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.inner
                .cron
                .insert(job.id.as_bytes(), encode(job)?)
                .map_err(db_err)?;
            self.sync().await
        })
    }

    fn add_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let added = self
                .inner
                .cron
                .compare_and_swap(job.id.as_bytes(), None as Option<&[u8]>, Some(encode(job)?))
                .map_err(db_err)?
                .is_ok();
            self.sync().await?;
            Ok(added)
        })
    }

    fn cron_job(&self, id: &str) -> Result<Option<CronJob>, StoreError> {
        match self.inner.cron.get(id.as_bytes()).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("cron", &bytes)?)),
            None => Ok(None),
        }
    }

    fn cron_jobs(&self) -> Result<Vec<CronJob>, StoreError> {
        self.inner
            .cron
            .iter()
            .map(|kv| {
                let (_, v) = kv.map_err(db_err)?;
                decode("cron", &v)
            })
            .collect()
    }

    fn remove_cron<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let old = self.inner.cron.remove(id.as_bytes()).map_err(db_err)?;
            self.sync().await?;
            Ok(old.is_some())
        })
    }

    fn advance_cron<'a>(
        &'a self,
        id: &'a str,
        due_ms: u64,
        next_ms: Option<u64>,
        fired: bool,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let changed = self
                .inner
                .cron
                .transaction(|t| {
                    let Some(bytes) = t.get(id.as_bytes())? else {
                        return Ok(false);
                    };
                    let job: CronJob = match decode("cron", &bytes) {
                        Ok(job) => job,
                        Err(e) => return abort(e),
                    };
                    match job.advanced(due_ms, next_ms, fired) {
                        None => Ok(false),
                        Some(None) => {
                            t.remove(id.as_bytes())?;
                            Ok(true)
                        }
                        Some(Some(job)) => {
                            let bytes = match encode(&job) {
                                Ok(b) => b,
                                Err(e) => return abort(e),
                            };
                            t.insert(id.as_bytes(), bytes)?;
                            Ok(true)
                        }
                    }
                })
                .map_err(tx_err)?;
            self.sync().await?;
            Ok(changed)
        })
    }
}
