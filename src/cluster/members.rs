//! Who is in the cluster: the node running a session, and the nodes that should answer a
//! call.

use super::Cluster;
use crate::store::{StoreError, partition_of};

impl Cluster {
    /// The node holding the partition of session `key` now, if any; an error when the nodes
    /// could not be read.
    pub async fn owner_of(&self, key: &str) -> Result<Option<String>, StoreError> {
        let partition = partition_of(key);
        let nodes = self.coordinator().nodes().await.inspect_err(|e| {
            tracing::warn!(error = %e, "cluster: cannot read which node runs a session");
        })?;
        Ok(nodes
            .into_iter()
            .find(|n| n.partitions.contains(&partition))
            .map(|n| n.id))
    }

    /// The connected nodes (holding their node lock, where the store has one) whose
    /// heartbeat is within two leases of the newest one's (the database's clock), this one
    /// always among them: the ones that should answer a call. An error when the nodes could
    /// not be read (who else lives is unknown).
    pub async fn live_nodes(&self) -> Result<Vec<String>, StoreError> {
        let recent = 2 * u64::try_from(self.lease().as_millis()).unwrap_or(u64::MAX);
        let me = self.node().to_owned();
        let nodes = self.coordinator().nodes().await.inspect_err(|e| {
            tracing::warn!(error = %e, "cluster: cannot list the other nodes");
        })?;
        let newest = nodes.iter().map(|n| n.last_seen_ms).max().unwrap_or(0);
        let mut live: Vec<String> = nodes
            .into_iter()
            .filter(|n| n.id != me && n.connected)
            .filter(|n| newest.saturating_sub(n.last_seen_ms) < recent)
            .map(|n| n.id)
            .collect();
        live.insert(0, me);
        Ok(live)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn nodes_that_cannot_be_read_are_an_error_not_nobody() {
        use crate::store::test_support::FakeCoordinator;
        let coordinator = Arc::new(FakeCoordinator::new("n"));
        coordinator
            .nodes_fail
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let cluster = Cluster::new(coordinator, std::time::Duration::from_secs(10));
        assert!(cluster.owner_of("k").await.is_err());
        assert!(cluster.live_nodes().await.is_err());
    }
}
