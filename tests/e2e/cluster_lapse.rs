//! End-to-end, a cluster node whose leases lapse for a moment (its renewals late, as under a
//! CPU storm) and which takes them back itself: the messages waiting in its lanes are handed
//! out again, and each is still answered exactly once, in order. Needs `CHELA_TEST_PG_URL`
//! (scripts/test.sh).

use crate::common;

use std::time::Duration;

use common::cluster::{execute, query, schema_of, start_node};
use common::pg::fresh_store_url;
use common::telegram::{TgConfig, TgSetup, dm};

/// How many partitions `node` holds now, and how many messages wait in the queue.
async fn held_and_pending(schema: &str, node: &str) -> (i64, i64) {
    let held =
        format!("SELECT count(*) FROM {schema}.leases WHERE node = '{node}' AND expires > now()");
    let pending = format!("SELECT count(*) FROM {schema}.pending");
    let count = |rows: Vec<tokio_postgres::Row>| rows.first().map_or(0, |r| r.get(0));
    (count(query(&held).await), count(query(&pending).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_that_lapse_and_come_back_answer_each_waiting_message_once() {
    let url = fresh_store_url().await;
    let schema = schema_of(&url);
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "dm_policy = \"open\"",
        tables: "[cluster]\nenabled = true\nlease_s = 3\n",
        ..TgConfig::default()
    })
    .await;
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let node = start_node(&s.setup, &base, &url, 0, "warn,chela::cluster=info");
    let state = || common::cluster::block_on(held_and_pending_owned(schema.clone()));
    assert!(
        s.tg.wait_for(|_| state().0 == 64, Duration::from_secs(60))
            .await,
        "the node never held every partition"
    );

    // The first message is answered slowly: the two others wait in its lane meanwhile.
    let (chat, ann) = dm(42, "Ann");
    for text in ["after 2500 one", "after 10 two", "after 10 three"] {
        s.tg.user_sends(chat.clone(), ann.clone(), text);
    }
    let first_asked = s.tg.wait_for(
        |_| !s.setup.model_calls().is_empty(),
        Duration::from_secs(60),
    );
    assert!(first_asked.await);
    // Every lease lapses (as if no renewal came in time); nobody else takes them.
    let lapsed = execute(&format!(
        "UPDATE {schema}.leases SET expires = now() - interval '1 second' WHERE node = 'node0'"
    ))
    .await;
    assert_eq!(lapsed, 64);

    let answered = |s: &TgSetup| s.texts(42).len() >= 3 && state().1 == 0;
    assert!(
        s.tg.wait_for(|_| answered(&s), Duration::from_secs(120))
            .await
    );
    // A fourth message queues behind anything the lane still holds: once it is answered, a
    // second run of the first three would have answered too.
    s.tg.user_sends(chat, ann, "after 10 four");
    let fourth = |s: &TgSetup| s.texts(42).iter().any(|t| t == "ok: four");
    assert!(s.tg.wait_for(|_| fourth(&s), Duration::from_secs(60)).await);
    node.signal("TERM");
    let stderr = node.finish().await.stderr;
    assert!(
        stderr.contains("lease lost"),
        "the leases did not lapse: {stderr}"
    );
    assert_eq!(
        s.texts(42),
        ["ok: one", "ok: two", "ok: three", "ok: four"],
        "stderr: {stderr}"
    );
}

/// [`held_and_pending`] for node0, owning its schema (for `block_on`).
async fn held_and_pending_owned(schema: String) -> (i64, i64) {
    held_and_pending(&schema, "node0").await
}
