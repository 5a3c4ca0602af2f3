//! Scheduled jobs (`cron`: id -> JSON [`CronJob`]).

use super::{CRON, RedbStore, db_err, get};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{CronJob, CronStore, StoreFuture};

impl CronStore for RedbStore {
    fn put_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.insert(CRON, job.id.as_bytes(), &encode(job)?)?;
            self.sync().await
        })
    }

    fn add_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let added = self.write(|tx| {
                let mut table = tx.open_table(CRON).map_err(db_err)?;
                if get(&table, job.id.as_bytes())?.is_some() {
                    return Ok(false);
                }
                table
                    .insert(job.id.as_bytes(), encode(job)?.as_slice())
                    .map_err(db_err)?;
                Ok(true)
            })?;
            self.sync().await?;
            Ok(added)
        })
    }

    fn cron_job(&self, id: &str) -> Result<Option<CronJob>, StoreError> {
        self.get(CRON, id.as_bytes())?
            .map(|v| decode("cron", &v))
            .transpose()
    }

    fn cron_jobs(&self) -> Result<Vec<CronJob>, StoreError> {
        self.scan(CRON, &[])?
            .iter()
            .map(|(_, v)| decode("cron", v))
            .collect()
    }

    fn remove_cron<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let old = self.remove(CRON, id.as_bytes())?;
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
            let changed = self.write(|tx| {
                let mut table = tx.open_table(CRON).map_err(db_err)?;
                let Some(bytes) = get(&table, id.as_bytes())? else {
                    return Ok(false);
                };
                let job: CronJob = decode("cron", &bytes)?;
                match job.advanced(due_ms, next_ms, fired) {
                    None => Ok(false),
                    Some(None) => {
                        table.remove(id.as_bytes()).map_err(db_err)?;
                        Ok(true)
                    }
                    Some(Some(job)) => {
                        table
                            .insert(id.as_bytes(), encode(&job)?.as_slice())
                            .map_err(db_err)?;
                        Ok(true)
                    }
                }
            })?;
            self.sync().await?;
            Ok(changed)
        })
    }
}
