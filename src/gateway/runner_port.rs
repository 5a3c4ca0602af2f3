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

    fn hold(&self, key: &str, turn: &QueuedTurn) -> crate::lane::Hold {
        match self.placement.cluster() {
            Some(cluster) => cluster.lane_hold(&self.store, key, turn),
            None => crate::lane::Hold::Go,
        }
    }

    fn give_back(&self, key: &str, seqs: &[u64]) {
        if let Some(cluster) = self.placement.cluster() {
            cluster.give_back(key, seqs);
        }
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
