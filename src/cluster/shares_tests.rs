#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::share;
use crate::cluster::Cluster;
use crate::store::test_support::{FakeCoordinator, node_info};
use crate::store::{Lease, NodeVersion, PROTOCOL, partition_of};

/// A coordinator that holds nothing (the tests drive the node's view directly).
fn idle() -> Arc<FakeCoordinator> {
    Arc::new(FakeCoordinator::new("n"))
}

fn lease(partition: u32, generation: u64) -> Lease {
    Lease {
        partition,
        generation,
    }
}

#[test]
fn the_share_is_the_partitions_over_the_nodes_alive() {
    assert_eq!(share(0), 64);
    assert_eq!(share(1), 64);
    assert_eq!(share(2), 32);
    assert_eq!(share(3), 22);
}

#[tokio::test(start_paused = true)]
async fn a_turn_is_claimed_once_and_only_while_its_lease_is_trusted() {
    let cluster = Cluster::new(idle(), Duration::from_secs(10));
    let key = "agent:main:telegram:default:direct:7";
    let p = partition_of(key);
    assert!(!cluster.claim(1, key), "not held");
    let fresh = cluster.renewed(&[lease(p, 1)], Instant::now());
    assert_eq!(fresh, vec![p], "new to this node: recovered");
    assert!(cluster.owns(key));
    assert!(!cluster.claim(1, key), "its recovery has not run yet");
    cluster.recovered(&fresh.iter().copied().collect());
    assert!(cluster.claim(1, key));
    assert!(!cluster.claim(1, key), "handed to a lane once");
    assert!(cluster.claim(2, key));
    // The same lease renewed is not new; a new generation is (taken over again).
    assert!(cluster.renewed(&[lease(p, 1)], Instant::now()).is_empty());
    assert_eq!(cluster.renewed(&[lease(p, 2)], Instant::now()), vec![p]);
    // Not renewed before the margin: no longer trusted, nothing more is claimed.
    tokio::time::advance(Duration::from_secs(8)).await;
    assert!(!cluster.owns(key));
    assert!(!cluster.claim(3, key));
    // A renewal that leaves the partition out: lost.
    cluster.renewed(&[lease(p, 2)], Instant::now());
    assert!(cluster.owns(key));
    cluster.renewed(&[], Instant::now());
    assert!(!cluster.owns(key));
    assert!(cluster.held().is_empty());
}

#[tokio::test(start_paused = true)]
async fn settled_turns_are_forgotten_but_not_ones_handed_over_after_the_read() {
    let cluster = Cluster::new(idle(), Duration::from_secs(10));
    let key = "k";
    cluster.renewed(&[lease(partition_of(key), 1)], Instant::now());
    cluster.recovered(&[partition_of(key)].into_iter().collect());
    assert!(cluster.claim(1, key));
    assert!(cluster.claim(2, key));
    tokio::time::advance(Duration::from_millis(5)).await;
    let read_at = Instant::now();
    tokio::time::advance(Duration::from_millis(5)).await;
    assert!(cluster.claim(3, key), "handed over after the read began");
    // The read saw 2 pending only: 1 settled; 3 is kept though the read did not see it.
    cluster.forget_settled(&[2].into_iter().collect(), read_at);
    let mut left = cluster.submitted_in(partition_of(key));
    left.sort_unstable();
    assert_eq!(left, vec![2, 3]);
}

#[tokio::test(start_paused = true)]
async fn a_session_held_by_a_command_has_its_later_messages_wait() {
    let cluster = Cluster::new(idle(), Duration::from_secs(10));
    let key = "agent:main:telegram:default:direct:7";
    let other = "agent:main:telegram:default:direct:8";
    let fresh = cluster.renewed(
        &[lease(partition_of(key), 1), lease(partition_of(other), 1)],
        Instant::now(),
    );
    cluster.recovered(&fresh.into_iter().collect());
    assert!(cluster.claim(1, key), "the command");
    cluster.hold(key);
    assert!(!cluster.claim(2, key), "the message behind it waits");
    assert!(cluster.claim(3, other), "other sessions go on");
    let woken = cluster.released.notified();
    cluster.release(key);
    woken.await;
    assert!(cluster.claim(2, key), "after the command it goes");
}

