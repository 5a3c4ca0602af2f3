//! End-to-end, Discord with `[channels.discord] shards = 2` on two `chela gateway` nodes
//! sharing one PostgreSQL (`[cluster] enabled`): each node runs one shard (its intake lease,
//! `intake:discord#<id>/2`), messages in guilds of both shards are answered once, and after a
//! kill -9 of a node its shard moves to the other, which answers what was sent meanwhile
//! (read from history after its READY) once. Needs `CHELA_TEST_PG_URL` (scripts/test.sh).

use crate::common;

use std::time::{Duration, Instant};

use chela_testkit::discord::{ChannelSpec, UserSpec, shard_of};
use common::Chat;
use common::cluster::{
    block_on, db_now_ms, first_lease_end_ms, node_command, query, query_checked, schema_of,
    status_command,
};
use common::discord::{DcConfig, DcSetup};
use common::pg::fresh_store_url;

/// A guild of shard 0 and one of shard 1 (of 2), with a text channel each.
const EVEN: u64 = 2_000 << 22;
const ODD: u64 = 2_001 << 22;
const NODES: usize = 2;
const WAIT: Duration = Duration::from_secs(60);

fn ann() -> UserSpec {
    UserSpec::new(7401, "ann")
}

/// The texts of the bot's messages in `channel`, trimmed.
fn texts(s: &DcSetup, channel: u64) -> Vec<String> {
    s.texts(channel)
        .iter()
        .map(|t| t.trim_end().into())
        .collect()
}

/// The query of the unexpired Discord shard leases.
fn holders_sql(schema: &str) -> String {
    format!(
        "SELECT name, node FROM {schema}.intake_leases WHERE name LIKE 'intake:discord#%' \
         AND node IS NOT NULL AND expires > now() ORDER BY name"
    )
}

