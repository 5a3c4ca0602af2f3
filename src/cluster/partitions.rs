//! The node's loops: the leases kept every tick (in a task of their own, so a busy lane cannot
//! delay a renewal), and the queued messages of the partitions it holds handed to the
//! gateway's [`PartitionWork`] once each, in seq order, when the database wakes the node and
//! at every tick.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use chela_channel::BoxFuture;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::store::{PendingTurn, Store, partition_of};

/// What the gateway does with the partitions this node runs: the port the loops hand work to.
/// Held weakly: the loops end when the gateway is gone.
pub trait PartitionWork: Send + Sync {
    /// Carries out queued message `seq` (`turn`) of a session this node runs, as intake does
    /// on a single node: a turn goes to its lane, a command or an answer acts here.
    fn route_queued<'a>(self: Arc<Self>, seq: u64, turn: &'a PendingTurn) -> BoxFuture<'a, ()>;
    /// Recovers what the previous holder of partitions `parts` left: undelivered finals
    /// resent, cut replies taken back (their pending turns come through
    /// [`PartitionWork::route_queued`] at the next poll, so a session's turns keep their order).
    fn recover(self: Arc<Self>, parts: &HashSet<u32>);
    /// The sessions with a run going on here (published with each heartbeat).
    fn running(&self) -> Vec<String>;
}

/// The handles the loops run with.
#[derive(Clone)]
pub struct Loops {
    /// This node.
    pub cluster: Arc<Cluster>,
    /// The store (its pending queue and undelivered finals).
    pub store: Store,
    /// Where the work goes.
    pub work: Weak<dyn PartitionWork>,
    /// Fires when the gateway stops.
    pub shutdown: CancellationToken,
}

/// Carries out the queued messages of partitions `parts` (all held ones: `None`) in seq
/// order, each once: a turn goes to its lane, a command runs here
/// ([`PartitionWork::route_queued`]).
pub async fn run_pending(
    work: &Arc<dyn PartitionWork>,
    store: &Store,
    cluster: &Cluster,
    parts: Option<&HashSet<u32>>,
) {
    let read_at = Instant::now();
    let pending = match store.all_pending() {
        Ok(pending) => pending,
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot read the pending queue");
            return;
        }
    };
    let seqs: HashSet<u64> = pending.iter().map(|(seq, _)| *seq).collect();
    cluster.forget_settled(&seqs, read_at);
    for (seq, turn) in pending {
        let key = &turn.session_key;
        if parts.is_some_and(|p| !p.contains(&partition_of(key))) || !cluster.claim(seq, key) {
            continue;
        }
        work.clone().route_queued(seq, &turn).await;
    }
}

/// The node's loops until shutdown: the leases (heartbeat, renewal, share) every tick in a
/// task of their own, so a busy lane cannot delay a renewal; and here the wake-ups, and the
/// safety-net poll every tick.
pub async fn run(loops: Loops) {
    tokio::spawn(leases(loops.clone()));
    let Loops {
        cluster,
        store,
        work,
        shutdown,
    } = loops;
    let mut wakeups = cluster.coordinator.wakeups();
    let mut next_tick = Instant::now();
    loop {
        let Some(work) = work.upgrade() else { return };
        let woken = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next_tick) => None,
            part = recv(&mut wakeups) => Some(part),
            // A command finished: its session's later messages may go now (all partitions
            // are looked at, without moving the tick).
            () = cluster.released.notified() => {
                run_pending(&work, &store, &cluster, None).await;
                continue;
            }
        };
        let parts: Option<HashSet<u32>> = woken.map(|first| {
            let mut parts: HashSet<u32> = first.into_iter().collect();
            if let Some(rx) = wakeups.as_mut() {
                while let Ok(p) = rx.try_recv() {
                    parts.insert(p);
                }
            }
            parts
        });
        if parts.is_none() {
            next_tick = crate::domain::deadline::after(cluster.tick());
        }
        run_pending(&work, &store, &cluster, parts.as_ref()).await;
    }
}

/// Keeps the leases every tick until shutdown; sooner while the database is out of reach
/// (to take the node lock back before the others take this node's leases) or a dead node's
/// leases are about to become free, and at once when the node lock may have been lost.
/// Stops the gateway when another process took this node's id.
async fn leases(loops: Loops) {
    /// The pause while the heartbeat fails or a node is dying.
    const SOON: Duration = Duration::from_millis(250);
    let coordinator = loops.cluster.coordinator.clone();
    loop {
        let Some(work) = loops.work.upgrade() else {
            return;
        };
        // A lock lost while the tick ran is not missed: the wake-up below only counts from
        // when it is awaited.
        let epoch = coordinator.lock_epoch();
        let beat = maintain(&work, &loops.store, &loops.cluster).await;
        drop(work);
        if coordinator.usurped() {
            // The gateway stops on it (`Gateway::store_damaged`); these leases are the
            // other process's now.
            tracing::error!(
                node = loops.cluster.node(),
                "cluster: another process took this node's id while its database connection \
                 was down; this gateway stops (give each node its own [cluster] node_id)"
            );
            return;
        }
        let pause = match (
            beat && !coordinator.dying(),
            coordinator.lock_epoch() == epoch,
        ) {
            (_, false) => Duration::ZERO,
            (true, true) => loops.cluster.tick(),
            (false, true) => SOON,
        };
        tokio::select! {
            _ = loops.shutdown.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
            _ = coordinator.lock_lost() => {}
        }
    }
}

/// The next wake-up; never when there are none.
async fn recv(wakeups: &mut Option<tokio::sync::mpsc::UnboundedReceiver<u32>>) -> Option<u32> {
    match wakeups {
        Some(rx) => match rx.recv().await {
            Some(p) => Some(p),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// One tick: heartbeat, renewal, taking a share, giving back what is over it; the
/// partitions taken over go through the restart's recovery. Whether the heartbeat and
/// renewal went through.
async fn maintain(work: &Arc<dyn PartitionWork>, store: &Store, cluster: &Cluster) -> bool {
    let fresh = super::shares::keep_share(store, cluster).await;
    // For the next heartbeat (the renewal first: after a lost lock every moment counts).
    cluster.set_runs(work.running());
    if !fresh.is_empty() {
        let parts: HashSet<u32> = fresh.into_iter().collect();
        // Their pending turns go to lanes at the next poll (one loop hands turns over, so a
        // session's turns keep their order), once the previous holder's undelivered finals
        // are queued for delivery: a new reply must not overtake them.
        work.clone().recover(&parts);
        cluster.recovered(&parts);
    }
    cluster.beat_ok()
}