#[tokio::test(start_paused = true)]
async fn of_two_nodes_of_different_protocols_only_the_later_one_stands_aside() {
    let coordinator = idle();
    let other = NodeVersion {
        version: "9.0.0".into(),
        protocol: PROTOCOL + 1,
    };
    let cluster = Cluster::new(coordinator.clone(), Duration::from_secs(10));
    let mut me = node_info("n", 100_000, NodeVersion::current());
    me.started_ms = 50_000;
    let mut later = node_info("m", 100_000, other);
    later.started_ms = 60_000;
    *coordinator.nodes.lock().unwrap() = vec![me.clone(), later.clone()];
    assert!(
        !cluster.check_protocols().await,
        "the later node stands aside, not this one"
    );
    later.started_ms = 40_000;
    *coordinator.nodes.lock().unwrap() = vec![me, later];
    assert!(
        cluster.check_protocols().await,
        "this node started later: it stands aside"
    );
}

#[tokio::test(start_paused = true)]
async fn the_oldest_live_nodes_protocol_is_the_clusters_so_only_the_others_stand_aside() {
    let coordinator = idle();
    let cluster = Cluster::new(coordinator.clone(), Duration::from_secs(10));
    let node = |id: &str, started_ms: u64, version: NodeVersion| {
        let mut node = node_info(id, 100_000, version);
        node.started_ms = started_ms;
        node
    };
    // A (this protocol) is oldest, X (another) started next, then this node: X stands
    // aside, not this node.
    *coordinator.nodes.lock().unwrap() = vec![
        node("a", 10_000, NodeVersion::current()),
        node("x", 20_000, protocol(PROTOCOL + 1)),
        node("n", 30_000, NodeVersion::current()),
    ];
    assert!(
        !cluster.check_protocols().await,
        "this node speaks the oldest node's protocol"
    );
    // The oldest node speaks another protocol: this node stands aside, even though a node
    // of its own protocol started before it.
    *coordinator.nodes.lock().unwrap() = vec![
        node("a", 10_000, protocol(PROTOCOL + 1)),
        node("b", 20_000, NodeVersion::current()),
        node("n", 30_000, NodeVersion::current()),
    ];
    assert!(cluster.check_protocols().await);
}

#[tokio::test]
async fn a_live_node_of_another_protocol_stops_turns_here_until_it_is_gone() {
    let coordinator = idle();
    let older = protocol(PROTOCOL - 1);
    let cluster = Cluster::new(coordinator.clone(), Duration::from_secs(10));
    let key = "agent:main:telegram:default:direct:7";
    cluster.renewed(&[lease(partition_of(key), 1)], Instant::now());
    cluster.recovered(&[partition_of(key)].into_iter().collect());
    let set_nodes = |old_seen_ms: u64| {
        // This node started after the other one: it is the one to stand aside.
        let mut me = node_info("n", 100_000, NodeVersion::current());
        me.started_ms = 1;
        *coordinator.nodes.lock().unwrap() = vec![
            me,
            node_info("old", old_seen_ms, older.clone()),
            node_info("same", 99_000, NodeVersion::current()),
        ];
    };
    // Both joined at once: the other node lives and speaks another protocol.
    set_nodes(99_500);
    assert!(cluster.check_protocols().await);
    assert!(!cluster.claim(1, key), "no turn while it lives");
    // Not seen within a lease of the newest heartbeat: gone; turns run here again.
    set_nodes(85_000);
    assert!(!cluster.check_protocols().await);
    assert!(cluster.claim(1, key));
}

/// A node (leases of 10 s) over a coordinator holding nothing, with a store, for
/// `keep_share`.
fn keeping_a_share() -> (Arc<FakeCoordinator>, crate::store::Store, Cluster) {
    let coordinator = idle();
    let store = crate::store::Store::temporary().unwrap();
    let cluster = Cluster::new(coordinator.clone(), Duration::from_secs(10));
    (coordinator, store, cluster)
}

/// A version speaking cluster protocol `protocol`.
fn protocol(protocol: u32) -> NodeVersion {
    NodeVersion {
        version: format!("0.0.{protocol}"),
        protocol,
    }
}

