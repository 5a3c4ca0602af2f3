//! The lease logic against a real PostgreSQL: partitions are held by one node at a time,
//! taken over once expired, and a node whose lease is gone can neither settle a turn nor
//! attempt its delivery.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::{Joining, PgCoordinator, channel_name};
use crate::domain::run::RunRecord;
use crate::store::contract_tests::{chat, turn};
use crate::store::postgres::testing::{admin, test_url, url_with_schema};
use crate::store::{
    Coordinator, NodeVersion, PARTITIONS, PgStore, Store, StoreError, partition_of,
};

/// A fresh schema: (its name, its store URL).
pub(super) fn schema() -> (String, String) {
    let schema = format!("t{}", uuid::Uuid::new_v4().simple());
    admin(&format!("CREATE SCHEMA {schema}"));
    let url = url_with_schema(&test_url(), &schema);
    (schema, url)
}

/// Node `node`'s store (migrated, fenced) and coordinator on `url`.
pub(super) async fn node(url: &str, node: &str) -> (Store, PgCoordinator) {
    let store = PgStore::open_as(url, "test", crate::store::Tenancy::Shared).unwrap();
    crate::store::BaseStore::fence(&store, node);
    let coordinator = connect(url, node, NodeVersion::current()).await.unwrap();
    (Store::new(store), coordinator)
}

/// Node `node`'s coordinator on `url`, joining as `version`.
async fn connect(url: &str, node: &str, version: NodeVersion) -> Result<PgCoordinator, StoreError> {
    let joining = Joining {
        node,
        version,
        alive_s: 10,
    };
    PgCoordinator::connect(url, "test", joining).await
}

