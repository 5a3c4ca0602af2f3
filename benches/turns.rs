//! Turn throughput and latency of an in-process gateway against the fake model.
//!
//! Run with `cargo bench --features postgres --bench turns` (release profile), or
//! `benches/run.sh` for every bench (`--features sled` too for `CHELA_STORE_ENGINE=sled`).
//! Reports figures only; nothing here asserts a time. With `CHELA_STORE_URL` set, the store is
//! that PostgreSQL (a fresh schema per section); else `CHELA_STORE_ENGINE` (`redb`, `sled`)
//! picks the embedded engine (unset: the default).
//!
//! Sections (each run against the testkit FakeModel, then again against a raw-socket model
//! with `TCP_NODELAY`, see `common::model`, to separate the gateway from the transport):
//! - **(a) sequential turns**: one session, [`SEQ_TURNS`] turns one after another; per-turn
//!   latency from `Router::accept_for` to the channel's `reply_done`.
//! - **(b) model alone**: the same number of streaming chat-completions requests sent straight
//!   to the fake model with reqwest, reading each body to its end; once with a minimal body and
//!   once replaying the exact bodies the gateway sent in (a). The gateway overhead is estimated
//!   as turn latency minus the replayed round trip.
//! - **(c) concurrent sessions**: [`SESSIONS`] sessions x [`TURNS_PER_SESSION`] turns at once
//!   (each session sequential), with the process's peak RSS (VmHWM, reset just before).
//!
//! Each section runs in a child process of this binary (`--section NAME` runs one directly),
//! so a section that hangs is killed after its deadline, reported and, for the
//! concurrent ones, retried: under concurrent sessions the gateway can deadlock inside sled
//! 0.34.7's `flush_async` (spacejam/sled#1308).
//!
//! The gateway runs with a [`CaptureChannel`]: an in-memory channel that records the latest
//! text per chat and wakes the bench when a reply is done.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chela::config::{Config, ProviderKind};
use chela::gateway::Gateway;
use chela_channel::{Channel, ChatKind, Conversation, Inbound, Sender};
use chela_testkit::FakeModel;
use common::capture::CaptureChannel;
use common::model::QuickModel;
use common::{BenchResult, Summary, mib, ms, ms_diff, row, table};

/// Turns of the sequential section (and requests of the model-alone section).
const SEQ_TURNS: usize = 300;
/// Warm-up turns, in a session of their own, before anything is measured.
const WARMUP_TURNS: usize = 10;
/// Sessions of the concurrent section.
const SESSIONS: usize = 20;
/// Turns per session in the concurrent section.
const TURNS_PER_SESSION: usize = 25;
/// Longest wait for one reply before the bench gives up.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest a sequential section may run before it is declared hung (see [`run_sections`]).
const SECTION_DEADLINE: Duration = Duration::from_secs(60);
/// The same for a concurrent section (which normally takes under 5 s).
const CONCURRENT_DEADLINE: Duration = Duration::from_secs(20);
/// Attempts of a concurrent section before giving up on it.
const CONCURRENT_ATTEMPTS: usize = 3;
/// Channel name the capture channel registers under.
const CHANNEL: &str = "capture";

