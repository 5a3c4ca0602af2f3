//! Several gateways on one PostgreSQL (docs/several-nodes.md): the release
//! `chela gateway` binary against `FakeTelegram` (long polling) and a zero-delay `FakeModel`.
//!
//! Run with `scripts/with-pg.sh cargo bench --features postgres --bench cluster` (`CHELA_BENCH_PART=failover`:
//! the failover and idle load only; `CHELA_BENCH_BIN`: another build's binary, for a before
//! figure; `CHELA_BENCH_LEASE_S`: another lease). It needs a PostgreSQL
//! (`CHELA_STORE_URL`, else the `CHELA_TEST_PG_URL` with-pg.sh sets; each setup gets a fresh
//! schema). Reports figures only; nothing here asserts a time.
//!
//! - **Load:** [`USERS`] users each send [`TURNS`] messages, one after the other (the next once
//!   the reply to the previous one is in the fake); reply latency is from the message reaching
//!   the fake to the reply reaching it. Run against one node on the embedded store, one node
//!   on PostgreSQL, and three nodes on PostgreSQL (`[cluster] enabled`, one of them polling);
//!   RSS per node at the end.
//! - **Failover:** with three nodes on the default lease, the node running a chat's session,
//!   then the node polling Telegram, is killed with kill -9 and the chat sends a message at
//!   once; the time until its reply arrives, [`FAILOVERS`] times each (the killed node is
//!   started again and the partitions spread before the next).
//! - **Idle database load:** the statements the database ran while three nodes idled for
//!   [`IDLE`], per node and second (`pg_stat_statements`, which `scripts/with-pg.sh` loads;
//!   without it the figure is left out). Nothing else may use the database meanwhile.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chela_testkit::telegram::{ChatSpec, UserSpec};
use chela_testkit::{FakeModel, FakeTelegram};
use common::{BenchResult, Summary, chela_binary, memory_of, mib, ms, row, table, tg_gateway};
use tokio::process::Child;

/// Users of the load.
const USERS: i64 = 20;
/// Messages per user.
const TURNS: usize = 25;
/// Kill -9 rounds of the failover.
const FAILOVERS: usize = 5;
/// `[cluster] lease_s` of the nodes: the default unless `CHELA_BENCH_LEASE_S` says.
fn lease_s() -> usize {
    common::env_or("CHELA_BENCH_LEASE_S", 10)
}
/// How long the idle nodes are watched.
const IDLE: Duration = Duration::from_secs(30);
/// Nodes of the cluster setups.
const NODES: usize = 3;
/// Longest wait for one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a waiting user looks for its reply.
const POLL: Duration = Duration::from_millis(5);
/// The first user id (private chat id = user id).
const FIRST_USER: i64 = 500;

/// A fresh schema of the database at `base`: its store URL.
async fn fresh_schema(base: &str) -> BenchResult<String> {
    let schema = format!("bench{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await?;
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}options=-csearch_path%3D{schema}"))
}

/// One setup: the fakes, the nodes' folders and processes.
struct Setup {
    model: FakeModel,
    tg: Arc<FakeTelegram>,
    dir: tempfile::TempDir,
    /// `None`: the embedded store.
    url: Option<String>,
    cluster: bool,
    nodes: Vec<Option<Child>>,
}

impl Setup {
    async fn new(url: Option<String>, cluster: bool) -> BenchResult<Setup> {
        let model = FakeModel::start().await?;
        let tg = Arc::new(FakeTelegram::start().await?);
        for user in FIRST_USER..FIRST_USER + USERS {
            tg.add_chat(ChatSpec::private(user));
        }
        Ok(Setup {
            model,
            tg,
            dir: tempfile::tempdir()?,
            url,
            cluster,
            nodes: Vec::new(),
        })
    }

    /// Starts node `i` (again) in `<dir>/node<i>`.
    fn start(&mut self, i: usize) -> BenchResult {
        let dir = self.dir.path().join(format!("node{i}"));
        std::fs::create_dir_all(&dir)?;
        let extra = match self.cluster {
            true => format!(
                "[cluster]\nenabled = true\nlease_s = {}\nnode_id = \"n{i}\"\n",
                lease_s()
            ),
            false => String::new(),
        };
        tg_gateway::write_config(&dir, &self.model, &self.tg, &extra)?;
        let child = spawn(&dir, self.url.as_deref())?;
        if self.nodes.len() <= i {
            self.nodes.resize_with(i + 1, || None);
        }
        self.nodes[i] = Some(child);
        Ok(())
    }

