//! Cost of chela's ACP runtime (coding agents bound to a conversation) over the agent itself.
//!
//! Run with `cargo bench --bench acp` (release profile), or `benches/run.sh acp`. Reports
//! figures only; nothing here asserts a time.
//!
//! The agent is the testkit's scripted `fake-acp-agent` (a plain-text prompt `hello N` is
//! answered `echo: hello N` in 3 `agent_message_chunk` updates, then `end_turn`), the release
//! build next to this bench's profile dir; the bench runs `cargo build --release -p
//! chela-testkit --bin fake-acp-agent` into its own target dir first. Chela runs in process:
//! a [`Gateway`] over a [`CaptureChannel`] named `terminal` (a direct, terminal-like
//! conversation whose user may run `/acp`), with `[acp.agents.fake]` pointing at the agent.
//!
//! Sections:
//! - **(1) agent alone**: [`RawAgent`], a hand-written newline-delimited JSON-RPC driver (no
//!   chela code, no ACP crate, blocking stdio), does `initialize`, `session/new`, then
//!   [`WARM_TURNS`] `session/prompt` turns one after another (after [`WARMUP_TURNS`]); per-turn
//!   latency from writing the prompt to reading its response.
//! - **(2) through chela, warm**: `/acp spawn fake --bind here`, then the same number of plain
//!   messages one after another in that conversation; latency from `Router::accept_for` to the
//!   channel's `reply_done` with the whole reply shown (as `turns` measures). Chela's added
//!   latency per turn is estimated as (2) - (1) at p50 and p99 (different runs, not paired).
//! - **(3) through chela, cold**: a conversation is bound and warmed with one turn, then
//!   [`COLD_RUNS`] times a fresh gateway is started on the same store with no agent process
//!   live: its first message starts the agent, `initialize`s, resumes with `session/load` and
//!   runs the prompt. Compared with the raw driver doing spawn + `initialize` +
//!   `session/load` of the same session + the prompt.
//! - **(4) memory per live session**: VmRSS of this process (which hosts the gateway; agents
//!   are separate processes) before and after [`MEM_SESSIONS`] more conversations are each
//!   bound and warmed with one turn (after one such conversation as a warm-up), divided by
//!   their number; and the agents' own VmRSS, summed.
//! - **(5) real agent, if installed**: (1)-(3) again against `@zed-industries/codex-acp`
//!   (`CODEX_HOME` pointing at `chela_testkit::FakeModel`'s Responses API) with fewer turns,
//!   and acpx 0.19.1 running one-shot `exec` turns against the same agent: wall time per turn
//!   and the peak RSS (VmHWM polled from `/proc`) of acpx's node process and of the agent. The
//!   packages are looked up in `tests/conformance/acp/node_modules` (or the folder named by
//!   `CHELA_ACP_CONFORMANCE_DIR`); missing ones are skipped with a note.
//!
//! Each section runs in a child process of this binary (`--section NAME` runs one directly)
//! that is killed after its deadline, so a hang is reported instead of stalling the bench.

#[path = "common/acp_driver.rs"]
mod acp_driver;
mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use acp_driver::RawAgent;
use chela::config::{Config, HarnessConfig, ProviderKind};
use chela::gateway::Gateway;
use chela_channel::{Channel, ChatKind, Conversation, Inbound, Sender};
use common::capture::CaptureChannel;
use common::{BenchResult, Summary, mib, ms, ms_diff, row, table};

/// Measured turns of the warm sections against the fake agent.
const WARM_TURNS: usize = 200;
/// Unmeasured turns before them (same session).
const WARMUP_TURNS: usize = 10;
/// Cold first turns measured (each on a fresh gateway, or a fresh raw agent process).
const COLD_RUNS: usize = 10;
/// Conversations bound for the memory section.
const MEM_SESSIONS: usize = 20;
/// Warm turns against the real agent.
const REAL_WARM_TURNS: usize = 20;
/// Cold turns against the real agent.
const REAL_COLD_RUNS: usize = 5;
/// One-shot acpx turns.
const ACPX_RUNS: usize = 5;
/// Longest wait for one reply before the bench gives up on it.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// Name of the capture channel: the local terminal's, whose user may run `/acp`.
const CHANNEL: &str = "terminal";
/// Harness name of the fake agent in chela's config.
const FAKE: &str = "fake";
/// Harness name of the real agent.
const CODEX: &str = "codex";
/// Environment variable naming another folder holding the conformance `node_modules`.
const CONFORMANCE_ENV: &str = "CHELA_ACP_CONFORMANCE_DIR";

/// Message ids, unique across the gateways of one process (the store dedupes by id).
static NEXT_MESSAGE: AtomicU64 = AtomicU64::new(1);

/// How to start one coding agent, for chela's config and for the raw driver alike.
#[derive(Clone)]
struct AgentSpec {
    /// Harness name in `[acp.agents]`.
    harness: &'static str,
    /// Program and arguments.
    argv: Vec<String>,
    /// Extra environment.
    env: BTreeMap<String, String>,
    /// What the agent's reply to a plain prompt starts with (`echo: `, `ok: `).
    reply_prefix: &'static str,
}

