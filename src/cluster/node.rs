//! This gateway as one node of several: the partitions it holds (leased, each trusted until
//! a margin before its lease ends), the turns it handed to lanes, the sessions held by a
//! queued command, and the pause while a node of another cluster protocol lives. The loops
//! that keep the leases and hand queued messages out are in [`super::partitions`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::store::{Coordinator, Lease, NodeInfo, NodeVersion, PROTOCOL, partition_of};

/// A partition this node holds, as it knows it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    generation: u64,
    /// Trusted until then (a margin before the lease ends in the database).
    until: Instant,
    /// The coordinator's [`Coordinator::lock_epoch`] when it was renewed: once the node
    /// lock may have been lost, other nodes may take the lease at once.
    epoch: u64,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) held: HashMap<u32, Held>,
    /// Turns handed to a lane here: seq -> (partition, when).
    submitted: HashMap<u64, (u32, Instant)>,
    /// Partitions taken over whose recovery (the previous holder's undelivered finals
    /// handed to delivery) has not run yet: their turns wait, so a new reply cannot go out
    /// before an older final of the same chat.
    pub(super) recovering: HashSet<u32>,
    /// Sessions whose queued command is being carried out: their later messages wait.
    pub(super) busy: HashSet<String>,
    /// When this node last lost each partition, or gave turns of it back (ms since the
    /// epoch): its lanes may still hold turns handed out before, and messages older than
    /// them may wait outside ([`Cluster::lane_hold`]).
    pub(super) moved_at: HashMap<u32, u64>,
    /// A live node speaking another cluster protocol, seen at the last heartbeat: while
    /// there is one, this node takes no new partition and no turn, and gives back those it
    /// holds once paused for a full lease.
    foreign: Option<String>,
    /// Since when [`State::foreign`] has been some node, without a break.
    foreign_since: Option<Instant>,
    /// How many live nodes speak another protocol (paused by this one or pausing it), at
    /// the last read of the nodes: left out of the share ([`super::shares::share`]).
    foreign_live: usize,
    /// The sessions with a run going on here, told to the others with the next heartbeat.
    runs: Vec<String>,
    /// Whether the last tick's heartbeat and renewal went through.
    beat_ok: bool,
}

/// This node's membership.
pub struct Cluster {
    pub(super) coordinator: Arc<dyn Coordinator>,
    pub(super) lease: Duration,
    pub(super) state: Mutex<State>,
    /// Wakes [`super::partitions::run`] when a held session is released.
    pub(super) released: tokio::sync::Notify,
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
    pub(super) fn tick(&self) -> Duration {
        self.lease / 5
    }

    /// Whether this node holds the partition of session `key` now.
    pub fn owns(&self, key: &str) -> bool {
        let partition = partition_of(key);
        self.state
            .lock()
            .is_ok_and(|s| s.held.get(&partition).is_some_and(|h| self.trusts(h)))
    }

    /// Notes the sessions with a run going on here, for the next heartbeat.
    pub(super) fn set_runs(&self, runs: Vec<String>) {
        if let Ok(mut state) = self.state.lock() {
            state.runs = runs;
        }
    }

    /// Notes whether a tick's heartbeat and renewal went through.
    pub(super) fn set_beat_ok(&self, ok: bool) {
        if let Ok(mut state) = self.state.lock() {
            state.beat_ok = ok;
        }
    }