    /// RSS of each running node.
    fn rss(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flatten()
            .filter_map(|c| c.id())
            .filter_map(|pid| memory_of(&pid.to_string()).ok())
            .map(|m| mib(m.rss_kib))
            .collect()
    }
}

/// `chela gateway` in `dir` with a clean environment; on PostgreSQL when `url` is given.
fn spawn(dir: &Path, url: Option<&str>) -> BenchResult<Child> {
    let bin = chela_binary();
    match url {
        Some(url) => tg_gateway::spawn_with(&bin, dir, &[("CHELA_STORE_URL", url)]),
        None => tg_gateway::spawn(&bin, dir),
    }
}

/// Sends `text` from `user` and waits for the reply; its latency.
async fn turn(tg: &FakeTelegram, user: i64, text: &str) -> BenchResult<Duration> {
    let before = tg.sent(user).len();
    let started = Instant::now();
    tg.user_sends(ChatSpec::private(user), UserSpec::new(user, "u"), text);
    let want = format!("ok: {text}");
    while started.elapsed() < REPLY_TIMEOUT {
        let sent = tg.sent(user);
        if sent.len() > before && sent.iter().skip(before).any(|m| m.text == want) {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    Err(format!("no reply to {text:?} within {REPLY_TIMEOUT:?}").into())
}

/// The load: every user's turns, users at once; (latencies, wall time).
async fn load(tg: &Arc<FakeTelegram>, round: &str) -> BenchResult<(Vec<Duration>, Duration)> {
    let started = Instant::now();
    let mut users = Vec::new();
    for user in FIRST_USER..FIRST_USER + USERS {
        let tg = tg.clone();
        let round = round.to_owned();
        users.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for k in 0..TURNS {
                latencies.push(turn(&tg, user, &format!("{round} u{user} m{k}")).await?);
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(latencies)
        }));
    }
    let mut all = Vec::new();
    for user in users {
        all.extend(user.await??);
    }
    Ok((all, started.elapsed()))
}

/// Runs the load on `nodes` nodes; prints its table.
async fn measure(title: &str, url: Option<String>, nodes: usize) -> BenchResult {
    let mut s = Setup::new(url, nodes > 1).await?;
    for i in 0..nodes {
        s.start(i)?;
    }
    tg_gateway::wait_polling(&s.tg).await?;
    if nodes > 1 {
        wait_spread(&s, nodes).await?;
    }
    // A first message per user, so that sessions exist before the clock starts.
    load_once(&s.tg).await?;
    let (latencies, wall) = load(&s.tg, "load").await?;
    let summary = Summary::of(&latencies).ok_or("no turns")?;
    let turns = latencies.len();
    table(
        title,
        &[
            row("turns", format!("{turns} ({USERS} users x {TURNS})")),
            row("reply p50", ms(summary.p50)),
            row("reply p99", ms(summary.p99)),
            row(
                "throughput",
                format!("{:.0} turns/s", turns as f64 / wall.as_secs_f64()),
            ),
            row("RSS per node at the end", s.rss().join(", ")),
        ],
    );
    Ok(())
}

/// One message per user (not measured).
async fn load_once(tg: &FakeTelegram) -> BenchResult {
    for user in FIRST_USER..FIRST_USER + USERS {
        turn(tg, user, &format!("hello u{user}")).await?;
    }
    Ok(())
}

/// Who holds unexpired partition leases: (node, partitions).
async fn holders(url: &str) -> BenchResult<Vec<(String, i64)>> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT node, count(*) FROM leases WHERE node IS NOT NULL AND expires > now() \
             GROUP BY node ORDER BY node",
            &[],
        )
        .await
        .unwrap_or_default();
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Waits (2 minutes at most) until `nodes` nodes hold all 64 partitions between them.
async fn wait_spread(s: &Setup, nodes: usize) -> BenchResult {
    let url = s.url.as_deref().ok_or("no store URL")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let held = holders(url).await?;
        if held.len() == nodes && held.iter().map(|h| h.1).sum::<i64>() == 64 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("partitions not spread: {:?}", holders(url).await?).into())
}