impl AgentSpec {
    /// What the reply to prompt `text` contains.
    fn expected(&self, text: &str) -> String {
        format!("{}{text}", self.reply_prefix)
    }
}

/// The temporary folders one gateway (and its restarts) lives in.
struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> BenchResult<Dirs> {
        let dirs = Dirs {
            root: tempfile::tempdir()?,
        };
        for dir in [dirs.workspace(), dirs.agent_state(), dirs.raw_cwd()] {
            std::fs::create_dir_all(dir)?;
        }
        Ok(dirs)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    fn store(&self) -> PathBuf {
        self.path("data")
    }

    fn workspace(&self) -> PathBuf {
        self.path("workspace")
    }

    fn agent_state(&self) -> PathBuf {
        self.path("acp-state")
    }

    /// Working folder of the raw driver's sessions.
    fn raw_cwd(&self) -> PathBuf {
        self.path("raw-cwd")
    }

    /// The fake agent, keeping its sessions here (and its method log when `log`).
    fn fake_agent(&self, log: bool) -> BenchResult<AgentSpec> {
        let mut env = BTreeMap::new();
        env.insert("FAKE_ACP_STATE".to_owned(), path_str(&self.agent_state())?);
        if log {
            env.insert("FAKE_ACP_LOG".to_owned(), path_str(&self.path("acp.log"))?);
        }
        Ok(AgentSpec {
            harness: FAKE,
            argv: vec![path_str(&fake_agent_path()?)?],
            env,
            reply_prefix: "echo: ",
        })
    }

    /// How many requests of `method` the fake agent logged.
    fn logged(&self, method: &str) -> usize {
        let log = std::fs::read_to_string(self.path("acp.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["method"] == method)
            .count()
    }
}

fn path_str(path: &Path) -> BenchResult<String> {
    Ok(path
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))?
        .to_owned())
}

/// The gateway config: the echo provider (never called here) and `spec` as a harness.
fn gateway_config(dirs: &Dirs, spec: &AgentSpec) -> Config {
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = dirs.store();
    config.agent.workspace = dirs.workspace();
    config.acp.default_agent = spec.harness.to_owned();
    config.acp.agents.insert(
        spec.harness.to_owned(),
        HarnessConfig {
            command: spec.argv.clone(),
            env: spec.env.clone(),
            cwd: None,
        },
    );
    config
}

/// A gateway over a capture channel.
struct Rig {
    gateway: Gateway,
    capture: Arc<CaptureChannel>,
    spec: AgentSpec,
}

