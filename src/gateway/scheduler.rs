//! The gateway's side of the cron stage: fired runs go through intake's durable queue, and
//! the scheduler starts after the config's jobs are seeded.

use std::sync::{Arc, Weak};

use chela_channel::BoxFuture;

use super::Core;
use crate::cron::{CronError, Fire, Scheduler, SystemClock};
use crate::store::PendingTurn;

/// The gateway's [`Fire`]: intake's durable queue and the lanes.
pub(super) struct IntakeFire(pub Weak<Core>);

impl Fire for IntakeFire {
    fn fire<'a>(
        &'a self,
        dedupe: &'a str,
        turn: PendingTurn,
    ) -> BoxFuture<'a, Result<Option<u64>, CronError>> {
        Box::pin(async move {
            let core = self
                .0
                .upgrade()
                .ok_or_else(|| CronError::Queue("the gateway is shutting down".into()))?;
            crate::intake::enqueue_keyed(&core.intake, turn, dedupe)
                .await
                .map_err(|e| CronError::Queue(e.to_string()))
        })
    }
}

/// Seeds `[[cron]]` and `[heartbeat]` (errors are logged: the gateway runs without them) and
/// starts the scheduler; `shared` when several nodes run one (each run's dedupe key makes
/// one node's enqueue win).
pub(super) async fn start(core: &Arc<Core>, shared: bool) {
    let now = crate::domain::message::now_ms();
    if let Err(e) = crate::cron::jobs::seed_from(&core.store, &core.config, now).await {
        tracing::error!(error = %e, "cron: cannot seed the config's jobs");
    }
    let scheduler = Scheduler::new(
        core.store.clone(),
        Arc::new(SystemClock),
        Arc::new(IntakeFire(Arc::downgrade(core))),
        core.cron_wake.clone(),
    );
    let scheduler = match shared {
        true => scheduler.shared(),
        false => scheduler,
    };
    tokio::spawn(scheduler.run(core.shutdown.clone()));
}