/// The node (index) holding the partition of `user`'s session.
async fn owner_of(url: &str, user: i64) -> BenchResult<usize> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let keys = client.query("SELECT key FROM sessions", &[]).await?;
    let suffix = format!(":{user}");
    let key: String = keys
        .iter()
        .map(|r| r.get::<_, String>(0))
        .find(|k| k.ends_with(&suffix))
        .ok_or("no session of the user")?;
    let partition = i32::try_from(chela::store::partition_of(&key))?;
    let row = client
        .query_one(
            "SELECT node FROM leases WHERE partition = $1 AND expires > now()",
            &[&partition],
        )
        .await?;
    let node: String = row.get(0);
    Ok(node.trim_start_matches('n').parse()?)
}

/// The node (index) polling Telegram (holding the intake lease).
async fn poller(url: &str) -> BenchResult<usize> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT node FROM intake_leases WHERE name = 'intake:telegram' AND expires > now()",
            &[],
        )
        .await?;
    let node: String = row.get(0);
    Ok(node.trim_start_matches('n').parse()?)
}

/// The statements the database ran so far (`pg_stat_statements`), if it counts them.
async fn statements(url: &str) -> Option<i64> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .ok()?;
    tokio::spawn(connection);
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public")
        .await
        .ok()?;
    let row = client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::bigint FROM public.pg_stat_statements s \
             JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()",
            &[],
        )
        .await
        .ok()?;
    Some(row.get(0))
}

/// kill -9 of the node running a chat's session, then of the node polling Telegram,
/// [`FAILOVERS`] times each, and the idle database load; prints the tables.
async fn failover(url: String) -> BenchResult {
    let mut s = Setup::new(Some(url.clone()), true).await?;
    for i in 0..NODES {
        s.start(i)?;
    }
    tg_gateway::wait_polling(&s.tg).await?;
    wait_spread(&s, NODES).await?;
    load_once(&s.tg).await?;
    let before = statements(&url).await;
    tokio::time::sleep(IDLE).await;
    let idle = match (before, statements(&url).await) {
        // Less the two statements that read the count.
        (Some(before), Some(after)) => format!(
            "{:.2}",
            (after - before - 2) as f64 / IDLE.as_secs_f64() / NODES as f64
        ),
        _ => "n/a (PostgreSQL without pg_stat_statements)".to_owned(),
    };
    let mut rows = Vec::new();
    for (what, kill_poller) in [("session holder", false), ("poller", true)] {
        let mut times = Vec::new();
        for round in 0..FAILOVERS {
            let user = FIRST_USER + round as i64 + if kill_poller { 10 } else { 0 };
            let victim = match kill_poller {
                true => poller(&url).await?,
                false => owner_of(&url, user).await?,
            };
            if let Some(mut node) = s.nodes[victim].take() {
                node.start_kill()?;
                let _ = node.wait().await;
            }
            let took = turn(&s.tg, user, &format!("after kill {what} {round}")).await?;
            rows.push(row(
                format!("{what} killed, round {} (node n{victim})", round + 1),
                ms(took),
            ));
            times.push(took);
            s.start(victim)?;
            wait_spread(&s, NODES).await?;
        }
        let summary = Summary::of(&times).ok_or("no rounds")?;
        let worst = times.iter().max().copied().unwrap_or_default();
        rows.push(row(format!("{what}: median"), ms(summary.p50)));
        rows.push(row(format!("{what}: slowest"), ms(worst)));
    }
    table(
        &format!(
            "failover after kill -9, three nodes, lease_s = {}",
            lease_s()
        ),
        &rows,
    );
    table(
        "database load at idle, three nodes",
        &[row("statements per node and second", idle)],
    );
    Ok(())
}

#[tokio::main]
async fn main() -> BenchResult {
    // scripts/with-pg.sh sets CHELA_TEST_PG_URL.
    let url = ["CHELA_STORE_URL", "CHELA_TEST_PG_URL"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .ok_or(
            "no PostgreSQL: run scripts/with-pg.sh cargo bench --features postgres --bench cluster",
        )?;
    println!("chela cluster bench (release gateways, FakeTelegram long polling, FakeModel)");
    if std::env::var("CHELA_BENCH_PART").as_deref() == Ok("failover") {
        return failover(fresh_schema(&url).await?).await;
    }
    measure("one node, embedded store (redb)", None, 1).await?;
    measure("one node, PostgreSQL", Some(fresh_schema(&url).await?), 1).await?;
    measure(
        "three nodes, PostgreSQL",
        Some(fresh_schema(&url).await?),
        NODES,
    )
    .await?;
    failover(fresh_schema(&url).await?).await?;
    Ok(())
}
