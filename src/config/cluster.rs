//! `[cluster]`: several `chela gateway` processes on one PostgreSQL store (docs/several-nodes.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Share the store's sessions with the other gateways on the same PostgreSQL: each
    /// session's turns run on the node holding its partition's lease. Needs `store.url`.
    pub enabled: bool,
    /// This node's id, unique among the nodes; empty: a random id at each start.
    pub node_id: String,
    /// Seconds a partition lease lasts without renewal: after a node dies, its sessions move
    /// to the other nodes within about this long.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub lease_s: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            node_id: String::new(),
            lease_s: 10,
        }
    }
}

impl ClusterConfig {
    /// The lease duration.
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_s.max(1))
    }

    /// Checks the table against the store: `Err((key, message))` names the key at fault.
    pub fn check(&self, postgres: bool) -> Result<(), (String, String)> {
        if !self.enabled {
            return Ok(());
        }
        if !postgres {
            return Err((
                "cluster.enabled".to_owned(),
                "needs the store on PostgreSQL (store.url or CHELA_STORE_URL)".to_owned(),
            ));
        }
        if self.lease_s < 3 {
            return Err((
                "cluster.lease_s".to_owned(),
                "must be at least 3".to_owned(),
            ));
        }
        let id_ok = self.node_id.len() <= 64
            && self
                .node_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !id_ok {
            return Err((
                "cluster.node_id".to_owned(),
                format!(
                    "{:?}: use up to 64 letters, digits, '-', '_' or '.'",
                    self.node_id
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_needs_postgres_and_a_sane_lease() {
        let mut config = ClusterConfig::default();
        assert!(config.check(false).is_ok(), "off: nothing to check");
        config.enabled = true;
        assert_eq!(
            config.check(false).map_err(|e| e.0),
            Err("cluster.enabled".into())
        );
        assert!(config.check(true).is_ok());
        config.lease_s = 1;
        assert_eq!(
            config.check(true).map_err(|e| e.0),
            Err("cluster.lease_s".into())
        );
        config.lease_s = 10;
        config.node_id = "a b".into();
        assert_eq!(
            config.check(true).map_err(|e| e.0),
            Err("cluster.node_id".into())
        );
        config.node_id = "node-1.eu".into();
        assert!(config.check(true).is_ok());
    }
}
