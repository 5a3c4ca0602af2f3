//! Telegram and Discord adapters end to end: the release `chela gateway` binary against the
//! in-repo fakes (`FakeTelegram`, `FakeDiscord`) and a zero-delay `FakeModel`.
//!
//! Run with `cargo bench --bench channels` (release profile). Reports figures only; nothing
//! here asserts a time.
//!
//! Per platform, one gateway process (queue mode `followup`, so every message is its own turn):
//! - **latency**: [`SEQ`] messages one after another in one DM (after [`WARMUP`] unmeasured
//!   ones), from the fake user's message (`user_sends`) to the complete answer `ok: <text>`
//!   being the bot's last message in the fake. The bench waits with the fake's own `wait_for`,
//!   which re-checks on every change of the fake's state (call, message, poller): no sleep, so
//!   the granularity is one tokio wake-up.
//! - **fake round trip**: [`DIRECT`] `sendMessage` / `POST /channels/{c}/messages` calls sent
//!   straight to the fake from the bench with reqwest (one kept-alive connection), as the floor
//!   of one platform call.
//! - **API calls per reply**: the fake's recorded calls during the latency section (Telegram
//!   `getUpdates` polls left out), by method, divided by the number of replies.
//! - **throughput**: [`USERS`] users in their own DMs each send [`PER_USER`] messages at once
//!   (all `user_sends` in one go); time until all replies are present (checked every
//!   [`LOAD_POLL`]), messages per second, and the chela process's VmHWM afterwards.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chela_testkit::discord::{ChannelSpec, UserSpec as DcUser};
use chela_testkit::telegram::{ChatSpec, UserSpec as TgUser};
use chela_testkit::{FakeDiscord, FakeModel, FakeTelegram};
use tempfile::TempDir;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, Command};

/// The error type of every bench function (benches may not `unwrap`).
type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Measured sequential messages per platform.
const SEQ: usize = 100;
/// Unmeasured messages before them (connection set-up, first sled writes).
const WARMUP: usize = 5;
/// Direct calls to the fake for its own round trip.
const DIRECT: usize = 100;
/// Users (DMs) of the throughput section.
const USERS: usize = 50;
/// Messages each user sends at once in the throughput section.
const PER_USER: usize = 4;
/// Longest wait for one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest wait for all replies of the throughput section (reported as partial after it).
const LOAD_TIMEOUT: Duration = Duration::from_secs(40);
/// How often the throughput section checks for its replies.
const LOAD_POLL: Duration = Duration::from_millis(2);
/// Longest wait for the Discord gateway to be connected.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(40);

/// One line of the output table.
struct Row {
    platform: &'static str,
    metric: String,
    value: String,
}

/// The rows collected so far.
#[derive(Default)]
struct Table(Vec<Row>);

impl Table {
    fn add(&mut self, platform: &'static str, metric: impl Into<String>, value: impl Into<String>) {
        self.0.push(Row {
            platform,
            metric: metric.into(),
            value: value.into(),
        });
    }

    fn print(&self) {
        let w0 = self.0.iter().map(|r| r.platform.len()).max().unwrap_or(0);
        let w1 = self.0.iter().map(|r| r.metric.len()).max().unwrap_or(0);
        println!("{:<w0$}  {:<w1$}  value", "platform", "metric");
        println!("{}", "-".repeat(w0 + w1 + 30));
        for r in &self.0 {
            println!("{:<w0$}  {:<w1$}  {}", r.platform, r.metric, r.value);
        }
    }
}

/// p50 / p99 / mean / min / max of a set of durations.
fn summary(samples: &[Duration]) -> String {
    if samples.is_empty() {
        return "no samples".into();
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let n = s.len();
    let pct = |p: f64| s[(((p / 100.0) * n as f64).ceil() as usize).clamp(1, n) - 1];
    let total: Duration = s.iter().sum();
    let mean = total / u32::try_from(n).unwrap_or(u32::MAX);
    format!(
        "p50 {} | p99 {} | mean {} | min {} | max {} (n={n})",
        ms(pct(50.0)),
        ms(pct(99.0)),
        ms(mean),
        ms(s[0]),
        ms(s[n - 1])
    )
}

/// A duration in milliseconds, three decimals.
fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Calls by method, divided by `replies`, as `method x.yz, ...` plus the total.
fn per_reply(counts: &BTreeMap<String, usize>, replies: usize) -> (String, String) {
    let n = replies.max(1) as f64;
    let list: Vec<String> = counts
        .iter()
        .map(|(m, c)| format!("{m} {:.2}", *c as f64 / n))
        .collect();
    let total: usize = counts.values().sum();
    (format!("{:.2}", total as f64 / n), list.join(", "))
}

/// A temp dir (HOME of the gateway) with `config.toml`: the fake model, the `followup`
/// queue, and `channel` appended.
fn config_dir(model: &FakeModel, channel: &str) -> BenchResult<TempDir> {
    let dir = tempfile::tempdir()?;
    let config = format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"{}\"\napi_key = \"x\"\n\
         [store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\n\
         [queue]\nmode = \"followup\"\ncap = 100\n{channel}",
        model.openai_base_url()
    );
    std::fs::write(dir.path().join("config.toml"), config)?;
    Ok(dir)
}

