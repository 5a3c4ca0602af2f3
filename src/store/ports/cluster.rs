//! Several gateways on one store: nodes, and the leases on the session partitions that say
//! which node runs which sessions (docs/several-nodes.md).

use tokio::sync::mpsc;

use super::StoreFuture;
use super::version::NodeVersion;

/// How many partitions the session keys are spread over; a lease covers one partition.
pub const PARTITIONS: u32 = 64;

/// The partition of session `key`: FNV-1a of its bytes, so every node and every version
/// agrees on it.
pub fn partition_of(key: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in key.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % PARTITIONS
}

/// A partition this node holds: its number and the lease's generation (one more at every
/// change of holder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The partition.
    pub partition: u32,
    /// The generation of the lease this node holds.
    pub generation: u64,
}

/// A node as the store knows it (`chela status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Its id.
    pub id: String,
    /// When it started, ms since the epoch.
    pub started_ms: u64,
    /// Its last heartbeat, ms since the epoch (database clock).
    pub last_seen_ms: u64,
    /// The partitions whose unexpired lease it holds.
    pub partitions: Vec<u32>,
    /// The names of the intake leases it holds unexpired, as [`Coordinator::hold_intake`]
    /// took them: `intake:telegram`, `intake:discord`, `intake:discord#1/2` (a shard).
    pub intakes: Vec<String>,
    /// The layouts of intakes split into parts whose parts it runs now (`discord#/4`, an
    /// unexpired [`Coordinator::advertise_layout`]).
    pub layouts: Vec<String>,
    /// What it runs.
    pub version: NodeVersion,
    /// Whether it holds its node lock (its coordinator's connection is up): a node that
    /// does not is dead or cut off, and holds nothing.
    pub connected: bool,
    /// The sessions with a run going on there, at its last heartbeat.
    pub runs: Vec<String>,
}

/// One node's side of the coordination: its heartbeat, its partition leases, and the
/// wake-ups of new turns. Times are the database's clock, so the nodes' clocks need not
/// agree; only the lease length is measured on each node.
pub trait Coordinator: Send + Sync {
    /// This node's id.
    fn node(&self) -> &str;
    /// Records this node's heartbeat and the sessions running here (`runs`); returns how
    /// many nodes (this one included) had one within `alive_s` seconds and are connected
    /// (hold their node lock, where the coordinator has one).
    fn heartbeat<'a>(&'a self, alive_s: u64, runs: &'a [String]) -> StoreFuture<'a, usize>;
    /// Extends this node's unexpired leases by `lease_s` seconds; returns them. A lease that
    /// expired first is not among them: it is lost, even if nobody took it yet.
    fn renew(&self, lease_s: u64) -> StoreFuture<'_, Vec<Lease>>;
    /// Changes whenever this node may have lost its node lock (its coordinator's
    /// connection ended): the other nodes may take its leases from then on, so leases
    /// renewed before are not trusted any more. Constant without a node lock.
    fn lock_epoch(&self) -> u64 {
        0
    }
    /// Resolves when this node's lock may have been lost (its coordinator's connection
    /// ended): time to connect again and renew at once. Never without a node lock.
    fn lock_lost(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
    /// Whether another process took this node's id (its lock) while this one's connection
    /// was down: this process must stop, as both would run the same sessions.
    fn usurped(&self) -> bool {
        false
    }
    /// Whether the last heartbeat found a node without its lock still holding leases: they
    /// become free within a second or two, worth asking for sooner than a tick.
    fn dying(&self) -> bool {
        false
    }
    /// Takes up to `most` partitions that are free, whose lease expired, or whose holder
    /// has been without its node lock for a second (it died), each with a new
    /// generation, for `lease_s` seconds; returns them. Concurrent callers never get the
    /// same partition.
    fn acquire(&self, most: usize, lease_s: u64) -> StoreFuture<'_, Vec<Lease>>;
    /// Gives `partitions` back (free for any node at once), if this node holds them.
    fn release<'a>(&'a self, partitions: &'a [u32]) -> StoreFuture<'a, ()>;
    /// Takes or renews the intake lease `name` for `lease_s` seconds: true when this node
    /// holds it now (it was free, expired, already this node's, or its holder has been
    /// without its node lock for a second), false while another live node holds it unexpired.
    fn hold_intake<'a>(&'a self, name: &'a str, lease_s: u64) -> StoreFuture<'a, bool>;
    /// Gives the intake lease `name` back, if this node holds it.
    fn release_intake<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()>;
    /// Gives every lease back and removes this node's heartbeat (graceful shutdown).
    fn leave(&self) -> StoreFuture<'_, ()>;
    /// Says for `lease_s` seconds that this node runs the parts of the intake layout `layout`
    /// (`discord#/4`: Discord's intake in 4 shards), listed in its [`NodeInfo::layouts`]
    /// meanwhile; renewed as long as it does. Required: a coordinator that did not record
    /// it would make the other nodes count this one out of the layout's share.
    fn advertise_layout<'a>(&'a self, layout: &'a str, lease_s: u64) -> StoreFuture<'a, ()>;
    /// Stops saying that this node runs the parts of `layout` (its intake ended).
    fn withdraw_layout<'a>(&'a self, layout: &'a str) -> StoreFuture<'a, ()>;
    /// Every node with its heartbeat, whether it is connected, and (while it is) its
    /// unexpired leases and the sessions running there, by id.
    fn nodes(&self) -> StoreFuture<'_, Vec<NodeInfo>>;
    /// The wake-ups: the partition of each turn queued through `enqueue_unique` on any node
    /// (best effort: a lost one is found by polling). Only the first call gets them.
    fn wakeups(&self) -> Option<mpsc::UnboundedReceiver<u32>>;
    /// The key calls between nodes are signed with (shared by every node of the store);
    /// empty when there is none (calls are then not sent nor taken).
    fn call_key(&self) -> StoreFuture<'_, Vec<u8>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Sends `payload` (at most [`MAX_EVENT_PAYLOAD`] bytes) to every node's
    /// [`Coordinator::remote_events`], this one's included (best effort: the RPC's event
    /// feeds of the other nodes). Without a transport it does nothing.
    fn publish_events(&self, payload: String) -> StoreFuture<'_, ()> {
        let _ = payload;
        Box::pin(async { Ok(()) })
    }
    /// What [`Coordinator::publish_events`] of every node sent. Only the first call gets them;
    /// `None` without a transport.
    fn remote_events(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        None
    }
}

/// The largest payload [`Coordinator::publish_events`] takes (PostgreSQL's `NOTIFY` takes
/// under 8,000 bytes).
pub const MAX_EVENT_PAYLOAD: usize = 7_900;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_stable_and_spread() {
        // Fixed values: nodes of different versions must agree.
        assert_eq!(partition_of(""), 0x811c_9dc5 % PARTITIONS);
        assert_eq!(partition_of("a"), 0xe40c_292c % PARTITIONS);
        let mut seen = std::collections::HashSet::new();
        for chat in 0..1000 {
            seen.insert(partition_of(&format!(
                "agent:main:telegram:default:direct:{chat}"
            )));
        }
        assert_eq!(
            seen.len(),
            PARTITIONS as usize,
            "every partition gets sessions"
        );
    }
}