impl Rig {
    /// Starts a gateway on `dirs`' store (retrying briefly while a previous gateway's store
    /// lock is released).
    async fn start(dirs: &Dirs, spec: &AgentSpec) -> BenchResult<Rig> {
        let capture = Arc::new(CaptureChannel::new(CHANNEL));
        let started = Instant::now();
        let gateway = loop {
            let channels = vec![capture.clone() as Arc<dyn Channel>];
            match Gateway::start(gateway_config(dirs, spec), channels).await {
                Ok(gateway) => break gateway,
                Err(e) if started.elapsed() < Duration::from_secs(5) => {
                    note(&format!("gateway start failed ({e}); retrying"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        Ok(Rig {
            gateway,
            capture,
            spec: spec.clone(),
        })
    }

    /// A direct message from `user` with a process-unique message id.
    fn inbound(&self, user: &str, text: &str) -> Inbound {
        let id = NEXT_MESSAGE.fetch_add(1, Ordering::Relaxed);
        Inbound {
            conversation: Conversation {
                channel: CHANNEL.into(),
                account: "default".into(),
                kind: ChatKind::Direct,
                chat_id: user.into(),
                thread_id: None,
            },
            sender: Sender {
                id: user.into(),
                name: user.into(),
                username: None,
            },
            message_id: format!("acp-bench-{id}"),
            text: text.to_owned(),
            reply_to: None,
            mentioned: true,
            timestamp_ms: now_ms(),
            interaction: None,
            attachments: Vec::new(),
        }
    }

    /// The session key of `user`'s conversation.
    fn key(&self, user: &str) -> String {
        self.gateway.session_key(&self.inbound(user, ""))
    }

    /// Sends `text` as `user` and waits until a finished reply shows `expect`. Returns the
    /// time from `accept_for` to that `reply_done`, and the text shown.
    async fn send(&self, user: &str, text: &str, expect: &str) -> BenchResult<(Duration, String)> {
        let inbound = self.inbound(user, text);
        let key = self.gateway.session_key(&inbound);
        let done = self.capture.waiter(user);
        let started = Instant::now();
        let fresh = tokio::time::timeout(
            REPLY_TIMEOUT,
            self.gateway.router().accept_for(key, inbound),
        )
        .await
        .map_err(|_| format!("accept_for {text:?} did not return within {REPLY_TIMEOUT:?}"))??;
        if !fresh {
            return Err(format!("{text:?} was dropped as a duplicate").into());
        }
        loop {
            let left = REPLY_TIMEOUT.saturating_sub(started.elapsed());
            tokio::time::timeout(left, done.notified())
                .await
                .map_err(|_| {
                    format!(
                        "no reply showing {expect:?} to {text:?} within {REPLY_TIMEOUT:?}; \
                         shown: {:?}",
                        self.capture.text(user)
                    )
                })?;
            let shown = self.capture.text(user);
            if shown.contains(expect) {
                return Ok((started.elapsed(), shown));
            }
        }
    }

    /// `/acp spawn HARNESS --bind here` as `user`; the time until its answer is shown.
    async fn bind(&self, user: &str) -> BenchResult<Duration> {
        let command = format!("/acp spawn {} --bind here", self.spec.harness);
        let (took, _) = self.send(user, &command, "is bound here").await?;
        Ok(took)
    }

    /// One plain-text turn as `user`; its latency and the text shown.
    async fn turn(&self, user: &str, text: &str) -> BenchResult<(Duration, String)> {
        self.send(user, text, &self.spec.expected(text)).await
    }

    /// Channel sends and edits so far.
    fn sends_edits(&self) -> (u64, u64) {
        (self.capture.sends(), self.capture.edits())
    }

    async fn shutdown(self) {
        self.gateway.shutdown().await;
    }
}

/// A note on stderr (the bench prints its figures on stdout).
fn note(note: &str) {
    eprintln!("acp bench: {note}");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Rows describing a latency summary, each key prefixed with `label`.
fn latency_rows(label: &str, s: &Summary) -> Vec<(String, String)> {
    vec![
        row(format!("{label} p50"), ms(s.p50)),
        row(format!("{label} p99"), ms(s.p99)),
        row(
            format!("{label} mean / min / max"),
            format!("{} / {} / {}", ms(s.mean), ms(s.min), ms(s.max)),
        ),
    ]
}

/// Mean of some durations (zero when empty).
fn mean(samples: &[Duration]) -> Duration {
    let n = u32::try_from(samples.len().max(1)).unwrap_or(u32::MAX);
    samples.iter().sum::<Duration>() / n
}

fn summary(samples: &[Duration], what: &str) -> BenchResult<Summary> {
    Summary::of(samples).ok_or_else(|| format!("no {what} measured").into())
}

// ---------------------------------------------------------------------------------------------
// Processes

/// Live (non-zombie) child processes of this process, with their command names.
fn children() -> Vec<(u32, String)> {
    children_of(std::process::id())
}

/// Live (non-zombie) children of `parent`, with their command names.
fn children_of(parent: u32) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let mut rest = stat[close + 1..].split_whitespace();
        let (Some(state), Some(ppid)) = (rest.next(), rest.next()) else {
            continue;
        };
        if state != "Z" && ppid.parse::<u32>().ok() == Some(parent) {
            found.push((pid, comm));
        }
    }
    found
}

/// The live descendants of `pid`, with their command names.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut all = children_of(pid);
    let mut i = 0;
    while i < all.len() {
        let grandchildren = children_of(all[i].0);
        all.extend(grandchildren);
        i += 1;
    }
    all
}

/// The fake agent next to this bench's profile dir, built (or brought up to date) there.
fn fake_agent_path() -> BenchResult<PathBuf> {
    let exe = std::env::current_exe()?;
    // <target>/<profile>/deps/acp-HASH
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot find the profile dir")?;
    Ok(profile.join("fake-acp-agent"))
}

/// Runs `cargo build --release -p chela-testkit --bin fake-acp-agent` into this bench's
/// target dir (fast when up to date); an existing binary is used if cargo fails.
fn build_fake_agent() -> BenchResult<PathBuf> {
    let agent = fake_agent_path()?;
    let target = agent
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot find the target dir")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "chela-testkit",
            "--bin",
            "fake-acp-agent",
        ])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) if agent.is_file() => note(&format!(
            "building fake-acp-agent failed, using the existing build: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
        Ok(out) => {
            return Err(format!(
                "cargo build -p chela-testkit --bin fake-acp-agent failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Err(e) if agent.is_file() => {
            note(&format!("cannot run cargo ({e}); using the existing build"));
        }
        Err(e) => return Err(format!("cannot run cargo: {e}").into()),
    }
    if !agent.is_file() {
        return Err(format!("{} was not built", agent.display()).into());
    }
    Ok(agent)
}

// ---------------------------------------------------------------------------------------------
// Warm turns

/// What the raw driver measured on one warm session.
struct RawWarm {
    /// Spawn to the `initialize` response.
    start: Duration,
    /// `session/new` round trip.
    new_session: Duration,
    /// Per-turn latencies.
    turns: Vec<Duration>,
    /// `session/update` notifications per measured turn.
    updates_per_turn: f64,
}

/// (1): the raw driver's warm turns (blocking).
fn raw_warm(spec: &AgentSpec, cwd: &Path, warmup: usize, n: usize) -> BenchResult<RawWarm> {
    let started = Instant::now();
    let mut agent = RawAgent::spawn(&spec.argv, &spec.env, cwd)?;
    agent.initialize()?;
    let start = started.elapsed();
    let t = Instant::now();
    let session = agent.new_session(cwd)?;
    let new_session = t.elapsed();
    let prompt = |text: &str, agent: &mut RawAgent| -> BenchResult<Duration> {
        let t = Instant::now();
        let (reply, stop) = agent.prompt(&session, text)?;
        let took = t.elapsed();
        if !reply.contains(&spec.expected(text)) || stop != "end_turn" {
            return Err(format!("raw prompt {text:?}: reply {reply:?}, stop {stop}").into());
        }
        Ok(took)
    };
    for i in 0..warmup {
        prompt(&format!("warm up {i}"), &mut agent)?;
    }
    let updates0 = agent.updates;
    let mut turns = Vec::with_capacity(n);
    for i in 0..n {
        turns.push(prompt(&format!("hello {i}"), &mut agent)?);
    }
    let updates_per_turn = (agent.updates - updates0) as f64 / n.max(1) as f64;
    agent.close()?;
    Ok(RawWarm {
        start,
        new_session,
        turns,
        updates_per_turn,
    })
}

/// What chela measured on one warm bound conversation.
struct ChelaWarm {
    /// `/acp spawn --bind here` to its answer (agent start, `initialize`, `session/new`).
    bind: Duration,
    /// Per-turn latencies.
    turns: Vec<Duration>,
    /// Channel sends and edits per measured turn.
    sends_edits: (f64, f64),
}

/// (2): chela's warm turns on a fresh gateway in `dirs`.
async fn chela_warm(
    dirs: &Dirs,
    spec: &AgentSpec,
    warmup: usize,
    n: usize,
) -> BenchResult<ChelaWarm> {
    let rig = Rig::start(dirs, spec).await?;
    let result = async {
        let bind = rig.bind("alice").await?;
        for i in 0..warmup {
            rig.turn("alice", &format!("warm up {i}")).await?;
        }
        let (s0, e0) = rig.sends_edits();
        let mut turns = Vec::with_capacity(n);
        for i in 0..n {
            turns.push(rig.turn("alice", &format!("hello {i}")).await?.0);
        }
        let (s1, e1) = rig.sends_edits();
        let per = |d: u64| d as f64 / n.max(1) as f64;
        BenchResult::Ok(ChelaWarm {
            bind,
            turns,
            sends_edits: (per(s1 - s0), per(e1 - e0)),
        })
    }
    .await;
    rig.shutdown().await;
    result
}

/// Prints tables (1) and (2) for `label`.
fn warm_tables(label: &str, raw: &RawWarm, chela: &ChelaWarm) -> BenchResult {
    let n = raw.turns.len();
    let raw_s = summary(&raw.turns, "raw turns")?;
    let mut rows = vec![
        row("turns", n.to_string()),
        row("spawn -> initialize answered", ms(raw.start)),
        row("session/new", ms(raw.new_session)),
    ];
    rows.extend(latency_rows("turn", &raw_s));
    rows.push(row(
        "session/update per turn",
        format!("{:.1}", raw.updates_per_turn),
    ));
    table(
        &format!(
            "(1) agent alone [{label}]: raw JSON-RPC driver, {n} sequential session/prompt, \
             prompt written -> response read"
        ),
        &rows,
    );

    let n = chela.turns.len();
    let chela_s = summary(&chela.turns, "chela turns")?;
    let mut rows = vec![
        row("turns", n.to_string()),
        row(
            "/acp spawn --bind here (start, initialize, session/new)",
            ms(chela.bind),
        ),
    ];
    rows.extend(latency_rows("turn", &chela_s));
    let k = 50.min(n);
    if k > 0 {
        rows.push(row(
            format!("mean of first {k} / last {k} turns"),
            format!(
                "{} / {}",
                ms(mean(&chela.turns[..k])),
                ms(mean(&chela.turns[n - k..]))
            ),
        ));
    }
    rows.push(row(
        "channel sends / edits per turn",
        format!("{:.2} / {:.2}", chela.sends_edits.0, chela.sends_edits.1),
    ));
    rows.push(row(
        "added by chela p50 (chela p50 - agent p50)",
        ms_diff(chela_s.p50, raw_s.p50),
    ));
    rows.push(row(
        "added by chela p99 (chela p99 - agent p99)",
        ms_diff(chela_s.p99, raw_s.p99),
    ));
    table(
        &format!(
            "(2) through chela, warm [{label}]: {n} sequential messages in a bound \
             conversation, accept_for -> reply_done; added = (2) - (1), separate runs"
        ),
        &rows,
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Cold turns

/// What chela measured on cold first turns.
struct ChelaCold {
    /// `Gateway::start` on the existing store.
    gateway_start: Vec<Duration>,
    /// First turn, with no agent process live.
    first: Vec<Duration>,
    /// The second turn right after it (warm again).
    second: Vec<Duration>,
    /// Runs whose first reply carried no "could not resume" note.
    resumed: usize,
    /// Most agent processes seen live just before a first turn.
    live_before: usize,
    /// The bound session and its folder, for the raw driver.
    session: (String, PathBuf),
}

/// (3): binds `user`, warms it once, then `runs` times: a fresh gateway, its first turn.
async fn chela_cold(dirs: &Dirs, spec: &AgentSpec, runs: usize) -> BenchResult<ChelaCold> {
    let user = "carol";
    let rig = Rig::start(dirs, spec).await?;
    let setup = async {
        rig.bind(user).await?;
        rig.turn(user, "hello first").await?;
        BenchResult::Ok(())
    }
    .await;
    rig.shutdown().await;
    setup?;
    let mut cold = ChelaCold {
        gateway_start: Vec::with_capacity(runs),
        first: Vec::with_capacity(runs),
        second: Vec::with_capacity(runs),
        resumed: 0,
        live_before: 0,
        session: (String::new(), PathBuf::new()),
    };
    for i in 0..runs {
        let t = Instant::now();
        let rig = Rig::start(dirs, spec).await?;
        cold.gateway_start.push(t.elapsed());
        let result = async {
            cold.live_before = cold.live_before.max(children().len());
            let (took, shown) = rig.turn(user, &format!("hello cold {i}")).await?;
            cold.first.push(took);
            if !shown.contains("resume") {
                cold.resumed += 1;
            }
            cold.second
                .push(rig.turn(user, &format!("hello again {i}")).await?.0);
            let binding = rig
                .gateway
                .acp()
                .binding(&rig.key(user))
                .ok_or("the binding is gone")?;
            cold.session = (
                binding.acp_session_id.ok_or("the binding has no session")?,
                binding.cwd,
            );
            BenchResult::Ok(())
        }
        .await;
        rig.shutdown().await;
        result?;
    }
    Ok(cold)
}

/// What the raw driver measured on cold first turns.
struct RawCold {
    /// Spawn to the `initialize` response.
    start: Vec<Duration>,
    /// `session/load` round trip (history replay included).
    load: Vec<Duration>,
    /// The prompt.
    prompt: Vec<Duration>,
    /// All three.
    total: Vec<Duration>,
    /// `session/update` notifications replayed by the last load.
    replayed: usize,
}

/// (3), raw: `runs` times spawn + `initialize` + `session/load` + one prompt (blocking).
fn raw_cold(spec: &AgentSpec, session: &str, cwd: &Path, runs: usize) -> BenchResult<RawCold> {
    let mut cold = RawCold {
        start: Vec::with_capacity(runs),
        load: Vec::with_capacity(runs),
        prompt: Vec::with_capacity(runs),
        total: Vec::with_capacity(runs),
        replayed: 0,
    };
    for i in 0..runs {
        let started = Instant::now();
        let mut agent = RawAgent::spawn(&spec.argv, &spec.env, cwd)?;
        agent.initialize()?;
        let t1 = started.elapsed();
        agent.load_session(session, cwd)?;
        let t2 = started.elapsed();
        cold.replayed = agent.updates;
        let text = format!("hello raw cold {i}");
        let (reply, _) = agent.prompt(session, &text)?;
        let t3 = started.elapsed();
        if !reply.contains(&spec.expected(&text)) {
            return Err(format!("raw cold prompt {text:?}: reply {reply:?}").into());
        }
        cold.start.push(t1);
        cold.load.push(t2 - t1);
        cold.prompt.push(t3 - t2);
        cold.total.push(t3);
        agent.close()?;
    }
    Ok(cold)
}

/// Prints table (3) for `label`.
fn cold_table(label: &str, chela: &ChelaCold, raw: &RawCold, loads: Option<usize>) -> BenchResult {
    let runs = chela.first.len();
    let first = summary(&chela.first, "cold turns")?;
    let second = summary(&chela.second, "second turns")?;
    let raw_total = summary(&raw.total, "raw cold turns")?;
    let mut rows = vec![
        row("runs (fresh gateway each)", runs.to_string()),
        row(
            "Gateway::start on the store, median (not in the turn)",
            ms(summary(&chela.gateway_start, "gateway starts")?.p50),
        ),
        row(
            "agent processes live before the first turn (max)",
            chela.live_before.to_string(),
        ),
        row(
            "first turns resumed (no 'could not resume' note)",
            format!("{}/{runs}", chela.resumed),
        ),
    ];
    if let Some(loads) = loads {
        rows.push(row(
            "session/load calls the agent logged",
            loads.to_string(),
        ));
    }
    rows.extend(latency_rows("chela cold first turn", &first));
    rows.push(row("chela second turn (warm again) p50", ms(second.p50)));
    rows.push(row(
        format!("raw cold turn, {} runs, p50", raw.total.len()),
        ms(raw_total.p50),
    ));
    rows.push(row(
        "raw cold turn min / max",
        format!("{} / {}", ms(raw_total.min), ms(raw_total.max)),
    ));
    rows.push(row(
        "raw: spawn+initialize / session/load / prompt, medians",
        format!(
            "{} / {} / {}",
            ms(summary(&raw.start, "starts")?.p50),
            ms(summary(&raw.load, "loads")?.p50),
            ms(summary(&raw.prompt, "prompts")?.p50)
        ),
    ));
    rows.push(row(
        "raw: updates replayed by session/load (last run)",
        raw.replayed.to_string(),
    ));
    rows.push(row(
        "added by chela, cold (median - median)",
        ms_diff(first.p50, raw_total.p50),
    ));
    table(
        &format!(
            "(3) through chela, cold [{label}]: first message to a bound conversation on a \
             fresh gateway (agent spawn + initialize + session/load + prompt), vs the raw driver"
        ),
        &rows,
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Sections

/// (1) + (2) against the fake agent.
async fn section_warm() -> BenchResult {
    let dirs = Dirs::new()?;
    let spec = dirs.fake_agent(false)?;
    let raw = {
        let (spec, cwd) = (spec.clone(), dirs.raw_cwd());
        tokio::task::spawn_blocking(move || raw_warm(&spec, &cwd, WARMUP_TURNS, WARM_TURNS))
            .await??
    };
    let chela = chela_warm(&dirs, &spec, WARMUP_TURNS, WARM_TURNS).await?;
    warm_tables("fake-acp-agent", &raw, &chela)
}

/// (3) against the fake agent.
async fn section_cold() -> BenchResult {
    let dirs = Dirs::new()?;
    let spec = dirs.fake_agent(true)?;
    let chela = chela_cold(&dirs, &spec, COLD_RUNS).await?;
    let loads = dirs.logged("session/load");
    let raw = {
        let spec = spec.clone();
        let (session, cwd) = chela.session.clone();
        tokio::task::spawn_blocking(move || raw_cold(&spec, &session, &cwd, COLD_RUNS)).await??
    };
    cold_table("fake-acp-agent", &chela, &raw, Some(loads))
}

/// (4): this process's RSS per bound, warmed conversation.
async fn section_memory() -> BenchResult {
    let dirs = Dirs::new()?;
    let spec = dirs.fake_agent(false)?;
    let rig = Rig::start(&dirs, &spec).await?;
    let result = async {
        // One conversation first, so one-time costs (first agent, lazy statics) are excluded.
        rig.bind("warmup").await?;
        rig.turn("warmup", "hello warm-up").await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before_pids: HashSet<u32> = children().into_iter().map(|(p, _)| p).collect();
        let before = common::memory_of("self")?;
        let started = Instant::now();
        for i in 0..MEM_SESSIONS {
            let user = format!("mem{i}");
            rig.bind(&user).await?;
            rig.turn(&user, &format!("hello {i}")).await?;
        }
        let wall = started.elapsed();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = common::memory_of("self")?;
        let agents: Vec<(u32, String)> = children()
            .into_iter()
            .filter(|(p, _)| !before_pids.contains(p))
            .collect();
        let mut agent_rss = 0;
        for (pid, _) in &agents {
            agent_rss += common::memory_of(&pid.to_string())?.rss_kib;
        }
        let delta = after.rss_kib.saturating_sub(before.rss_kib);
        let live = agents.len().max(1) as u64;
        let rows = vec![
            row("conversations bound + warmed", MEM_SESSIONS.to_string()),
            row("time to bind and warm them all", ms(wall)),
            row(
                "bench process VmRSS before / after",
                format!("{} / {}", mib(before.rss_kib), mib(after.rss_kib)),
            ),
            row(
                "chela per live ACP session ((after - before) / n)",
                format!("{:.0} KiB", delta as f64 / MEM_SESSIONS as f64),
            ),
            row("new agent processes live", agents.len().to_string()),
            row(
                "their VmRSS total / per process",
                format!(
                    "{} / {:.0} KiB",
                    mib(agent_rss),
                    agent_rss as f64 / live as f64
                ),
            ),
        ];
        table(
            &format!(
                "(4) memory per live ACP session [fake-acp-agent]: {MEM_SESSIONS} conversations \
                 each bound (/acp spawn --bind here) and warmed with one turn"
            ),
            &rows,
        );
        BenchResult::Ok(())
    }
    .await;
    rig.shutdown().await;
    result
}

// ---------------------------------------------------------------------------------------------
// Real agent

/// The conformance folder with its `node_modules`.
fn conformance_dir() -> PathBuf {
    match std::env::var_os(CONFORMANCE_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/acp"),
    }
}

/// The codex-acp command: the platform's native binary when the npm package ships one (the
/// `.bin/codex-acp` launcher is a node script that runs it as a child), else the launcher.
fn codex_command() -> Option<PathBuf> {
    let modules = conformance_dir().join("node_modules");
    let launcher = modules.join(".bin/codex-acp");
    if !launcher.exists() {
        return None;
    }
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    let native = modules.join(format!(
        "@zed-industries/codex-acp-{}-{arch}/bin/codex-acp",
        std::env::consts::OS
    ));
    Some(if native.is_file() { native } else { launcher })
}

/// acpx's CLI script.
fn acpx_script() -> Option<PathBuf> {
    std::fs::canonicalize(conformance_dir().join("node_modules/.bin/acpx")).ok()
}

/// A `CODEX_HOME` in `dirs` whose `config.toml` points Codex at `model_url` (`.../v1`).
fn codex_spec(dirs: &Dirs, command: &Path, model_url: &str) -> BenchResult<AgentSpec> {
    let home = dirs.path("codex-home");
    std::fs::create_dir_all(&home)?;
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"gpt-5.2\"\nmodel_provider = \"local\"\napproval_policy = \"on-request\"\n\
             sandbox_mode = \"workspace-write\"\ncheck_for_update_on_startup = false\n\
             [model_providers.local]\nname = \"local\"\nbase_url = \"{model_url}\"\n\
             wire_api = \"responses\"\nenv_key = \"LOCAL_API_KEY\"\n\
             requires_openai_auth = false\nrequest_max_retries = 0\nstream_max_retries = 0\n\
             [analytics]\nenabled = false\n"
        ),
    )?;
    let user_home = dirs.path("home");
    std::fs::create_dir_all(&user_home)?;
    let mut env = BTreeMap::new();
    env.insert("CODEX_HOME".to_owned(), path_str(&home)?);
    env.insert("HOME".to_owned(), path_str(&user_home)?);
    env.insert("LOCAL_API_KEY".to_owned(), "fake".to_owned());
    Ok(AgentSpec {
        harness: CODEX,
        argv: vec![path_str(command)?],
        env,
        reply_prefix: "ok: ",
    })
}

/// (5a): (1)-(3) against codex-acp.
async fn section_real() -> BenchResult {
    let command = codex_command().ok_or("codex-acp is not installed")?;
    let model = chela_testkit::FakeModel::start().await?;
    let dirs = Dirs::new()?;
    let spec = codex_spec(&dirs, &command, &model.openai_base_url())?;
    println!("\n(5a) codex-acp command: {}", command.display());
    let label = "codex-acp";
    let raw = {
        let (spec, cwd) = (spec.clone(), dirs.raw_cwd());
        tokio::task::spawn_blocking(move || raw_warm(&spec, &cwd, 2, REAL_WARM_TURNS)).await??
    };
    let chela = chela_warm(&dirs, &spec, 2, REAL_WARM_TURNS).await?;
    warm_tables(label, &raw, &chela)?;
    let cold_dirs = Dirs::new()?;
    let spec = codex_spec(&cold_dirs, &command, &model.openai_base_url())?;
    let chela = chela_cold(&cold_dirs, &spec, REAL_COLD_RUNS).await?;
    let raw = {
        let spec = spec.clone();
        let (session, cwd) = chela.session.clone();
        tokio::task::spawn_blocking(move || raw_cold(&spec, &session, &cwd, REAL_COLD_RUNS))
            .await??
    };
    cold_table(label, &chela, &raw, None)?;
    let _ = model.shutdown().await;
    Ok(())
}

/// One acpx run: wall time, and peak VmHWM of acpx's node process and of its descendants.
struct AcpxRun {
    wall: Duration,
    node_peak_kib: u64,
    /// The agent's own process (the first descendant named like its program).
    agent_peak_kib: u64,
    /// Other descendants seen (helpers the agent or acpx started): how many, and their
    /// largest peak.
    others: (usize, u64),
}

/// Runs acpx once (blocking), polling the process tree's VmHWM every 10 ms.
fn acpx_once(
    script: &Path,
    spec: &AgentSpec,
    dirs: &Dirs,
    text: &str,
    i: usize,
) -> BenchResult<AcpxRun> {
    let home = dirs.path(&format!("acpx-home-{i}"));
    std::fs::create_dir_all(&home)?;
    let cwd = dirs.raw_cwd();
    let mut env = spec.env.clone();
    env.insert("HOME".to_owned(), path_str(&home)?);
    let out_path = dirs.path(&format!("acpx-{i}.out"));
    let started = Instant::now();
    let mut child = std::process::Command::new("node")
        .arg(script)
        .args(["--agent", &spec.argv.join(" ")])
        .arg("--cwd")
        .arg(&cwd)
        .args(["--approve-all", "--format", "quiet", "exec", text])
        .envs(&env)
        .current_dir(&cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = child.id();
    let mut peaks: HashMap<u32, (String, u64)> = HashMap::new();
    let status = loop {
        let tree = std::iter::once((pid, "node".to_owned())).chain(descendants(pid));
        for (p, comm) in tree {
            if let Ok(m) = common::memory_of(&p.to_string()) {
                let peak = peaks.entry(p).or_insert((comm, 0));
                peak.1 = peak.1.max(m.hwm_kib);
            }
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            acp_driver::kill_group(pid);
            let _ = child.kill();
            child.wait()?;
            return Err("acpx did not finish within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = started.elapsed();
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    if !status.success() || !out.contains(&spec.expected(text)) {
        return Err(format!("acpx run {i} ended {status}, output {out:?}").into());
    }
    let node_peak_kib = peaks.remove(&pid).map_or(0, |(_, peak)| peak);
    // /proc's comm is the program's file name cut to 15 bytes.
    let program = Path::new(spec.argv.first().map_or("", String::as_str))
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let comm: String = program.chars().take(15).collect();
    let agent = peaks.iter().find(|(_, (c, _))| *c == comm).map(|(p, _)| *p);
    let agent_peak_kib = agent
        .and_then(|p| peaks.remove(&p))
        .map_or(0, |(_, peak)| peak);
    let others = (
        peaks.len(),
        peaks.values().map(|(_, peak)| *peak).max().unwrap_or(0),
    );
    Ok(AcpxRun {
        wall,
        node_peak_kib,
        agent_peak_kib,
        others,
    })
}

/// (5b): acpx one-shot turns against codex-acp.
async fn section_acpx() -> BenchResult {
    let command = codex_command().ok_or("codex-acp is not installed")?;
    let script = acpx_script().ok_or("acpx is not installed")?;
    let model = chela_testkit::FakeModel::start().await?;
    let dirs = Dirs::new()?;
    let spec = codex_spec(&dirs, &command, &model.openai_base_url())?;
    let runs = {
        let (script, spec) = (script.clone(), spec.clone());
        tokio::task::spawn_blocking(move || {
            (0..ACPX_RUNS)
                .map(|i| acpx_once(&script, &spec, &dirs, &format!("hello acpx {i}"), i))
                .collect::<BenchResult<Vec<_>>>()
        })
        .await??
    };
    let walls: Vec<Duration> = runs.iter().map(|r| r.wall).collect();
    let wall = summary(&walls, "acpx runs")?;
    let max_of = |f: fn(&AcpxRun) -> u64| runs.iter().map(f).max().unwrap_or(0);
    let min_of = |f: fn(&AcpxRun) -> u64| runs.iter().map(f).min().unwrap_or(0);
    let rows = vec![
        row("runs", runs.len().to_string()),
        row("acpx", script.display().to_string()),
        row("wall per one-shot turn, median", ms(wall.p50)),
        row(
            "wall min / max",
            format!("{} / {}", ms(wall.min), ms(wall.max)),
        ),
        row(
            "acpx node peak RSS (VmHWM) min / max",
            format!(
                "{} / {}",
                mib(min_of(|r| r.node_peak_kib)),
                mib(max_of(|r| r.node_peak_kib))
            ),
        ),
        row(
            "agent process peak RSS (VmHWM) min / max",
            format!(
                "{} / {}",
                mib(min_of(|r| r.agent_peak_kib)),
                mib(max_of(|r| r.agent_peak_kib))
            ),
        ),
        row(
            "other descendants per run (max) / their largest peak",
            format!(
                "{} / {}",
                runs.iter().map(|r| r.others.0).max().unwrap_or(0),
                mib(max_of(|r| r.others.1))
            ),
        ),
    ];
    table(
        "(5b) acpx 0.19.1 one-shot `exec` turns [codex-acp]: spawn -> exit, VmHWM polled \
         every 10 ms (compare with (3) chela cold and (2) chela warm above)",
        &rows,
    );
    let _ = model.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Running

/// Every section: its name (the child's argument), its title, and its deadline.
const SECTIONS: &[(&str, &str, Duration)] = &[
    (
        "warm",
        "(1)+(2) warm turns, fake agent",
        Duration::from_secs(60),
    ),
    (
        "cold",
        "(3) cold turns, fake agent",
        Duration::from_secs(60),
    ),
    (
        "memory",
        "(4) memory per session, fake agent",
        Duration::from_secs(60),
    ),
    (
        "real",
        "(5a) warm and cold turns, codex-acp",
        Duration::from_secs(180),
    ),
    (
        "acpx",
        "(5b) acpx one-shot turns, codex-acp",
        Duration::from_secs(120),
    ),
];

/// Why a real-agent section cannot run here, if it cannot.
fn skip_reason(name: &str) -> Option<String> {
    let dir = conformance_dir();
    let missing = |what: &str| {
        Some(format!(
            "{what} is not installed in {} (npm ci there, or set {CONFORMANCE_ENV})",
            dir.join("node_modules").display()
        ))
    };
    match name {
        "real" if codex_command().is_none() => missing("@zed-industries/codex-acp"),
        "acpx" if codex_command().is_none() => missing("@zed-industries/codex-acp"),
        "acpx" if acpx_script().is_none() => missing("acpx"),
        "acpx"
            if std::process::Command::new("node")
                .arg("--version")
                .output()
                .is_err() =>
        {
            Some("node is not on PATH".to_owned())
        }
        _ => None,
    }
}

/// Runs each section in a child process of this binary, killed after its deadline.
fn run_sections() -> BenchResult {
    let exe = std::env::current_exe()?;
    let mut notes = Vec::new();
    for &(name, title, deadline) in SECTIONS {
        if let Some(reason) = skip_reason(name) {
            println!("\n-- {title}: SKIPPED, {reason}");
            notes.push(row(name, format!("skipped: {reason}")));
            continue;
        }
        let started = Instant::now();
        let mut child = std::process::Command::new(&exe)
            .arg("--section")
            .arg(name)
            .spawn()?;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if started.elapsed() > deadline {
                child.kill()?;
                child.wait()?;
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let took = format!("{:.1} s", started.elapsed().as_secs_f64());
        match status {
            Some(status) if status.success() => notes.push(row(name, format!("ok in {took}"))),
            Some(status) => {
                println!("\n!! {title}: FAILED ({status})");
                notes.push(row(name, format!("failed ({status}) after {took}")));
            }
            None => {
                println!("\n!! {title}: HUNG, killed after {deadline:?}");
                notes.push(row(name, format!("hung, killed after {deadline:?}")));
            }
        }
    }
    table("summary", &notes);
    Ok(())
}

/// Runs one section in this process.
fn run_section(name: &str) -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        match name {
            "warm" => section_warm().await,
            "cold" => section_cold().await,
            "memory" => section_memory().await,
            "real" => section_real().await,
            "acpx" => section_acpx().await,
            other => Err(format!("no section {other:?}").into()),
        }
    });
    if let Err(e) = &result {
        eprintln!("acp bench section {name} failed: {e}");
    }
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

fn main() -> BenchResult {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--section" {
            let name = args.next().ok_or("--section needs a name")?;
            return run_section(&name);
        }
    }
    let agent = build_fake_agent()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "chela acp bench: in-process gateway, tokio multi-thread runtime, {threads} cores; \
         agent {}; each section runs in its own process",
        agent.display()
    );
    run_sections()
}