/// A running `chela gateway` with its stderr collected.
struct Gateway {
    child: Child,
    /// Held open for the life of the process.
    _stdin: Option<ChildStdin>,
    log: Arc<Mutex<Vec<u8>>>,
}

impl Gateway {
    /// `chela --config <dir>/config.toml gateway`, HOME = `dir`, a clean environment (no
    /// OPENAI_*, TELEGRAM_*, DISCORD_*, CHELA_* variables).
    fn spawn(dir: &Path, rust_log: &str) -> BenchResult<Gateway> {
        let mut child = Command::new(common::chela_binary())
            .env_clear()
            .env("HOME", dir)
            .env("USER", "bench")
            .env("CHELA_RPC_LISTEN", "127.0.0.1:0") // the RPC runs, on a free port
            .env("RUST_LOG", rust_log)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(dir)
            .arg("--config")
            .arg(dir.join("config.toml"))
            .arg("gateway")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut from) = child.stderr.take() {
            let sink = Arc::clone(&log);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = from.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend_from_slice(&buf[..n]);
                }
            });
        }
        Ok(Gateway {
            _stdin: child.stdin.take(),
            child,
            log,
        })
    }

    fn pid(&self) -> BenchResult<u32> {
        self.child.id().ok_or_else(|| "chela gateway exited".into())
    }

    /// What the gateway logged so far.
    fn log(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned()
    }

    /// The last lines of the log, for error messages.
    fn tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Waits until the log contains `needle`.
    async fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(needle) {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Peak RSS (VmHWM) and current RSS, in KiB.
    fn memory(&self) -> BenchResult<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok((field("VmHWM:"), field("VmRSS:")))
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s.
    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            eprintln!("chela did not exit on SIGTERM; killing it");
            let _ = self.child.kill().await;
        }
    }
}

/// Direct round trips to a fake: `n` POSTs of `body(i)` to `url`, after 5 unmeasured ones.
async fn direct_round_trips(
    url: &str,
    auth: Option<String>,
    body: impl Fn(usize) -> serde_json::Value,
) -> BenchResult<Vec<Duration>> {
    let client = reqwest::Client::new();
    let mut samples = Vec::with_capacity(DIRECT);
    for i in 0..DIRECT + 5 {
        let mut req = client.post(url).json(&body(i));
        if let Some(auth) = &auth {
            req = req.header("Authorization", auth);
        }
        let t0 = Instant::now();
        let resp = req.send().await?;
        let status = resp.status();
        let _ = resp.bytes().await?;
        let took = t0.elapsed();
        if !status.is_success() {
            return Err(format!("direct call to {url}: HTTP {status}").into());
        }
        if i >= 5 {
            samples.push(took);
        }
    }
    Ok(samples)
}

/// Messages per second of `done` replies over `took`.
fn rate(done: usize, took: Duration) -> String {
    format!("{:.1} msgs/s", done as f64 / took.as_secs_f64())
}

/// Throughput figures: replies present, time, rate and memory.
fn load_rows(
    table: &mut Table,
    platform: &'static str,
    done: usize,
    took: Duration,
    memory: BenchResult<(u64, u64)>,
) {
    let total = USERS * PER_USER;
    let what = format!("throughput ({USERS} DMs x {PER_USER} msgs at once)");
    if done == total {
        table.add(
            platform,
            what,
            format!("{total} replies in {} = {}", ms(took), rate(total, took)),
        );
    } else {
        table.add(
            platform,
            what,
            format!(
                "TIMEOUT: {done}/{total} replies after {} ({})",
                ms(took),
                rate(done, took)
            ),
        );
    }
    match memory {
        Ok((hwm, rss)) => table.add(
            platform,
            "chela peak RSS after throughput",
            format!(
                "VmHWM {:.1} MiB (VmRSS now {:.1} MiB)",
                hwm as f64 / 1024.0,
                rss as f64 / 1024.0
            ),
        ),
        Err(e) => table.add(
            platform,
            "chela peak RSS after throughput",
            format!("n/a: {e}"),
        ),
    }
}

