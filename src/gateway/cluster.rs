//! This gateway as one node of several on a PostgreSQL store (`[cluster] enabled`): it
//! leases a fair share of the session partitions, runs the turns of those alone, and hands
//! them back when it stops (README "Running on several machines").
//!
//! Every node accepts messages (intake is a durable enqueue, deduplicated by the database);
//! they are routed (commands, answers, turns) and reach lanes only here, through
//! [`run_pending`], which reads the pending queue of the partitions this node holds in seq
//! order and hands each turn to its lane once. It runs when the database wakes the node
//! (`LISTEN`: a turn was queued in one of them) and at every tick as a safety net. Reading the queue instead of handing a turn over at intake keeps a
//! session's turns in order even when its messages arrive at different nodes.
//!
//! Every tick (a fifth of the lease) the node records its heartbeat, renews its leases,
//! takes free or expired partitions up to its share (the partitions over the live nodes
//! of its protocol), and gives back one partition over its share once nothing of it runs
//! or waits for delivery here (all of them once a node of another protocol has paused it
//! for a full lease). A partition it takes goes through the restart's recovery
//! (`recover::recover_replies`): undelivered finals resent, cut replies taken back, pending
//! turns run. A lease is trusted locally until a margin before it ends; the store checks
//! it again (database clock) when a turn settles and before every delivery attempt, so a
//! node that lost a lease cannot record or send a final for those sessions.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Core;
use crate::store::{
    Coordinator, Lease, NodeInfo, NodeVersion, PARTITIONS, PROTOCOL, Store, partition_of,
};

/// A partition this node holds, as it knows it.
#[derive(Debug, Clone, Copy)]
struct Held {
    generation: u64,
    /// Trusted until then (a margin before the lease ends in the database).
    until: Instant,
}

#[derive(Debug, Default)]
struct State {
    held: HashMap<u32, Held>,
    /// Turns handed to a lane here: seq -> (partition, when).
    submitted: HashMap<u64, (u32, Instant)>,
    /// Sessions whose queued command is being carried out: their later messages wait.
    busy: HashSet<String>,
    /// A live node speaking another cluster protocol, seen at the last heartbeat: while
    /// there is one, this node takes no new partition and no turn, and gives back those it
    /// holds once paused for a full lease.
    foreign: Option<String>,
    /// Since when [`State::foreign`] has been some node, without a break.
    foreign_since: Option<Instant>,
    /// How many live nodes speak another protocol (paused by this one or pausing it), at
    /// the last read of the nodes: left out of the share ([`share`]).
    foreign_live: usize,
}

/// This node's membership.
pub struct Cluster {
    coordinator: Arc<dyn Coordinator>,
    lease: Duration,
    state: Mutex<State>,
    /// Wakes [`run`] when a held session is released.
    released: tokio::sync::Notify,
    /// Calls to the other nodes.
    peers: super::peers::Peers,
}

impl Cluster {
    /// A node over `coordinator` with leases of `lease`.
    pub fn new(coordinator: Arc<dyn Coordinator>, lease: Duration) -> Cluster {
        Cluster {
            peers: super::peers::Peers::new(coordinator.clone()),
            coordinator,
            lease,
            state: Mutex::new(State::default()),
            released: tokio::sync::Notify::new(),
        }
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        self.coordinator.node()
    }

    /// The coordinator (for `status`).
    pub fn coordinator(&self) -> &Arc<dyn Coordinator> {
        &self.coordinator
    }

    /// Calls to the other nodes ([`super::peers`]).
    pub fn peers(&self) -> &super::peers::Peers {
        &self.peers
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How often the node beats, renews and rebalances: a fifth of the lease.
    fn tick(&self) -> Duration {
        self.lease / 5
    }

    /// Whether this node holds the partition of session `key` now.
    pub fn owns(&self, key: &str) -> bool {
        let partition = partition_of(key);
        self.state.lock().is_ok_and(|s| {
            s.held
                .get(&partition)
                .is_some_and(|h| h.until > Instant::now())
        })
    }

    /// The partitions this node holds, sorted.
    pub fn held(&self) -> Vec<u32> {
        let mut held: Vec<u32> = self
            .state
            .lock()
            .map(|s| s.held.keys().copied().collect())
            .unwrap_or_default();
        held.sort_unstable();
        held
    }

    /// Holds session `key` while one of its queued commands is carried out: its later
    /// messages are not claimed until [`Cluster::release`]. Returns the key.
    pub fn hold(&self, key: &str) -> String {
        if let Ok(mut state) = self.state.lock() {
            state.busy.insert(key.to_owned());
        }
        key.to_owned()
    }

    /// Ends [`Cluster::hold`] of `key` and wakes the loop that hands messages out.
    pub fn release(&self, key: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.busy.remove(key);
        }
        self.released.notify_one();
    }