/// (lease name, node) of each row.
fn holders_of(rows: &[tokio_postgres::Row]) -> Vec<(String, String)> {
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// The unexpired Discord shard leases: (lease name, node), by name (the schema must exist).
async fn shard_holders(schema: &str) -> Vec<(String, String)> {
    holders_of(&query_checked(&holders_sql(schema)).await)
}

/// [`shard_holders`] from a synchronous predicate.
fn holders_now(schema: &str) -> Vec<(String, String)> {
    let schema = schema.to_owned();
    block_on(async move { shard_holders(&schema).await })
}

/// [`holders_now`] while the nodes may not have migrated the store yet: nobody holds
/// anything then.
fn holders_once_migrated(schema: &str) -> Vec<(String, String)> {
    let sql = holders_sql(schema);
    block_on(async move { holders_of(&query(&sql).await) })
}

/// The nodes advertising the layout `discord#/2` (an unexpired row), by id (the schema must
/// exist).
async fn advertising(schema: &str) -> Vec<String> {
    let sql = format!(
        "SELECT node FROM {schema}.intake_layouts WHERE layout = 'discord#/2' \
         AND expires > now() ORDER BY node"
    );
    let rows = query_checked(&sql).await;
    rows.iter().map(|r| r.get(0)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_run_a_shard_each_and_a_killed_nodes_shard_moves() {
    assert_eq!((shard_of(Some(EVEN), 2), shard_of(Some(ODD), 2)), (0, 1));
    let url = fresh_store_url().await;
    let schema = schema_of(&url);
    let s = DcSetup::with(DcConfig {
        mode: "followup",
        discord: "group_policy = \"open\"\ndm_policy = \"open\"\nshards = 2",
        ..DcConfig::default()
    })
    .await;
    s.dc.add_guild(EVEN, "even");
    s.dc.add_guild(ODD, "odd");
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let start = |i: usize| {
        let config = format!("{base}\n[cluster]\nenabled = true\nnode_id = \"node{i}\"\n");
        let mut cmd = node_command(&s.setup, &config, &url, i, "gateway");
        cmd.env(
            "RUST_LOG",
            "warn,chela::gateway=info,chela::intake=info,chela::cluster=info,chela_discord=info",
        );
        Chat::spawn(cmd)
    };
    let mut nodes: Vec<Option<Chat>> = (0..NODES).map(|i| Some(start(i))).collect();

    // Each node runs one shard: two leases, two holders, both shards connected.
    let spread =
        s.dc.wait_for(
            |d| {
                let held = holders_once_migrated(&schema);
                d.connected_shards() == [[0, 2], [1, 2]]
                    && held.len() == 2
                    && held[0].1 != held[1].1
            },
            WAIT,
        )
        .await;
    assert!(
        spread,
        "shards not spread: {:?}",
        shard_holders(&schema).await
    );
    // Both run the layout, and say so (the share counts the nodes that do).
    assert_eq!(advertising(&schema).await, ["node0", "node1"]);

    let (even, odd, dm) = (EVEN + 1, ODD + 1, 3_500_001);
    s.mention(ChannelSpec::guild_text(EVEN, even), ann(), "first even");
    s.mention(ChannelSpec::guild_text(ODD, odd), ann(), "first odd");
    s.dc.user_sends(ChannelSpec::dm(dm), UserSpec::new(7402, "bo"), "first dm");
    let answered =
        s.dc.wait_for(
            |_| {
                texts(&s, even) == ["ok: first even"]
                    && texts(&s, odd) == ["ok: first odd"]
                    && texts(&s, dm) == ["ok: first dm"]
            },
            WAIT,
        )
        .await;
    assert!(
        answered,
        "{:?} {:?} {:?}",
        texts(&s, even),
        texts(&s, odd),
        texts(&s, dm)
    );

    // kill -9 the node running shard 1; a message to its guild is sent while it is gone.
    let held = shard_holders(&schema).await;
    let victim = held
        .iter()
        .find(|(name, _)| name == "intake:discord#1/2")
        .map(|(_, node)| node.clone())
        .unwrap();
    let v: usize = victim.trim_start_matches("node").parse().unwrap();
    let survivor = format!("node{}", 1 - v);
    // Read before the kill (a renewal meanwhile only moves the end later).
    let leases_end = first_lease_end_ms(&schema, &victim)
        .await
        .expect("the victim's leases");
    nodes[v].take().unwrap().kill().await;
    let killed = Instant::now();
    s.mention(ChannelSpec::guild_text(ODD, odd), ann(), "while gone");
    let moved =
        s.dc.wait_for(
            |_| {
                holders_now(&schema)
                    .iter()
                    .all(|(_, node)| *node == survivor)
            },
            WAIT,
        )
        .await;
    let (moved_after, moved_ms) = (killed.elapsed(), db_now_ms().await);
    let advertised_after = advertising(&schema).await;
    let again = s.dc.wait_for(|_| texts(&s, odd).len() >= 2, WAIT).await;
    let answered_after = killed.elapsed();
    // A second answer would be out once the nodes stopped (below).

    // `chela status` (beside the running node: a cluster shares the store) shows its shards.
    let status = common::run_to_end(status_command(&s.setup, &url, 1 - v)).await;
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let mut stderr = String::new();
    for node in nodes.into_iter().flatten() {
        node.signal("TERM");
        stderr.push_str(&node.finish().await.stderr);
    }
    assert!(
        moved,
        "shard 1 did not move to {survivor}: {:?}\n{stderr}",
        shard_holders(&schema).await
    );
    assert!(
        again,
        "not answered after the kill: {:?}\n{stderr}",
        texts(&s, odd)
    );
    assert_eq!(
        texts(&s, odd),
        ["ok: first odd", "ok: while gone"],
        "{stderr}"
    );
    // The failover's bound as an order of events: the shard moved before the dead node's
    // first lease would have run out (its node lock went with its database session).
    assert!(
        moved_ms < leases_end,
        "shard 1 moved {} ms after the dead node's first lease ran out ({moved_after:?})",
        moved_ms - leases_end
    );
    assert!(advertised_after.contains(&survivor), "{advertised_after:?}");
    assert!(
        status.contains(&format!("\n  {victim} down (")),
        "the dead node is listed as down: {status}"
    );
    assert_eq!(texts(&s, even), ["ok: first even"]);
    assert_eq!(texts(&s, dm), ["ok: first dm"]);
    let asked = s.asked().concat();
    for text in ["first even", "first odd", "first dm", "while gone"] {
        assert_eq!(common::count(&asked, text), 1, "{text} asked once: {asked}");
    }
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("  {survivor} up: last heartbeat")))
        .unwrap_or_default();
    assert!(
        line.contains("intake:discord#0/2") && line.contains("intake:discord#1/2"),
        "{status}"
    );
    eprintln!(
        "discord shards: {victim} killed; shard 1 held by {survivor} after {moved_after:?}, \
         the message sent meanwhile answered after {answered_after:?} (lease_s = 10)"
    );
}
