//! The cluster stage: where a session runs. [`Placement`] is the one port the stages ask;
//! [`SingleNode`] answers "here" for every session, and a [`Cluster`] node answers for the
//! partitions it leases on a PostgreSQL store (`[cluster] enabled`, docs/several-nodes.md).
//!
//! Every node accepts messages (intake is a durable enqueue, deduplicated by the database);
//! they are routed (commands, answers, turns) and reach lanes only on the node holding the
//! session's partition, through [`partitions::run`], which reads the pending queue of the
//! partitions this node holds in seq order and hands each message to the gateway's
//! [`PartitionWork`] once. It runs when the database wakes the node (`LISTEN`: a turn was
//! queued in one of them) and at every tick as a safety net. Reading the queue instead of
//! handing a turn over at intake keeps a session's turns in order even when its messages
//! arrive at different nodes.
//!
//! Every tick (a fifth of the lease) the node records its heartbeat, renews its leases,
//! takes free or expired partitions up to its share (the partitions over the live nodes
//! of its protocol), and gives back one partition over its share once nothing of it runs
//! or waits for delivery here (all of them once a node of another protocol has paused it
//! for a full lease) ([`shares`]). A partition it takes goes through the restart's recovery
//! ([`PartitionWork::recover`]): undelivered finals resent, cut replies taken back, pending
//! turns run. A lease is trusted locally until a margin before it ends; the store checks
//! it again (database clock) when a turn settles and before every delivery attempt, so a
//! node that lost a lease cannot record or send a final for those sessions.
//!
//! Beside the partitions: calls between nodes ([`peers`]), the run events every node
//! relays to the others' feeds ([`relay`]), and the channel intakes one node runs at a time
//! under a lease ([`intake_lease`], [`intake_shards`] for Discord's shards).

pub mod intake_lease;
pub mod intake_shards;
mod members;
mod node;
mod order;
pub mod partitions;
pub mod peers;
mod peers_fresh;
pub mod placement;
pub mod relay;
pub mod shares;
mod stopped;

pub use node::Cluster;
pub use partitions::PartitionWork;
pub use placement::{OnCluster, Placement, SingleNode, StillHeld};
pub use stopped::Stopped;