    /// Claims message `seq` of session `key` (a turn for its lane, or a command) here: true
    /// when this node holds its partition, did not hand it out before, and no command of
    /// the session is being carried out.
    pub fn claim(&self, seq: u64, key: &str) -> bool {
        let partition = partition_of(key);
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        if state.busy.contains(key) || state.foreign.is_some() {
            return false;
        }
        let held = state
            .held
            .get(&partition)
            .is_some_and(|h| h.until > Instant::now());
        if !held || state.submitted.contains_key(&seq) {
            return false;
        }
        state.submitted.insert(seq, (partition, Instant::now()));
        true
    }

    /// Looks whether the cluster speaks another protocol than this node: the cluster's
    /// protocol is the oldest live node's (two nodes may join at the same moment, or a node
    /// of another protocol come back under an id seen before). While it is another one, this
    /// node takes no new partition and hands no turn to a lane, as it could misread what the
    /// others queue; it logs an error naming that node once, and goes on by itself when it is
    /// gone. True while paused. When the nodes cannot be read, the last answer stands.
    pub async fn check_protocols(&self) -> bool {
        let nodes = match self.coordinator.nodes().await {
            Ok(nodes) => nodes,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: cannot read the other nodes' versions");
                return self.state.lock().map_or(true, |s| s.foreign.is_some());
            }
        };
        let foreign = foreign_node(&nodes, self.node(), self.lease);
        let Ok(mut state) = self.state.lock() else {
            return true;
        };
        state.foreign_live = foreign_live(&nodes, self.lease);
        match foreign {
            Some(other) => {
                if state.foreign.as_deref() != Some(other.id.as_str()) {
                    tracing::error!(
                        node = %other.id,
                        theirs = %other.version,
                        ours = %NodeVersion::current(),
                        "cluster: node {} runs {}, another cluster protocol than this node's {}; \
                         this node takes no partition and no turn until it is gone (stop the \
                         nodes of one version)",
                        other.id,
                        other.version,
                        NodeVersion::current()
                    );
                }
                state.foreign = Some(other.id.clone());
                state.foreign_since.get_or_insert_with(Instant::now);
                true
            }
            None => {
                state.foreign_since = None;
                if let Some(gone) = state.foreign.take() {
                    tracing::info!(node = %gone, "cluster: no live node speaks another protocol any more; taking turns again");
                }
                false
            }
        }
    }

    /// Whether [`Cluster::check_protocols`] has paused this node for a full lease without a
    /// break: only then does it give its partitions back (a pause of a tick or two does not
    /// move every idle session).
    fn paused_for_a_lease(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .foreign_since
            .is_some_and(|t| t.elapsed() >= self.lease)
    }

    /// How many live nodes spoke another protocol at the last read of the nodes.
    fn foreign_live(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .foreign_live
    }

    /// Takes in what the database says this node holds after a renewal that started at
    /// `asked`: returns the partitions new to it (taken over) and logs the lost ones.
    fn renewed(&self, renewed: &[Lease], asked: Instant) -> Vec<u32> {
        let until = asked + self.lease - self.lease / 5;
        let Ok(mut state) = self.state.lock() else {
            return Vec::new();
        };
        let now: HashSet<u32> = renewed.iter().map(|l| l.partition).collect();
        let lost: Vec<u32> = state
            .held
            .keys()
            .filter(|p| !now.contains(p))
            .copied()
            .collect();
        for partition in &lost {
            state.held.remove(partition);
            // Whatever ran here is fenced; taken again, its turns run again.
            state.submitted.retain(|_, (p, _)| p != partition);
            tracing::warn!(
                partition,
                "cluster: lease lost (not renewed in time); its sessions stop here"
            );
        }
        let mut fresh = Vec::new();
        for lease in renewed {
            let known = state
                .held
                .get(&lease.partition)
                .is_some_and(|h| h.generation == lease.generation);
            if !known {
                fresh.push(lease.partition);
            }
            state.held.insert(
                lease.partition,
                Held {
                    generation: lease.generation,
                    until,
                },
            );
        }
        fresh
    }

    /// Takes in partitions just acquired by a request that started at `asked`; returns them.
    fn took(&self, taken: &[Lease], asked: Instant) -> Vec<u32> {
        let until = asked + self.lease - self.lease / 5;
        let Ok(mut state) = self.state.lock() else {
            return Vec::new();
        };
        for lease in taken {
            let generation = lease.generation;
            state
                .held
                .insert(lease.partition, Held { generation, until });
        }
        taken.iter().map(|l| l.partition).collect()
    }

    /// Forgets the turns handed to lanes before `since` that are no longer pending.
    fn forget_settled(&self, pending: &HashSet<u64>, since: Instant) {
        if let Ok(mut state) = self.state.lock() {
            state
                .submitted
                .retain(|seq, (_, at)| *at >= since || pending.contains(seq));
        }
    }

    /// The turns of `partition` handed to lanes here and not known to be settled.
    fn submitted_in(&self, partition: u32) -> Vec<u64> {
        self.state
            .lock()
            .map(|s| {
                s.submitted
                    .iter()
                    .filter(|(_, (p, _))| *p == partition)
                    .map(|(seq, _)| *seq)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The oldest of `nodes` seen within `lease` of the newest heartbeat (the database's clock;
/// the start, then the id, breaks a tie), when it is not `me` and speaks another cluster
/// protocol than this binary: the cluster follows the oldest live node's protocol, so only
/// nodes of another protocol than that one stand aside (with A and B on one protocol and X,
/// started between them, on another, X pauses and A and B go on), and of two nodes that both
/// check, never both.
fn foreign_node<'a>(nodes: &'a [NodeInfo], me: &str, lease: Duration) -> Option<&'a NodeInfo> {
    let newest = nodes.iter().map(|n| n.last_seen_ms).max()?;
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let oldest = nodes
        .iter()
        .filter(|n| n.id == me || newest.saturating_sub(n.last_seen_ms) < lease_ms)
        .min_by(|a, b| (a.started_ms, a.id.as_str()).cmp(&(b.started_ms, b.id.as_str())))?;
    (oldest.id != me && oldest.version.protocol != PROTOCOL).then_some(oldest)
}

/// How many of `nodes` are live (seen within `lease` of the newest heartbeat, the
/// database's clock) and speak another cluster protocol than this binary.
fn foreign_live(nodes: &[NodeInfo], lease: Duration) -> usize {
    let Some(newest) = nodes.iter().map(|n| n.last_seen_ms).max() else {
        return 0;
    };
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    nodes
        .iter()
        .filter(|n| {
            n.version.protocol != PROTOCOL && newest.saturating_sub(n.last_seen_ms) < lease_ms
        })
        .count()
}

/// The node's share of the partitions when `alive` nodes are.
pub fn share(alive: usize) -> usize {
    let alive = alive.max(1);
    (PARTITIONS as usize).div_ceil(alive)
}

/// Carries out the queued messages of partitions `parts` (all held ones: `None`) in seq
/// order, each once: a turn goes to its lane, a command runs here
/// ([`super::intake::route_queued`]).
pub async fn run_pending(core: &Arc<Core>, cluster: &Arc<Cluster>, parts: Option<&HashSet<u32>>) {
    let read_at = Instant::now();
    let pending = match core.store.all_pending() {
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
        super::intake::route_queued(core, cluster, seq, &turn).await;
    }
}

/// The node's loops until shutdown: the leases (heartbeat, renewal, share) every tick in a
/// task of their own, so a busy lane cannot delay a renewal; and here the wake-ups, and the
/// safety-net poll every tick.
pub async fn run(core: Weak<Core>) {
    let Some(cluster) = core.upgrade().and_then(|c| c.cluster.clone()) else {
        return;
    };
    tokio::spawn(leases(core.clone(), cluster.clone()));
    let mut wakeups = cluster.coordinator.wakeups();
    let mut next_tick = Instant::now();
    loop {
        let Some(core) = core.upgrade() else { return };
        let shutdown = core.shutdown.clone();
        let woken = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next_tick) => None,
            part = recv(&mut wakeups) => Some(part),
            // A command finished: its session's later messages may go now (all partitions
            // are looked at, without moving the tick).
            () = cluster.released.notified() => {
                run_pending(&core, &cluster, None).await;
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
        run_pending(&core, &cluster, parts.as_ref()).await;
    }
}

/// Keeps the leases every tick until shutdown.
async fn leases(core: Weak<Core>, cluster: Arc<Cluster>) {
    loop {
        let Some(strong) = core.upgrade() else { return };
        let shutdown = strong.shutdown.clone();
        maintain(&strong, &cluster).await;
        drop(strong);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(cluster.tick()) => {}
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
/// partitions taken over go through the restart's recovery.
async fn maintain(core: &Arc<Core>, cluster: &Cluster) {
    let fresh = keep_share(&core.store, cluster).await;
    if !fresh.is_empty() {
        let parts: HashSet<u32> = fresh.into_iter().collect();
        // Their pending turns go to lanes at the next poll (one loop hands turns over, so a
        // session's turns keep their order).
        let _ = super::recover::recover_replies(core, Some(&parts));
    }
}

/// [`maintain`]'s leases: heartbeat, renewal, then the share taken, or what is over it
/// given back; once paused by [`Cluster::check_protocols`] for a full lease, everything
/// held is given back (as far as nothing of it runs or waits for delivery here) so the
/// other nodes run those sessions, and the share is taken again when the pause ends. The
/// share counts the live nodes of this node's protocol only. Returns the partitions new
/// to this node, sorted.
async fn keep_share(store: &Store, cluster: &Cluster) -> Vec<u32> {
    let lease_s = cluster.lease.as_secs();
    let alive = match cluster.coordinator.heartbeat(lease_s).await {
        Ok(alive) => alive,
        Err(e) => {
            tracing::warn!(error = %e, "cluster: heartbeat failed; this node's leases run out unless it returns");
            return Vec::new();
        }
    };
    let asked = Instant::now();
    let mut fresh = match cluster.coordinator.renew(lease_s).await {
        Ok(renewed) => cluster.renewed(&renewed, asked),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot renew the leases");
            return Vec::new();
        }
    };
    let held = cluster.held().len();
    let paused = cluster.check_protocols().await;
    // A node of another protocol takes no partition from this one: it does not count.
    let share = share(alive.saturating_sub(cluster.foreign_live()));
    if paused {
        // Nothing new is taken while a node of another protocol lives, and what is held
        // goes back once that lasted a full lease.
        if held > 0 && cluster.paused_for_a_lease() {
            give_back(store, cluster, held).await;
            fresh.retain(|p| cluster.held().contains(p));
        }
    } else if held < share {
        let asked = Instant::now();
        match cluster.coordinator.acquire(share - held, lease_s).await {
            Ok(taken) if !taken.is_empty() => fresh.extend(cluster.took(&taken, asked)),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cluster: cannot take partitions"),
        }
    } else if held > share {
        give_back(store, cluster, held - share).await;
    }
    fresh.sort_unstable();
    if !fresh.is_empty() {
        tracing::info!(node = cluster.node(), partitions = ?fresh, alive, "cluster: partitions taken over");
    }
    fresh
}

/// Gives back up to `excess` held partitions with nothing running, queued or undelivered
/// here: each is no longer held here first (so nothing new starts), then checked, then
/// released.
async fn give_back(store: &Store, cluster: &Cluster, mut excess: usize) {
    let undelivered: HashSet<u32> = match store.undelivered() {
        Ok(entries) => entries
            .iter()
            .map(|e| partition_of(&e.session_key))
            .collect(),
        Err(_) => return,
    };
    for partition in cluster.held() {
        if undelivered.contains(&partition) {
            continue;
        }
        let Some(held) = cluster
            .state
            .lock()
            .ok()
            .and_then(|mut s| s.held.remove(&partition))
        else {
            continue;
        };
        let busy = cluster
            .submitted_in(partition)
            .into_iter()
            .any(|seq| store.is_pending(seq).unwrap_or(true));
        let delivering = store.undelivered().map_or(true, |entries| {
            entries
                .iter()
                .any(|e| partition_of(&e.session_key) == partition)
        });
        if busy || delivering {
            if let Ok(mut s) = cluster.state.lock() {
                s.held.insert(partition, held);
            }
            continue;
        }
        match cluster.coordinator.release(&[partition]).await {
            Ok(()) => tracing::info!(
                partition,
                "cluster: partition given back (over this node's share, or paused)"
            ),
            Err(e) => {
                tracing::warn!(error = %e, partition, "cluster: cannot give a partition back; it expires")
            }
        }
        excess -= 1;
        if excess == 0 {
            return;
        }
    }
}

/// Gives every lease back at shutdown (after the lanes stopped and the outbox had its
/// chance), so the other nodes take the sessions over at once.
pub async fn leave(cluster: &Cluster) {
    if let Ok(mut s) = cluster.state.lock() {
        s.held.clear();
    }
    match cluster.coordinator.leave().await {
        Ok(()) => tracing::info!(
            node = cluster.node(),
            "cluster: left; partitions given back"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot give the partitions back; they expire")
        }
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