/// With `CHELA_STORE_URL` set, the store is PostgreSQL: a fresh schema of that database per
/// rig (so sections do not see each other's data); else sled (empty).
async fn postgres_url() -> BenchResult<String> {
    let url = std::env::var("CHELA_STORE_URL").unwrap_or_default();
    if url.is_empty() {
        return Ok(url);
    }
    let schema = format!("bench{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await?;
    let sep = if url.contains('?') { '&' } else { '?' };
    Ok(format!("{url}{sep}options=-csearch_path%3D{schema}"))
}

/// A gateway over a capture channel, with the temporary folders it lives in.
struct Rig {
    gateway: Gateway,
    capture: Arc<CaptureChannel>,
    next_message: AtomicU64,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Rig {
    /// Starts a gateway whose OpenAI-compatible model is at `base_url`.
    async fn start(base_url: &str) -> BenchResult<Rig> {
        let store = tempfile::tempdir()?;
        let workspace = tempfile::tempdir()?;
        let mut config = Config::default();
        config.model.provider = ProviderKind::OpenAi;
        config.model.base_url = base_url.to_string();
        config.model.api_key = "x".into();
        config.store.path = store.path().join("data");
        config.store.url = postgres_url().await?;
        if let Some(engine) = std::env::var("CHELA_STORE_ENGINE")
            .ok()
            .and_then(|v| chela::config::StoreEngine::parse(&v))
        {
            config.store.engine = engine;
        }
        config.agent.workspace = workspace.path().to_path_buf();
        let capture = Arc::new(CaptureChannel::new(CHANNEL));
        let gateway = Gateway::start(config, vec![capture.clone() as Arc<dyn Channel>]).await?;
        Ok(Rig {
            gateway,
            capture,
            next_message: AtomicU64::new(1),
            _dirs: (store, workspace),
        })
    }

    /// A direct message from user `user` with a unique message id.
    fn inbound(&self, user: &str, text: String) -> Inbound {
        let id = self.next_message.fetch_add(1, Ordering::Relaxed);
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
            message_id: format!("bench-{id}"),
            text,
            reply_to: None,
            mentioned: true,
            timestamp_ms: now_ms(),
            interaction: None,
            attachments: Vec::new(),
        }
    }

    /// One turn for `user`: accept, then wait for the reply to finish. Returns its latency.
    async fn turn(&self, user: &str, text: String) -> BenchResult<Duration> {
        let inbound = self.inbound(user, text.clone());
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
            return Err(format!("turn {text:?} was dropped as a duplicate").into());
        }
        tokio::time::timeout(REPLY_TIMEOUT, done.notified())
            .await
            .map_err(|_| format!("no reply to {text:?} within {REPLY_TIMEOUT:?}"))?;
        let elapsed = started.elapsed();
        let shown = self.capture.text(user);
        if !shown.contains(&text) {
            return Err(format!("reply to {text:?} was {shown:?}").into());
        }
        Ok(elapsed)
    }
}

/// The body of a minimal streaming chat-completions request.
fn minimal_body(text: &str) -> serde_json::Value {
    serde_json::json!({
        "model": "bench",
        "stream": true,
        "messages": [{ "role": "user", "content": text }],
    })
}

/// Sends one streaming request with `body` and reads the response to its end.
async fn model_round_trip(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> BenchResult<Duration> {
    let started = Instant::now();
    let response = client
        .post(url)
        .bearer_auth("x")
        .json(body)
        .send()
        .await?
        .error_for_status()?;
    let bytes = response.bytes().await?;
    let elapsed = started.elapsed();
    if !bytes.windows(6).any(|w| w == b"[DONE]") {
        return Err("the fake's stream did not end with [DONE]".into());
    }
    Ok(elapsed)
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
        row(format!("{label} mean"), ms(s.mean)),
        row(
            format!("{label} min / max"),
            format!("{} / {}", ms(s.min), ms(s.max)),
        ),
    ]
}

/// Mean of a slice of durations (zero when empty).
fn mean(samples: &[Duration]) -> Duration {
    let n = u32::try_from(samples.len().max(1)).unwrap_or(u32::MAX);
    samples.iter().sum::<Duration>() / n
}

/// The model server a section runs against.
enum Model {
    /// The testkit's fake (axum).
    Fake(FakeModel),
    /// The bench's own raw-socket server (see `common::model`).
    Quick(QuickModel),
}

impl Model {
    async fn fake() -> BenchResult<Model> {
        Ok(Model::Fake(FakeModel::start().await?))
    }

    async fn quick(nodelay: bool) -> BenchResult<Model> {
        Ok(Model::Quick(QuickModel::start(nodelay).await?))
    }

    fn openai_base_url(&self) -> String {
        match self {
            Model::Fake(m) => m.openai_base_url(),
            Model::Quick(m) => m.openai_base_url(),
        }
    }

