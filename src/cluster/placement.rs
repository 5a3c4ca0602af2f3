//! The placement port: where a session runs. Code that runs a session asks it instead of
//! asking whether it is in a cluster; [`SingleNode`] runs every session here, [`OnCluster`]
//! the sessions of the partitions its node leases.

use std::sync::Arc;

use chela_channel::BoxFuture;

use super::Cluster;
use crate::lane::{LaneError, Lanes, QueuedTurn};

/// Whether this node still holds a session, asked before a reply sends a new message.
pub type StillHeld = Arc<dyn Fn() -> bool + Send + Sync>;

/// Where sessions run.
pub trait Placement: Send + Sync {
    /// This node's id among several; `None` when this process runs every session.
    fn node(&self) -> Option<&str>;

    /// Whether session `key` runs on this node now.
    fn runs_here(&self, key: &str) -> bool;

    /// For a reply in session `key`: a check that this node still holds the session, asked
    /// before each new message; `None` when it always does.
    fn still_held(&self, key: &str) -> Option<StillHeld>;

    /// Whether a message is queued as it is after admission and routed by the node that runs
    /// its session, rather than routed where it arrived.
    fn routes_where_it_runs(&self) -> bool;

    /// Hands `turn`, durably queued for session `key`, to where the session runs: its lane
    /// here, or (among several nodes) nothing, as the node holding the session's partition
    /// reads it from the queue.
    fn hand_over<'a>(
        &'a self,
        key: &'a str,
        turn: QueuedTurn,
    ) -> BoxFuture<'a, Result<(), LaneError>>;

    /// This node of a cluster, for the calls between nodes (stop or approve where it runs);
    /// `None` alone.
    fn cluster(&self) -> Option<&Arc<Cluster>>;
}

/// One process runs every session.
pub struct SingleNode {
    lanes: Lanes,
}

impl SingleNode {
    /// Every session runs here, in `lanes`.
    pub fn new(lanes: Lanes) -> SingleNode {
        SingleNode { lanes }
    }
}

impl Placement for SingleNode {
    fn node(&self) -> Option<&str> {
        None
    }

    fn runs_here(&self, _key: &str) -> bool {
        true
    }

    fn still_held(&self, _key: &str) -> Option<StillHeld> {
        None
    }

    fn routes_where_it_runs(&self) -> bool {
        false
    }

    fn hand_over<'a>(
        &'a self,
        key: &'a str,
        turn: QueuedTurn,
    ) -> BoxFuture<'a, Result<(), LaneError>> {
        Box::pin(self.lanes.submit(key, turn))
    }

    fn cluster(&self) -> Option<&Arc<Cluster>> {
        None
    }
}

/// A node of several: it runs the sessions of the partitions it leases.
pub struct OnCluster {
    cluster: Arc<Cluster>,
}

impl OnCluster {
    /// Sessions run where `cluster`'s leases say.
    pub fn new(cluster: Arc<Cluster>) -> OnCluster {
        OnCluster { cluster }
    }
}

impl Placement for OnCluster {
    fn node(&self) -> Option<&str> {
        Some(self.cluster.node())
    }

    fn runs_here(&self, key: &str) -> bool {
        self.cluster.owns(key)
    }

    fn still_held(&self, key: &str) -> Option<StillHeld> {
        let (cluster, key) = (self.cluster.clone(), key.to_owned());
        Some(Arc::new(move || cluster.owns(&key)))
    }

    fn routes_where_it_runs(&self) -> bool {
        true
    }

    fn hand_over<'a>(
        &'a self,
        _key: &'a str,
        _turn: QueuedTurn,
    ) -> BoxFuture<'a, Result<(), LaneError>> {
        // The node holding the session's partition reads it from the queue, woken by the
        // store ([`super::partitions`]).
        Box::pin(std::future::ready(Ok(())))
    }

    fn cluster(&self) -> Option<&Arc<Cluster>> {
        Some(&self.cluster)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::test_support::FakeCoordinator;

    #[tokio::test]
    async fn a_cluster_node_runs_only_the_sessions_it_holds() {
        let coordinator = Arc::new(FakeCoordinator::new("n1"));
        let lease = std::time::Duration::from_secs(10);
        let node = OnCluster::new(Arc::new(Cluster::new(coordinator, lease)));
        assert_eq!(node.node(), Some("n1"));
        assert!(!node.runs_here("any"), "no partition is held yet");
        assert!(!node.still_held("any").unwrap()());
        assert!(node.routes_where_it_runs() && node.cluster().is_some());
    }
}