async fn telegram(table: &mut Table) -> BenchResult {
    const P: &str = "telegram";
    let model = FakeModel::start().await?;
    let tg = FakeTelegram::start().await?;
    let dir = config_dir(
        &model,
        &format!(
            "[channels.telegram]\ntoken = \"{}\"\napi_url = \"{}\"\ndm_policy = \"open\"\n\
             poll_timeout_s = 1\n",
            tg.token(),
            tg.api_url()
        ),
    )?;
    let spawned = Instant::now();
    let gw = Gateway::spawn(dir.path(), "warn")?;
    let (chat, user) = (ChatSpec::private(42), TgUser::new(42, "Ann"));

    // Sequential latency (warm-up first).
    let mut samples = Vec::with_capacity(SEQ);
    let mut calls_from = 0;
    for i in 0..WARMUP + SEQ {
        if i == WARMUP {
            calls_from = tg.calls().len();
        }
        let text = format!("seq {i}");
        let want = format!("ok: {text}");
        let t0 = Instant::now();
        tg.user_sends(chat.clone(), user.clone(), &text);
        let timeout = if i == 0 {
            REPLY_TIMEOUT * 2
        } else {
            REPLY_TIMEOUT
        };
        let answered = tg
            .wait_for(
                |t| t.sent(42).last().is_some_and(|m| m.text == want),
                timeout,
            )
            .await;
        let took = t0.elapsed();
        if !answered {
            let tail = gw.tail();
            gw.stop().await;
            return Err(format!("telegram: no answer to {text:?}\n{tail}").into());
        }
        if i == 0 {
            table.add(
                P,
                "first reply after spawn (startup + warm-up)",
                ms(spawned.elapsed()),
            );
        }
        if i >= WARMUP {
            samples.push(took);
        }
    }
    // Let trailing calls of the last reply land before counting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut counts = BTreeMap::new();
    for c in &tg.calls()[calls_from..] {
        if c.method != "getupdates" {
            *counts.entry(c.method.clone()).or_insert(0usize) += 1;
        }
    }
    table.add(
        P,
        format!("latency user msg -> final text ({SEQ} seq, 1 DM)"),
        summary(&samples),
    );

    // The fake's own round trip.
    let url = format!("{}/bot{}/sendMessage", tg.api_url(), tg.token());
    let direct = direct_round_trips(
        &url,
        None,
        |i| serde_json::json!({ "chat_id": 42, "text": format!("direct {i}") }),
    )
    .await?;
    table.add(P, "fake round trip (direct sendMessage)", summary(&direct));
    let (total, list) = per_reply(&counts, SEQ);
    table.add(P, "API calls per reply (excl. getUpdates)", total);
    table.add(P, "  by method", list);

    // Throughput.
    let ids: Vec<i64> = (1001..).take(USERS).collect();
    let expected: Vec<HashSet<String>> = ids
        .iter()
        .map(|id| (0..PER_USER).map(|k| format!("ok: u{id} m{k}")).collect())
        .collect();
    let t0 = Instant::now();
    for &id in &ids {
        let (chat, user) = (ChatSpec::private(id), TgUser::new(id, &format!("U{id}")));
        for k in 0..PER_USER {
            tg.user_sends(chat.clone(), user.clone(), &format!("u{id} m{k}"));
        }
    }
    let count = || -> usize {
        ids.iter()
            .zip(&expected)
            .map(|(&id, want)| {
                tg.sent(id)
                    .iter()
                    .filter(|m| want.contains(&m.text))
                    .count()
            })
            .sum()
    };
    let done = poll_until(count, USERS * PER_USER).await;
    let took = t0.elapsed();
    load_rows(table, P, done, took, gw.memory());
    if done < USERS * PER_USER {
        eprintln!("telegram throughput timed out; log tail:\n{}", gw.tail());
    }
    gw.stop().await;
    Ok(())
}

/// Calls `count` every [`LOAD_POLL`] until it reaches `total` or [`LOAD_TIMEOUT`] passes;
/// the last count.
async fn poll_until(count: impl Fn() -> usize, total: usize) -> usize {
    let deadline = Instant::now() + LOAD_TIMEOUT;
    loop {
        let done = count();
        if done >= total || Instant::now() >= deadline {
            return done;
        }
        tokio::time::sleep(LOAD_POLL).await;
    }
}