    /// Chat-completions bodies received so far, in order.
    fn bodies(&self) -> Vec<serde_json::Value> {
        match self {
            Model::Fake(m) => m
                .requests()
                .into_iter()
                .filter(|r| r.path == "/v1/chat/completions")
                .map(|r| r.body)
                .collect(),
            Model::Quick(m) => m.bodies(),
        }
    }
}

/// `n` streaming requests with a minimal body straight to `model`; their round trips.
async fn model_alone(model: &Model, n: usize) -> BenchResult<Vec<Duration>> {
    let url = format!("{}/chat/completions", model.openai_base_url());
    let client = reqwest::Client::new();
    for i in 0..WARMUP_TURNS {
        model_round_trip(&client, &url, &minimal_body(&format!("warm up {i}"))).await?;
    }
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let body = minimal_body(&format!("hello there number {i}"));
        samples.push(model_round_trip(&client, &url, &body).await?);
    }
    Ok(samples)
}

/// Sections (a) and (b) against `model`: sequential turns, the model alone, the overhead
/// estimate.
async fn sequential(model: &Model, name: &str) -> BenchResult {
    let rig = Rig::start(&model.openai_base_url()).await?;
    for i in 0..WARMUP_TURNS {
        rig.turn("warmup", format!("warm up {i}")).await?;
    }
    let mem_before = common::memory_of("self")?;
    let first_request = model.bodies().len();
    let (sends0, edits0) = (rig.capture.sends(), rig.capture.edits());
    let mut turns = Vec::with_capacity(SEQ_TURNS);
    let started = Instant::now();
    for i in 0..SEQ_TURNS {
        turns.push(rig.turn("alice", format!("hello there number {i}")).await?);
    }
    let wall = started.elapsed();
    let sends = rig.capture.sends() - sends0;
    let edits = rig.capture.edits() - edits0;
    let requests: Vec<_> = model.bodies().into_iter().skip(first_request).collect();
    let body_len = |b: &serde_json::Value| b.to_string().len();
    let message_count = |b: &serde_json::Value| b["messages"].as_array().map_or(0, |m| m.len());
    rig.gateway.shutdown().await;

    let turn_summary = Summary::of(&turns).ok_or("no turns")?;
    let mut rows = vec![row("turns", SEQ_TURNS.to_string())];
    rows.extend(latency_rows("latency", &turn_summary));
    rows.push(row(
        "throughput",
        format!("{:.1} turns/s", SEQ_TURNS as f64 / wall.as_secs_f64()),
    ));
    let k = 50.min(turns.len());
    rows.push(row(
        format!("mean of first {k} / last {k} turns"),
        format!(
            "{} / {}",
            ms(mean(&turns[..k])),
            ms(mean(&turns[turns.len() - k..]))
        ),
    ));
    rows.push(row(
        "model requests per turn",
        format!("{:.2}", requests.len() as f64 / SEQ_TURNS as f64),
    ));
    rows.push(row(
        "channel sends / edits per turn",
        format!(
            "{:.2} / {:.2}",
            sends as f64 / SEQ_TURNS as f64,
            edits as f64 / SEQ_TURNS as f64
        ),
    ));
    if let (Some(first), Some(last)) = (requests.first(), requests.last()) {
        rows.push(row(
            "request body, first / last turn",
            format!(
                "{} B ({} msgs) / {} B ({} msgs)",
                body_len(first),
                message_count(first),
                body_len(last),
                message_count(last)
            ),
        ));
    }
    let mem_after = common::memory_of("self")?;
    rows.push(row(
        "bench process RSS before / after",
        format!("{} / {}", mib(mem_before.rss_kib), mib(mem_after.rss_kib)),
    ));
    table(
        &format!(
            "(a) sequential turns [{name}]: 1 session, {SEQ_TURNS} turns, accept -> reply_done"
        ),
        &rows,
    );

    let minimal = model_alone(model, SEQ_TURNS).await?;
    let url = format!("{}/chat/completions", model.openai_base_url());
    let client = reqwest::Client::new();
    let mut replayed = Vec::with_capacity(requests.len());
    for body in &requests {
        replayed.push(model_round_trip(&client, &url, body).await?);
    }
    let minimal_summary = Summary::of(&minimal).ok_or("no requests")?;
    let replay_summary = Summary::of(&replayed).ok_or("no recorded requests to replay")?;
    let mut rows = latency_rows("minimal body", &minimal_summary);
    rows.extend(latency_rows(
        "gateway's own bodies replayed",
        &replay_summary,
    ));
    rows.push(row(
        "overhead p50 (turn p50 - replay p50)",
        ms_diff(turn_summary.p50, replay_summary.p50),
    ));
    rows.push(row(
        "overhead p99 (turn p99 - replay p99)",
        ms_diff(turn_summary.p99, replay_summary.p99),
    ));
    if replayed.len() == turns.len() {
        // One model call per turn: pair turn i with the replay of its own request.
        let paired: Vec<Duration> = turns
            .iter()
            .zip(&replayed)
            .map(|(t, m)| t.saturating_sub(*m))
            .collect();
        if let Some(p) = Summary::of(&paired) {
            rows.push(row("paired overhead p50 (turn_i - replay_i)", ms(p.p50)));
            rows.push(row("paired overhead p99 (turn_i - replay_i)", ms(p.p99)));
        }
    }
    table(
        &format!(
            "(b) model alone [{name}]: {SEQ_TURNS} streaming requests via reqwest, body read \
             to the end; overhead rows are ESTIMATES (turn latency minus model round trip)"
        ),
        &rows,
    );
    Ok(())
}

