//! The node lock against a real PostgreSQL: a node whose coordinator connection ends (a
//! kill -9 closes it) loses its leases to the others at their next request, long before
//! they would expire; a running node's id cannot be taken by a second process; a lost
//! connection changes the node's lock epoch and is made again with the lock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::super::node_lock;
use super::tests::{node, schema};
use crate::store::postgres::testing::admin;
use crate::store::{Coordinator, PARTITIONS, StoreError};

/// Asks `until` every 50 ms, at most 200 times (the server ends a closed session's backend
/// asynchronously); whether it said yes.
async fn eventually(mut until: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..200 {
        if until().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_leases_go_to_the_others_long_before_they_expire() {
    let (_, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    let (_b_store, b) = node(&url, "b").await;
    // An hour-long lease: only the node lock can move it within this test.
    let held = a.acquire(PARTITIONS as usize, 3600).await.unwrap();
    assert_eq!(held.len(), PARTITIONS as usize);
    assert!(a.hold_intake("intake:telegram", 3600).await.unwrap());
    a.heartbeat(3600, &["agent:main:main".to_owned()])
        .await
        .unwrap();
    assert!(b.acquire(1, 3600).await.unwrap().is_empty(), "a lives");
    assert!(!b.hold_intake("intake:telegram", 3600).await.unwrap());
    assert_eq!(b.heartbeat(3600, &[]).await.unwrap(), 2);
    let seen = b.nodes().await.unwrap();
    assert!(seen.iter().all(|n| n.connected), "{seen:?}");
    assert_eq!(seen[0].runs, ["agent:main:main"]);
    assert_eq!(seen[0].partitions.len(), PARTITIONS as usize);

    drop(a);
    let mut taken = Vec::new();
    // b's heartbeats note a down; a second later its leases are b's to take.
    let moved = eventually(async || {
        b.heartbeat(3600, &[]).await.unwrap();
        taken.extend(b.acquire(PARTITIONS as usize, 3600).await.unwrap());
        taken.len() == PARTITIONS as usize
    })
    .await;
    assert!(moved, "b took {} partitions", taken.len());
    taken.sort_by_key(|l| l.partition);
    assert!(
        taken
            .iter()
            .zip(&held)
            .all(|(t, h)| t.generation == h.generation + 1),
        "each with a new generation"
    );
    assert!(b.hold_intake("intake:telegram", 3600).await.unwrap());
    assert_eq!(
        b.heartbeat(3600, &[]).await.unwrap(),
        1,
        "a no longer counts"
    );
    assert!(!b.dying(), "a holds nothing any more");
    let seen = b.nodes().await.unwrap();
    let a_seen = seen.iter().find(|n| n.id == "a").unwrap();
    assert!(!a_seen.connected);
    assert!(a_seen.partitions.is_empty() && a_seen.intakes.is_empty() && a_seen.runs.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_nodes_id_cannot_be_taken_by_another_process() {
    let (_, url) = schema();
    let (_a_store, _a) = node(&url, "a").await;
    let config: tokio_postgres::Config = url.parse().unwrap();
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let refused = node_lock::take(&client, "a", &[], 1).await;
    assert!(
        matches!(&refused, Err(StoreError::NodeIdInUse { node }) if node == "a"),
        "{refused:?}"
    );
    assert!(node_lock::take(&client, "other", &[], 1).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_changes_the_epoch_and_comes_back_with_the_lock() {
    let (schema, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    let (_b_store, b) = node(&url, "b").await;
    a.heartbeat(10, &[]).await.unwrap();
    assert_eq!(a.lock_epoch(), 0);
    admin(&format!(
        "SELECT pg_terminate_backend(backend_pid) FROM {schema}.nodes WHERE id = 'a'"
    ));
    assert!(
        eventually(async || a.lock_epoch() == 1).await,
        "the end was seen"
    );
    assert!(eventually(async || !b.nodes().await.unwrap()[0].connected).await);
    // b notes a down, but a connects again (taking its lock back) within the grace: its
    // leases stay its own, however long b waits after.
    let held = a.acquire(4, 3600).await.unwrap();
    assert_eq!(held.len(), 4, "a's next call connected again");
    admin(&format!(
        "SELECT pg_terminate_backend(backend_pid) FROM {schema}.nodes WHERE id = 'a'"
    ));
    assert!(eventually(async || a.lock_epoch() == 2).await);
    assert!(eventually(async || !b.nodes().await.unwrap()[0].connected).await);
    b.heartbeat(10, &[]).await.unwrap();
    assert!(b.dying(), "a holds leases without its lock");
    assert_eq!(a.heartbeat(10, &[]).await.unwrap(), 2);
    assert!(b.nodes().await.unwrap()[0].connected);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    b.heartbeat(10, &[]).await.unwrap();
    assert!(b.acquire(PARTITIONS as usize, 10).await.unwrap().len() < PARTITIONS as usize);
    assert_eq!(a.renew(3600).await.unwrap(), held, "a kept its leases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_id_another_process_took_while_it_reconnected_knows_it() {
    let (schema, url) = schema();
    let (_a_store, a) = node(&url, "a").await;
    a.heartbeat(10, &[]).await.unwrap();
    admin(&format!(
        "SELECT pg_terminate_backend(backend_pid) FROM {schema}.nodes WHERE id = 'a'"
    ));
    assert!(eventually(async || a.lock_epoch() == 1).await);
    // A second process with the same id starts meanwhile and gets the lock.
    let (_twin_store, twin) = node(&url, "a").await;
    assert!(!twin.usurped());
    let refused = a.heartbeat(10, &[]).await;
    assert!(
        matches!(&refused, Err(StoreError::NodeIdInUse { .. })),
        "{refused:?}"
    );
    assert!(a.usurped(), "the first process must stop");
    assert!(!twin.usurped());
}