    /// Whether the last tick's heartbeat and renewal went through.
    pub(super) fn beat_ok(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.beat_ok)
    }

    /// The sessions noted by [`Cluster::set_runs`].
    pub(super) fn runs(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.runs.clone())
            .unwrap_or_default()
    }

    /// Whether `held` is still trusted: within its margin, and the node lock not lost since.
    fn trusts(&self, held: &Held) -> bool {
        held.until > Instant::now() && held.epoch == self.coordinator.lock_epoch()
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
        let held = state.held.get(&partition).is_some_and(|h| self.trusts(h));
        if !held || state.submitted.contains_key(&seq) || state.recovering.contains(&partition) {
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
    pub(super) fn paused_for_a_lease(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .foreign_since
            .is_some_and(|t| t.elapsed() >= self.lease)
    }

    /// How many live nodes spoke another protocol at the last read of the nodes.
    pub(super) fn foreign_live(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .foreign_live
    }

    /// Takes in what the database says this node holds after a renewal that started at
    /// `asked`: returns the partitions new to it (taken over) and logs the lost ones.
    #[cfg(test)]
    pub(super) fn renewed(&self, renewed: &[Lease], asked: Instant) -> Vec<u32> {
        self.renewed_under(renewed, asked, self.coordinator.lock_epoch())
    }

    /// [`Cluster::renewed`] for a renewal sent under lock epoch `epoch`: trusted only while
    /// the epoch has not changed.
    pub(super) fn renewed_under(&self, renewed: &[Lease], asked: Instant, epoch: u64) -> Vec<u32> {
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
        let now_ms = crate::domain::message::now_ms();
        for partition in &lost {
            state.held.remove(partition);
            state.moved_at.insert(*partition, now_ms);
            // Whatever runs here is fenced (its settle and delivery are refused) until the
            // partition is held again. Taken again, by this node or another, its pending turns
            // are handed out again: a lane that still holds one runs it once, and a turn
            // answered meanwhile is neither run nor settled a second time.
            state.submitted.retain(|_, (p, _)| p != partition);
            tracing::warn!(
                partition,
                "cluster: lease lost (not renewed in time); nothing of its sessions is settled or delivered here until it is held again"
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
                state.recovering.insert(lease.partition);
                if state.held.contains_key(&lease.partition) {
                    // Lost and taken again between two renewals (another generation).
                    state.moved_at.insert(lease.partition, now_ms);
                }
            }
            state.held.insert(
                lease.partition,
                Held {
                    generation: lease.generation,
                    until,
                    epoch,
                },
            );
        }
        fresh
    }

    /// Takes in partitions just acquired by a request that started at `asked` under lock
    /// epoch `epoch`; returns them.
    pub(super) fn took_under(&self, taken: &[Lease], asked: Instant, epoch: u64) -> Vec<u32> {
        let until = asked + self.lease - self.lease / 5;
        let Ok(mut state) = self.state.lock() else {
            return Vec::new();
        };
        for lease in taken {
            let generation = lease.generation;
            let held = Held {
                generation,
                until,
                epoch,
            };
            state.held.insert(lease.partition, held);
            state.recovering.insert(lease.partition);
        }
        taken.iter().map(|l| l.partition).collect()
    }

    /// The recovery of partitions `parts` ran: their turns may be handed out now (the loop
    /// that hands them out is woken).
    pub(super) fn recovered(&self, parts: &HashSet<u32>) {
        if let Ok(mut state) = self.state.lock() {
            state.recovering.retain(|p| !parts.contains(p));
        }
        self.released.notify_one();
    }

    /// Whether a turn of session `key` queued at `queued_ms` (ms since the epoch; 0 unknown)
    /// may start here now: `None` when the session is not held here, or its recovery has not
    /// run yet; else whether the session's older messages must be looked at first, as this
    /// node lost the partition, or gave turns of it back, after (or shortly before, for
    /// clocks apart) the turn was queued, so its lane may hold turns handed out before. A session whose command is being
    /// carried out goes on (a command does not keep its place in line).
    pub(super) fn may_start(&self, key: &str, queued_ms: u64) -> Option<bool> {
        /// How far apart the clocks of the node that queued a message and this one may be.
        const SKEW_MS: u64 = 60_000;
        let partition = partition_of(key);
        let state = self.state.lock().ok()?;
        if state.busy.contains(key) {
            return Some(false);
        }
        let held = state.held.get(&partition).is_some_and(|h| self.trusts(h));
        if !held || state.recovering.contains(&partition) {
            return None;
        }
        let lost = state.moved_at.get(&partition);
        Some(lost.is_some_and(|at| queued_ms == 0 || queued_ms <= at.saturating_add(SKEW_MS)))
    }

    /// Messages `seqs` of session `key` are no longer handed out here (a lane gave them
    /// back, to run in order): the loop that hands messages out is woken to hand them out
    /// again, and until then no turn of the partition queued before now starts ahead of them
    /// ([`Cluster::may_start`] looks at the older messages).
    pub fn give_back(&self, key: &str, seqs: &[u64]) {
        if let Ok(mut state) = self.state.lock() {
            for seq in seqs {
                state.submitted.remove(seq);
            }
            let now_ms = crate::domain::message::now_ms();
            state.moved_at.insert(partition_of(key), now_ms);
        }
        self.released.notify_one();
    }

    /// Forgets the turns handed to lanes before `since` that are no longer pending.
    pub(super) fn forget_settled(&self, pending: &HashSet<u64>, since: Instant) {
        if let Ok(mut state) = self.state.lock() {
            state
                .submitted
                .retain(|seq, (_, at)| *at >= since || pending.contains(seq));
        }
    }

    /// The turns of `partition` handed to lanes here and not known to be settled.
    pub(super) fn submitted_in(&self, partition: u32) -> Vec<u64> {
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

/// The oldest of `nodes` connected and seen within `lease` of the newest heartbeat (the
/// database's clock; the start, then the id, breaks a tie), when it is not `me` and speaks another cluster
/// protocol than this binary: the cluster follows the oldest live node's protocol, so only
/// nodes of another protocol than that one stand aside (with A and B on one protocol and X,
/// started between them, on another, X pauses and A and B go on), and of two nodes that both
/// check, never both.
fn foreign_node<'a>(nodes: &'a [NodeInfo], me: &str, lease: Duration) -> Option<&'a NodeInfo> {
    let newest = nodes.iter().map(|n| n.last_seen_ms).max()?;
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let oldest = nodes
        .iter()
        .filter(|n| n.id == me || (n.connected && newest.saturating_sub(n.last_seen_ms) < lease_ms))
        .min_by(|a, b| (a.started_ms, a.id.as_str()).cmp(&(b.started_ms, b.id.as_str())))?;
    (oldest.id != me && oldest.version.protocol != PROTOCOL).then_some(oldest)
}

/// How many of `nodes` are live (connected, seen within `lease` of the newest heartbeat, the
/// database's clock) and speak another cluster protocol than this binary.
fn foreign_live(nodes: &[NodeInfo], lease: Duration) -> usize {
    let Some(newest) = nodes.iter().map(|n| n.last_seen_ms).max() else {
        return 0;
    };
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    nodes
        .iter()
        .filter(|n| {
            n.version.protocol != PROTOCOL
                && n.connected
                && newest.saturating_sub(n.last_seen_ms) < lease_ms
        })
        .count()
}