/// Section (c) against `model`: many sessions at once.
async fn concurrent(model: &Model, name: &str) -> BenchResult {
    let rig = Arc::new(Rig::start(&model.openai_base_url()).await?);
    for i in 0..WARMUP_TURNS {
        rig.turn("warmup", format!("warm up {i}")).await?;
    }
    let limit = rig.gateway.config().resolved_max_concurrent_runs();
    // Writing 5 to clear_refs resets this process's VmHWM (Linux 4.0+).
    let reset = std::fs::write("/proc/self/clear_refs", "5");
    let mem_before = common::memory_of("self")?;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for s in 0..SESSIONS {
        let rig = rig.clone();
        tasks.spawn(async move {
            let user = format!("user{s}");
            let mut latencies = Vec::with_capacity(TURNS_PER_SESSION);
            for t in 0..TURNS_PER_SESSION {
                latencies.push(rig.turn(&user, format!("session {s} turn {t}")).await?);
            }
            BenchResult::Ok(latencies)
        });
    }
    let mut all = Vec::with_capacity(SESSIONS * TURNS_PER_SESSION);
    while let Some(result) = tasks.join_next().await {
        all.extend(result??);
    }
    let wall = started.elapsed();
    let mem_after = common::memory_of("self")?;
    rig.gateway.shutdown().await;

    let summary = Summary::of(&all).ok_or("no turns")?;
    let mut rows = vec![
        row("turns", all.len().to_string()),
        row("global run limit (max_concurrent_runs)", limit.to_string()),
        row("wall time", ms(wall)),
        row(
            "throughput",
            format!("{:.1} turns/s", all.len() as f64 / wall.as_secs_f64()),
        ),
    ];
    rows.extend(latency_rows("latency", &summary));
    rows.push(row(
        "bench process RSS before / after",
        format!("{} / {}", mib(mem_before.rss_kib), mib(mem_after.rss_kib)),
    ));
    rows.push(row(
        match reset {
            Ok(()) => "peak RSS during (c) (VmHWM, reset before)",
            Err(_) => "peak RSS of the whole run (VmHWM; reset refused)",
        },
        mib(mem_after.hwm_kib),
    ));
    table(
        &format!(
            "(c) concurrent [{name}]: {SESSIONS} sessions x {TURNS_PER_SESSION} turns at once \
             (RSS is the whole bench process: gateway + model server + driver, in-process)"
        ),
        &rows,
    );
    Ok(())
}