/// `/channels/123/messages/456` -> `/channels/{id}/messages/{id}`.
fn route(path: &str) -> String {
    path.split('/')
        .map(|s| {
            if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                "{id}"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn discord(table: &mut Table) -> BenchResult {
    const P: &str = "discord";
    let model = FakeModel::start().await?;
    let dc = FakeDiscord::start().await?;
    let dir = config_dir(
        &model,
        &format!(
            "[channels.discord]\ntoken = \"{}\"\napi_url = \"{}\"\ngateway_url = \"{}\"\n\
             dm_policy = \"open\"\ngroup_policy = \"open\"\nrequire_mention = false\n",
            dc.token(),
            dc.rest_url(),
            dc.gateway_url()
        ),
    )?;
    let spawned = Instant::now();
    let gw = Gateway::spawn(dir.path(), "warn,chela_discord=info")?;
    // Messages sent before the handler saw READY would be lost: wait for it.
    let ready = dc
        .wait_for(
            |d| d.connected() && d.dispatches().iter().any(|x| x["t"] == "READY"),
            CONNECT_TIMEOUT,
        )
        .await;
    if !ready || !gw.wait_log("discord connected", CONNECT_TIMEOUT).await {
        let tail = gw.tail();
        gw.stop().await;
        return Err(format!("discord: gateway never connected\n{tail}").into());
    }
    table.add(
        P,
        "connected after spawn (READY handled)",
        ms(spawned.elapsed()),
    );

    let (channel, user) = (ChannelSpec::dm(500), DcUser::new(42, "ann"));
    let mut samples = Vec::with_capacity(SEQ);
    let mut calls_from = 0;
    for i in 0..WARMUP + SEQ {
        if i == WARMUP {
            calls_from = dc.calls().len();
        }
        let text = format!("seq {i}");
        let want = format!("ok: {text}");
        let t0 = Instant::now();
        dc.user_sends(channel.clone(), user.clone(), &text);
        let answered = dc
            .wait_for(
                |d| d.sent(500).last().is_some_and(|m| m.content == want),
                REPLY_TIMEOUT,
            )
            .await;
        let took = t0.elapsed();
        if !answered {
            let tail = gw.tail();
            gw.stop().await;
            return Err(format!("discord: no answer to {text:?}\n{tail}").into());
        }
        if i >= WARMUP {
            samples.push(took);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut counts = BTreeMap::new();
    for c in &dc.calls()[calls_from..] {
        *counts
            .entry(format!("{} {}", c.method, route(&c.path)))
            .or_insert(0usize) += 1;
    }
    table.add(
        P,
        format!("latency user msg -> final text ({SEQ} seq, 1 DM)"),
        summary(&samples),
    );

    let url = format!("{}/api/v10/channels/500/messages", dc.rest_url());
    let direct = direct_round_trips(
        &url,
        Some(format!("Bot {}", dc.token())),
        |i| serde_json::json!({ "content": format!("direct {i}") }),
    )
    .await?;
    table.add(P, "fake round trip (direct POST message)", summary(&direct));
    let (total, list) = per_reply(&counts, SEQ);
    table.add(P, "API calls per reply", total);
    table.add(P, "  by method", list);

    // Throughput: 50 DM channels, one user each.
    let ids: Vec<u64> = (2001..).take(USERS).collect();
    let expected: Vec<HashSet<String>> = ids
        .iter()
        .map(|id| (0..PER_USER).map(|k| format!("ok: u{id} m{k}")).collect())
        .collect();
    let t0 = Instant::now();
    for &id in &ids {
        let (channel, user) = (
            ChannelSpec::dm(id),
            DcUser::new(id + 10_000, &format!("u{id}")),
        );
        for k in 0..PER_USER {
            dc.user_sends(channel.clone(), user.clone(), &format!("u{id} m{k}"));
        }
    }
    let count = || -> usize {
        ids.iter()
            .zip(&expected)
            .map(|(&id, want)| {
                dc.sent(id)
                    .iter()
                    .filter(|m| want.contains(&m.content))
                    .count()
            })
            .sum()
    };
    let done = poll_until(count, USERS * PER_USER).await;
    let took = t0.elapsed();
    load_rows(table, P, done, took, gw.memory());
    if done < USERS * PER_USER {
        eprintln!("discord throughput timed out; log tail:\n{}", gw.tail());
    }
    gw.stop().await;
    Ok(())
}

fn main() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let started = Instant::now();
    let mut table = Table::default();
    runtime.block_on(async {
        if let Err(e) = telegram(&mut table).await {
            table.add("telegram", "ERROR", e.to_string());
        }
        if let Err(e) = discord(&mut table).await {
            table.add("discord", "ERROR", e.to_string());
        }
    });
    println!(
        "chela channels bench: release `chela gateway` vs FakeTelegram / FakeDiscord, \
         zero-delay FakeModel, queue mode followup"
    );
    println!(
        "latency: waited on the fake's change notification (no polling sleep); \
         throughput: checked every {} ms",
        LOAD_POLL.as_millis()
    );
    println!();
    table.print();
    println!();
    println!("total bench time: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
