//! What a node of a cluster runs: its chela version and the cluster protocol it speaks,
//! compared when a node joins. A file of its own, under the traits: `StoreError` names it
//! (`ProtocolMismatch`), and the traits name `StoreError`.

/// The cluster protocol this chela speaks: what the rows it queues and the notifications it
/// sends to the other nodes mean. Bumped whenever that changes; a node refuses to join a
/// cluster where a live node speaks another one (the chela version alone may differ).
pub const PROTOCOL: u32 = 3;

/// What a node runs: its chela version and the cluster protocol it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVersion {
    /// chela's version (`0.1.0`); empty for a node from before versions were recorded.
    pub version: String,
    /// Its [`PROTOCOL`]; 0 for a node from before protocols were recorded.
    pub protocol: u32,
}

impl NodeVersion {
    /// This binary's.
    pub fn current() -> NodeVersion {
        NodeVersion {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol: PROTOCOL,
        }
    }
}

impl std::fmt::Display for NodeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version.as_str() {
            "" => write!(f, "an older chela (cluster protocol {})", self.protocol),
            version => write!(f, "chela {version} (cluster protocol {})", self.protocol),
        }
    }
}