/// The transport check: the model alone on the quick server with and without `TCP_NODELAY`.
async fn transport_check() -> BenchResult {
    let mut rows = Vec::new();
    for nodelay in [false, true] {
        let model = Model::quick(nodelay).await?;
        let samples = model_alone(&model, 100).await?;
        let s = Summary::of(&samples).ok_or("no requests")?;
        let label = if nodelay {
            "TCP_NODELAY on "
        } else {
            "TCP_NODELAY off"
        };
        rows.extend(latency_rows(&format!("quick model, {label}"), &s));
    }
    table(
        "transport check: 100 minimal streaming requests to the bench's raw-socket model",
        &rows,
    );
    Ok(())
}

/// Every section: its name (the child's argument), its title, how often to try it, and how
/// long one attempt may take.
const SECTIONS: &[(&str, &str, usize, Duration)] = &[
    (
        "fake-sequential",
        "(a)+(b) against the testkit FakeModel",
        1,
        SECTION_DEADLINE,
    ),
    (
        "fake-concurrent",
        "(c) against the testkit FakeModel",
        CONCURRENT_ATTEMPTS,
        CONCURRENT_DEADLINE,
    ),
    ("transport", "transport check", 1, SECTION_DEADLINE),
    (
        "quick-sequential",
        "(a)+(b) against the quick model",
        1,
        SECTION_DEADLINE,
    ),
    (
        "quick-concurrent",
        "(c) against the quick model",
        CONCURRENT_ATTEMPTS,
        CONCURRENT_DEADLINE,
    ),
];

/// Runs each section in a child process of this same binary, so a section that hangs (the
/// gateway can deadlock inside sled 0.34.7 `flush_async`, spacejam/sled#1308, and then parks
/// tokio's workers in blocking locks so no tokio timer fires) is killed after
/// its deadline, reported, retried if it may be, and the other sections still run.
fn run_sections() -> BenchResult {
    let exe = std::env::current_exe()?;
    let mut hung = Vec::new();
    for &(name, title, attempts, deadline) in SECTIONS {
        for attempt in 1..=attempts {
            let mut child = std::process::Command::new(&exe)
                .arg("--section")
                .arg(name)
                .spawn()?;
            let started = Instant::now();
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
            match status {
                Some(status) if status.success() => break,
                Some(status) => {
                    println!("\n!! {title}: attempt {attempt}/{attempts} failed ({status})");
                    hung.push(format!("{name} attempt {attempt}: failed ({status})"));
                }
                None => {
                    println!(
                        "\n!! {title}: attempt {attempt}/{attempts} HUNG, killed after \
                         {deadline:?} (gateway deadlock; see the bench docs)"
                    );
                    hung.push(format!("{name} attempt {attempt}: hung"));
                }
            }
        }
    }
    let mut rows = vec![row(
        "section attempts that failed or hung",
        hung.len().to_string(),
    )];
    rows.extend(hung.into_iter().map(|h| row("", h)));
    table("summary", &rows);
    Ok(())
}

/// Runs one section in this process.
fn run_section(name: &str) -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        match name {
            "fake-sequential" => sequential(&Model::fake().await?, "testkit FakeModel").await,
            "fake-concurrent" => concurrent(&Model::fake().await?, "testkit FakeModel").await,
            "transport" => transport_check().await,
            "quick-sequential" => {
                sequential(&Model::quick(true).await?, "quick model, TCP_NODELAY").await
            }
            "quick-concurrent" => {
                concurrent(&Model::quick(true).await?, "quick model, TCP_NODELAY").await
            }
            other => Err(format!("no section {other:?}").into()),
        }
    });
    if let Err(e) = &result {
        eprintln!("turns bench section {name} failed: {e}");
    }
    // Do not wait for blocking tasks a failed section may have left behind.
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
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "chela turns bench: in-process gateway, tokio multi-thread runtime, {threads} cores; \
         each section runs in its own process"
    );
    run_sections()
}