#[tokio::test(start_paused = true)]
async fn a_paused_node_gives_its_partitions_back_and_takes_its_share_after() {
    let (coordinator, store, cluster) = keeping_a_share();
    *coordinator.leases.lock().unwrap() = vec![lease(3, 1), lease(7, 1)];
    let older = protocol(PROTOCOL - 1);
    let mut me = node_info("n", 100_000, NodeVersion::current());
    me.started_ms = 50_000;
    let mut other = node_info("old", 99_500, older);
    other.started_ms = 40_000;
    // Alone: it renews what it holds.
    *coordinator.nodes.lock().unwrap() = vec![me.clone()];
    assert_eq!(super::keep_share(&store, &cluster).await, vec![3, 7]);
    assert_eq!(cluster.held(), vec![3, 7]);
    // A node of another protocol that started earlier lives: paused, it keeps renewing
    // them for a lease (a short pause moves no session)...
    let tick = Duration::from_secs(2);
    *coordinator.nodes.lock().unwrap() = vec![me.clone(), other.clone()];
    for _ in 0..5 {
        assert!(super::keep_share(&store, &cluster).await.is_empty());
        assert_eq!(cluster.held(), vec![3, 7], "given back after a short pause");
        tokio::time::advance(tick).await;
    }
    assert!(coordinator.released.lock().unwrap().is_empty());
    // ... a break in the pause starts the lease again ...
    *coordinator.nodes.lock().unwrap() = vec![me.clone()];
    assert!(super::keep_share(&store, &cluster).await.is_empty());
    *coordinator.nodes.lock().unwrap() = vec![me.clone(), other];
    for _ in 0..5 {
        assert!(super::keep_share(&store, &cluster).await.is_empty());
        assert_eq!(cluster.held(), vec![3, 7], "the pause was broken");
        tokio::time::advance(tick).await;
    }
    // ... then, paused a full lease, it gives them back (nothing of theirs runs here)
    // instead of renewing them.
    assert!(super::keep_share(&store, &cluster).await.is_empty());
    assert!(cluster.held().is_empty(), "{:?}", cluster.held());
    let mut released = coordinator.released.lock().unwrap().clone();
    released.sort_unstable();
    assert_eq!(released, vec![3, 7]);
    assert!(coordinator.leases.lock().unwrap().is_empty());
    // Still paused: nothing is taken.
    *coordinator.free.lock().unwrap() = vec![lease(3, 2), lease(7, 2)];
    assert!(super::keep_share(&store, &cluster).await.is_empty());
    assert!(cluster.held().is_empty());
    // The other node is gone: it takes its share again.
    *coordinator.nodes.lock().unwrap() = vec![me];
    assert_eq!(super::keep_share(&store, &cluster).await, vec![3, 7]);
    assert_eq!(cluster.held(), vec![3, 7]);
}

#[tokio::test(start_paused = true)]
async fn a_live_node_of_another_protocol_is_left_out_of_the_share() {
    let (coordinator, store, cluster) = keeping_a_share();
    let newer = protocol(PROTOCOL + 1);
    let mut me = node_info("n", 100_000, NodeVersion::current());
    me.started_ms = 50_000;
    // A node of another protocol started after this one: it pauses, this one does not,
    // and takes every partition rather than half of them.
    let mut other = node_info("new", 99_500, newer);
    other.started_ms = 60_000;
    *coordinator.nodes.lock().unwrap() = vec![me.clone(), other];
    coordinator
        .alive
        .store(2, std::sync::atomic::Ordering::SeqCst);
    *coordinator.free.lock().unwrap() = (0..40).map(|p| lease(p, 1)).collect();
    assert_eq!(super::keep_share(&store, &cluster).await.len(), 40);
    assert_eq!(cluster.held().len(), 40);
    // A node of this protocol counts.
    let peer = node_info("peer", 99_800, NodeVersion::current());
    *coordinator.nodes.lock().unwrap() = vec![me, peer];
    let mut over = cluster.held().len();
    for _ in 0..10 {
        super::keep_share(&store, &cluster).await;
        over = cluster.held().len();
    }
    assert_eq!(over, 32, "half of the partitions");
}

#[tokio::test(start_paused = true)]
async fn leases_are_not_trusted_once_the_node_lock_may_be_lost_until_renewed_again() {
    let coordinator = idle();
    let cluster = Cluster::new(coordinator.clone(), Duration::from_secs(10));
    let key = "agent:main:telegram:default:direct:8";
    let p = partition_of(key);
    let fresh = cluster.renewed(&[lease(p, 1)], Instant::now());
    cluster.recovered(&fresh.into_iter().collect());
    assert!(cluster.owns(key));
    // The coordinator's connection ended: the others may take the lease from now on.
    coordinator
        .epoch
        .store(1, std::sync::atomic::Ordering::SeqCst);
    assert!(!cluster.owns(key));
    assert!(!cluster.claim(1, key), "no turn starts meanwhile");
    // A renewal sent before the loss does not bring the trust back; one after it does.
    cluster.renewed_under(&[lease(p, 1)], Instant::now(), 0);
    assert!(!cluster.owns(key));
    cluster.renewed(&[lease(p, 1)], Instant::now());
    assert!(cluster.owns(key));
    assert!(cluster.claim(1, key));
}
