//! The scheduler's [`Fire`] in a running gateway: intake's durable queue, which dedupes by
//! the run's key and hands the turn to where its session runs.

use std::sync::Weak;

use chela_channel::BoxFuture;

use super::{CronError, Fire};
use crate::intake::Intake;
use crate::store::PendingTurn;

/// Fires runs into intake (weakly held: the scheduler must not keep a stopped gateway's
/// stages alive).
pub struct IntakeFire(Weak<Intake>);

impl IntakeFire {
    /// Fires into `intake`.
    pub fn new(intake: Weak<Intake>) -> Self {
        IntakeFire(intake)
    }
}

impl Fire for IntakeFire {
    fn fire<'a>(
        &'a self,
        dedupe: &'a str,
        turn: PendingTurn,
    ) -> BoxFuture<'a, Result<Option<u64>, CronError>> {
        Box::pin(async move {
            let intake = self
                .0
                .upgrade()
                .ok_or_else(|| CronError::Queue("the gateway is shutting down".into()))?;
            crate::intake::enqueue_keyed(&intake, turn, dedupe)
                .await
                .map_err(|e| CronError::Queue(e.to_string()))
        })
    }
}