/// Ends every lease of `node` now, as if it had not renewed in time.
fn expire(schema: &str, node: &str) {
    admin(&format!(
        "UPDATE {schema}.leases SET expires = now() - interval '1 second' WHERE node = '{node}'"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_have_one_holder_and_move_once_expired() {
    let (schema, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    let (_b_store, b) = node(&url, "b").await;
    assert_eq!(
        a.heartbeat(10, &[]).await.unwrap(),
        2,
        "both nodes are alive"
    );
    let first = a.acquire(40, 10).await.unwrap();
    assert_eq!(first.len(), 40);
    let second = b.acquire(PARTITIONS as usize, 10).await.unwrap();
    assert_eq!(second.len(), PARTITIONS as usize - 40, "only the free ones");
    assert!(b.acquire(1, 10).await.unwrap().is_empty(), "none left");
    assert_eq!(a.renew(10).await.unwrap(), first, "a renews what it holds");

    // a stops renewing: once its leases expire, b takes them with a new generation.
    expire(&schema, "a");
    let taken = b.acquire(PARTITIONS as usize, 10).await.unwrap();
    assert_eq!(
        taken.iter().map(|l| l.partition).collect::<Vec<_>>(),
        first.iter().map(|l| l.partition).collect::<Vec<_>>()
    );
    assert!(
        taken
            .iter()
            .zip(&first)
            .all(|(t, f)| t.generation == f.generation + 1)
    );
    assert!(a.renew(10).await.unwrap().is_empty(), "a's leases are lost");

    // A partition given back is free at once; leaving gives back everything.
    b.release(&[3]).await.unwrap();
    assert_eq!(
        a.acquire(5, 10)
            .await
            .unwrap()
            .iter()
            .map(|l| l.partition)
            .collect::<Vec<_>>(),
        vec![3]
    );
    b.leave().await.unwrap();
    let nodes = a.nodes().await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(
        (nodes[0].id.as_str(), nodes[0].partitions.as_slice()),
        ("a", &[3][..])
    );
    assert_eq!(
        a.acquire(PARTITIONS as usize, 10).await.unwrap().len(),
        PARTITIONS as usize - 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_lease_can_neither_settle_nor_deliver() {
    let (schema, url) = schema();
    let (a_store, a) = node(&url, "a").await;
    let (b_store, b) = node(&url, "b").await;
    let mut wakeups = a.wakeups().unwrap();
    a.acquire(PARTITIONS as usize, 10).await.unwrap();
    let key = "agent:main:telegram:default:direct:42";

    // Any node accepts a message; the holder of its partition is woken.
    let seq = b_store
        .enqueue_unique("m1", &turn(key, "m1"))
        .await
        .unwrap()
        .unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(10), wakeups.recv()).await;
    assert_eq!(woken.unwrap(), Some(partition_of(key)));
    let record = RunRecord::for_test(&format!("run-{seq}"), key, &[seq]);
    let refused = b_store
        .settle_turn(&record, false, &chat("42"), "from b")
        .await;
    assert!(
        matches!(refused, Err(StoreError::NotOwner { .. })),
        "{refused:?}"
    );
    assert!(b_store.is_pending(seq).unwrap(), "nothing was written");

    // a stalls past its lease; b takes the partition over. a's run ends late: fenced.
    expire(&schema, "a");
    assert_eq!(
        b.acquire(PARTITIONS as usize, 10).await.unwrap().len(),
        PARTITIONS as usize
    );
    let stale = a_store
        .settle_turn(&record, false, &chat("42"), "from a")
        .await;
    assert!(
        matches!(stale, Err(StoreError::NotOwner { .. })),
        "{stale:?}"
    );
    let id = b_store
        .settle_turn(&record, false, &chat("42"), "from b")
        .await
        .unwrap();
    assert!(!b_store.is_pending(seq).unwrap());
    // Only the holder may attempt the delivery of the final.
    assert!(matches!(
        a_store.note_attempt(id),
        Err(StoreError::NotOwner { .. })
    ));
    assert_eq!(b_store.note_attempt(id).unwrap(), Some(1));
    let outbox = b_store.undelivered().unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].text, "from b");

    // The partition goes back to a, whose lane still held the turn: a second final for
    // a turn already answered is refused, and the outbox keeps the one answer.
    expire(&schema, "b");
    a.acquire(PARTITIONS as usize, 10).await.unwrap();
    let again = a_store
        .settle_turn(&record, false, &chat("42"), "from a, again")
        .await;
    assert!(
        matches!(again, Err(StoreError::AlreadySettled { .. })),
        "{again:?}"
    );
    assert_eq!(a_store.undelivered().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_not_seen_for_an_hour_is_forgotten_at_the_next_heartbeat() {
    let (schema, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    let (_b_store, b) = node(&url, "b").await;
    a.heartbeat(10, &[]).await.unwrap();
    b.heartbeat(10, &[]).await.unwrap();
    admin(&format!(
        "UPDATE {schema}.nodes SET last_seen = now() - interval '59 minutes' WHERE id = 'b'"
    ));
    a.heartbeat(10, &[]).await.unwrap();
    let listed: Vec<String> = a.nodes().await.unwrap().into_iter().map(|n| n.id).collect();
    assert_eq!(
        listed,
        ["a", "b"],
        "a node gone for less than an hour is still listed"
    );
    admin(&format!(
        "UPDATE {schema}.nodes SET last_seen = now() - interval '61 minutes' WHERE id = 'b'"
    ));
    a.heartbeat(10, &[]).await.unwrap();
    let listed: Vec<String> = a.nodes().await.unwrap().into_iter().map(|n| n.id).collect();
    assert_eq!(listed, ["a"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_events_reach_every_node_of_the_schema_and_no_other() {
    let (_, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    let (_b_store, b) = node(&url, "b").await;
    let (_, elsewhere_url) = schema();
    let (_c_store, c) = node(&elsewhere_url, "a").await;
    let mut at_a = a.remote_events().unwrap();
    let mut at_b = b.remote_events().unwrap();
    let mut at_c = c.remote_events().unwrap();
    assert!(a.remote_events().is_none(), "only the first call gets them");
    a.publish_events("{\"hello\":1}".into()).await.unwrap();
    let wait = Duration::from_secs(10);
    for rx in [&mut at_a, &mut at_b] {
        let got = tokio::time::timeout(wait, rx.recv()).await.unwrap();
        assert_eq!(got.as_deref(), Some("{\"hello\":1}"));
    }
    c.publish_events("{\"other\":2}".into()).await.unwrap();
    let got = tokio::time::timeout(wait, at_c.recv()).await.unwrap();
    assert_eq!(
        got.as_deref(),
        Some("{\"other\":2}"),
        "the other schema's own only"
    );
    assert!(at_a.try_recv().is_err() && at_b.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_protocol_is_refused_while_a_live_node_speaks_this_one() {
    let (schema, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    let newer = NodeVersion {
        version: "9.9.9".into(),
        protocol: crate::store::PROTOCOL + 1,
    };
    let refused = connect(&url, "b", newer.clone()).await.err().unwrap();
    let StoreError::ProtocolMismatch { node, theirs, ours } = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        (node.as_str(), theirs, ours),
        ("a", &NodeVersion::current(), &newer)
    );
    let text = refused.to_string();
    assert!(text.contains("node a ") && text.contains("9.9.9"), "{text}");
    // Another build of the same protocol joins; the nodes list what each runs.
    let other_build = NodeVersion {
        version: "0.0.1-other".into(),
        protocol: crate::store::PROTOCOL,
    };
    let c = connect(&url, "c", other_build.clone()).await.unwrap();
    let versions: Vec<(String, NodeVersion)> = c
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.id, n.version))
        .collect();
    assert_eq!(
        versions,
        [
            ("a".into(), NodeVersion::current()),
            ("c".into(), other_build)
        ]
    );
    // A node not seen within the lease does not hold the others back.
    admin(&format!(
        "UPDATE {schema}.nodes SET last_seen = now() - interval '30 seconds'"
    ));
    drop(a);
    connect(&url, "b", newer).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_context_is_shared_by_the_nodes_and_kept_within_its_caps() {
    let (_, url) = schema();
    let (a, _) = node(&url, "a").await;
    let (b, _) = node(&url, "b").await;
    // Both nodes append at once: no line is lost to the other's write.
    let writers: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .map(|(n, store)| {
            std::thread::spawn(move || {
                for i in 0..10 {
                    store
                        .append_group_line("g", &format!("{n}: {i}"), 50, 3)
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let lines = b.take_group_history("g").unwrap();
    assert_eq!(lines.len(), 20, "{lines:?}");
    assert!(a.take_group_history("g").unwrap().is_empty(), "taken once");
    // Past the cap of groups, the least recently touched one is forgotten.
    for group in ["g1", "g2", "g3", "g4"] {
        a.append_group_line(group, "x: y", 50, 3).unwrap();
    }
    let kept: Vec<String> = b
        .group_histories()
        .unwrap()
        .into_iter()
        .map(|g| g.0)
        .collect();
    assert_eq!(kept, ["g2", "g3", "g4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_different_groups_over_the_cap_do_not_deadlock() {
    let (_, url) = schema();
    let (a, _) = node(&url, "a").await;
    let (b, _) = node(&url, "b").await;
    // Four writers (two per node, each node's on its own connections), each touching five
    // groups of its own in turn, over a cap of 15 groups: writes trim the oldest groups,
    // often another writer's, which it may be writing at that moment.
    let writers: Vec<_> = [a.clone(), a, b.clone(), b]
        .into_iter()
        .enumerate()
        .map(|(n, store)| {
            std::thread::spawn(move || {
                for i in 0..300 {
                    let group = format!("g{n}-{}", i % 5);
                    store.append_group_line(&group, &format!("{n}: {i}"), 5, 15)?;
                }
                Ok::<(), StoreError>(())
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap().unwrap();
    }
}

#[test]
fn long_schema_names_get_channels_of_their_own() {
    assert_eq!(channel_name("e1"), "chela_events.e1");
    let a = channel_name(&format!("{}a", "x".repeat(60)));
    let b = channel_name(&format!("{}b", "x".repeat(60)));
    assert_ne!(a, b);
    assert!(a.len() <= 63 && a.starts_with("chela_events."), "{a}");
}
