//! A session's turns answered in order across a partition's moves: a lane starts a turn
//! only when no older message of its session waits outside it. A partition this node lost
//! for a moment (a renewal too late) and took back hands its waiting turns out again, while
//! its lanes still hold turns handed out before, and a run the loss cut left its message
//! waiting (its final was refused). Without this check the lane would answer the turns it
//! still held before those older messages.

use super::Cluster;
use crate::lane::{Hold, QueuedTurn};
use crate::store::Store;

impl Cluster {
    /// Whether `turn` of session `key` may start here now ([`crate::lane::Runner::hold`]):
    /// not while the session is not held here or its recovery has not run; after this node
    /// lost the session's partition, only once the session's older messages waiting outside
    /// the lane are answered (read in the store then, and only then).
    pub fn lane_hold(&self, store: &Store, key: &str, turn: &QueuedTurn) -> Hold {
        let Some(first) = turn.seqs.iter().min() else {
            return Hold::Go;
        };
        match self.may_start(key, turn.queued_ms) {
            None => Hold::NotHere,
            Some(false) => Hold::Go,
            Some(true) => Hold::Older(pending_before(store, key, *first)),
        }
    }
}

/// The durable pending seqs of session `key` older than `seq`, oldest first. A store that
/// cannot be read answers none (the turn runs, as before this check), with a warning.
fn pending_before(store: &Store, key: &str, seq: u64) -> Vec<u64> {
    match store.pending_for(key) {
        Ok(pending) => pending
            .into_iter()
            .map(|(s, _)| s)
            .filter(|s| *s < seq)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot read a session's waiting messages; its turn runs");
            Vec::new()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::contract_tests::turn;
    use crate::store::test_support::FakeCoordinator;
    use crate::store::{Lease, partition_of};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::time::Instant;

    fn queued(seq: u64, queued_ms: u64) -> QueuedTurn {
        QueuedTurn {
            seqs: vec![seq],
            text: String::new(),
            sender: String::new(),
            context: String::new(),
            target: crate::store::contract_tests::chat("1"),
            quote: None,
            files: Vec::new(),
            scheduled: false,
            queued_ms,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_loss_a_turn_waits_for_the_sessions_older_messages() {
        let store = Store::temporary().unwrap();
        let cluster = Cluster::new(Arc::new(FakeCoordinator::new("n")), Duration::from_secs(10));
        let key = "a";
        let p = partition_of(key);
        let lease = |generation| Lease {
            partition: p,
            generation,
        };
        let older = store.enqueue(&turn(key, "1")).await.unwrap();
        let seq = store.enqueue(&turn(key, "2")).await.unwrap();
        let now = crate::domain::message::now_ms();
        assert_eq!(
            cluster.lane_hold(&store, key, &queued(seq, now)),
            Hold::NotHere
        );
        cluster.renewed(&[lease(1)], Instant::now());
        assert_eq!(
            cluster.lane_hold(&store, key, &queued(seq, now)),
            Hold::NotHere,
            "its recovery has not run"
        );
        cluster.recovered(&[p].into_iter().collect());
        // Never lost here: the store is not read.
        assert_eq!(cluster.lane_hold(&store, key, &queued(seq, now)), Hold::Go);
        // Lost and taken again: a turn queued before looks at the older messages.
        cluster.renewed(&[], Instant::now());
        cluster.renewed(&[lease(2)], Instant::now());
        cluster.recovered(&[p].into_iter().collect());
        let before = queued(seq, now);
        assert_eq!(
            cluster.lane_hold(&store, key, &before),
            Hold::Older(vec![older])
        );
        let long_after = queued(seq, crate::domain::message::now_ms() + 3_600_000);
        assert_eq!(cluster.lane_hold(&store, key, &long_after), Hold::Go);
        // Turns given back: a turn queued before waits for the older messages too.
        cluster.give_back(key, &[seq]);
        let fresh = queued(seq, crate::domain::message::now_ms() + 3_600_000);
        assert_eq!(cluster.lane_hold(&store, key, &fresh), Hold::Go);
        assert_eq!(
            cluster.lane_hold(&store, key, &before),
            Hold::Older(vec![older])
        );
        // A session whose command is being carried out goes on.
        cluster.hold(key);
        assert_eq!(cluster.lane_hold(&store, key, &before), Hold::Go);
    }

    #[tokio::test]
    async fn only_the_sessions_older_messages_are_named() {
        let store = Store::temporary().unwrap();
        let a1 = store.enqueue(&turn("a", "1")).await.unwrap();
        let b1 = store.enqueue(&turn("b", "1")).await.unwrap();
        let a2 = store.enqueue(&turn("a", "2")).await.unwrap();
        let a3 = store.enqueue(&turn("a", "3")).await.unwrap();
        assert_eq!(pending_before(&store, "a", a3), vec![a1, a2]);
        assert_eq!(pending_before(&store, "a", a1), Vec::<u64>::new());
        assert_eq!(pending_before(&store, "b", b1), Vec::<u64>::new());
        store.remove_pending(a1).unwrap();
        assert_eq!(pending_before(&store, "a", a3), vec![a2]);
    }
}
