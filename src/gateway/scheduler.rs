//! The gateway's side of the cron stage: fired runs go through intake's durable queue, and
//! the scheduler starts after the config's jobs are seeded.

use std::sync::Arc;

use super::Core;
use crate::cron::{IntakeFire, Scheduler, SystemClock};

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
        Arc::new(IntakeFire::new(Arc::downgrade(&core.intake))),
        core.cron_wake.clone(),
    );
    let scheduler = match shared {
        true => scheduler.shared(),
        false => scheduler,
    };
    tokio::spawn(scheduler.run(core.shutdown.clone()));
}
