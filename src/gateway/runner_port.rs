//! The gateway's side of the runner stage's port ([`RunnerPort`]): where sessions run, and
//! sub-agents' parents.

use std::sync::Arc;

use super::Core;
use crate::agent::provider::BoxFuture;
use crate::agent::run::RunOutcome;
use crate::cluster::StillHeld;
use crate::lane::QueuedTurn;
use crate::runner::{RunnerPort, subagents};
use crate::store::SubagentLink;

impl RunnerPort for Core {
    fn still_held(&self, key: &str) -> Option<StillHeld> {
        self.placement.still_held(key)
    }

    fn finish_subagent<'a>(
        self: Arc<Self>,
        key: &'a str,
        link: SubagentLink,
        turn: &'a QueuedTurn,
        outcome: &'a RunOutcome,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let placement = &*self.placement;
            subagents::finish(&self.store, placement, key, link, turn, outcome).await
        })
    }
}
