//! The gateway's side of the cluster's ports: what the partition loops hand over (a queued
//! message to carry out, partitions taken over to recover) and the calls other nodes make.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use chela_channel::BoxFuture;

use super::Core;
use crate::cluster::partitions::Loops;
use crate::cluster::peers::{Body, Envelope};
use crate::cluster::relay::{AnswersCalls, Relay};
use crate::cluster::{Cluster, PartitionWork};
use crate::runner::stop::Stopper;
use crate::store::PendingTurn;

/// Starts this node's loops: the relay of run events and calls, and the partitions.
pub(super) fn start(core: &Arc<Core>, cluster: &Arc<Cluster>) {
    let calls: Weak<dyn AnswersCalls> = Arc::downgrade(core) as Weak<dyn AnswersCalls>;
    crate::cluster::relay::start(Relay {
        cluster: cluster.clone(),
        live: core.live.clone(),
        feed: core.feed.clone(),
        calls,
        shutdown: core.shutdown.clone(),
    });
    let work: Weak<dyn PartitionWork> = Arc::downgrade(core) as Weak<dyn PartitionWork>;
    tokio::spawn(crate::cluster::partitions::run(Loops {
        cluster: cluster.clone(),
        store: core.store.clone(),
        work,
        shutdown: core.shutdown.clone(),
    }));
}

impl PartitionWork for Core {
    fn route_queued<'a>(self: Arc<Self>, seq: u64, turn: &'a PendingTurn) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(cluster) = self.placement.cluster().cloned() {
                crate::intake::route_queued(&self.intake, &cluster, seq, turn).await;
            }
        })
    }

    fn recover(self: Arc<Self>, parts: &HashSet<u32>) {
        let _ = crate::delivery::recover_replies(&self.store, &self.notices, Some(parts));
    }

    fn running(&self) -> Vec<String> {
        self.lanes.running_now()
    }
}

impl AnswersCalls for Core {
    fn answer(self: Arc<Self>, question: Envelope) -> BoxFuture<'static, ()> {
        Box::pin(async move { answer(&self, question).await })
    }
}

/// Answers a call another node made to this one: a stop, or an exec approval's.
async fn answer(core: &Core, question: Envelope) {
    let Some(cluster) = core.placement.cluster() else {
        return;
    };
    let body = match question.body {
        Body::Stop { session, children } => {
            let stopper = Stopper::new(&core.store, &core.lanes, &*core.placement);
            stopper.answer(&session, children).await
        }
        body => match crate::questions::remote::answer_call(core.desk.approvals(), body) {
            Some(answer) => answer,
            None => return,
        },
    };
    cluster
        .peers()
        .answer(&question.from, question.call, body)
        .await;
}
