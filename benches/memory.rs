//! Memory and disk of the real `chela gateway` binary under many short chats (issue #11.5).
//!
//! Run with `cargo bench --bench memory` (release profile), or `benches/run.sh memory`.
//! Reports figures only; nothing here asserts a size or a time.
//!
//! The gateway runs against `FakeTelegram` (open DMs) and a zero-delay `FakeModel`. The bench
//! sends [`MESSAGES`] short messages over [`CHATS`] private chats in waves of one message per
//! chat, waiting for every reply of a wave before the next. It reads VmRSS/VmHWM from
//! `/proc/<pid>/status` after the first wave (every session exists), after each wave, at the
//! end, and while the gateway idles for [`IDLE`]; then the store folder's size (apparent
//! bytes and allocated blocks) per message, while running and after a graceful stop. Last it
//! restarts the gateway on that store and reads its memory at start and after idling again.
//!
//! Environment (all optional): `CHELA_BENCH_MESSAGES`, `CHELA_BENCH_CHATS`,
//! `CHELA_BENCH_IDLE_S`, `CHELA_BENCH_BIN` (another `chela` binary to measure, e.g. a
//! build of an older commit, instead of this build's), `CHELA_BENCH_KEEP=1` (keep the
//! bench folder, with its store, and print where it is) and `CHELA_STORE_ENGINE` (`redb` or
//! `sled`, passed on to the gateway; unset: the default engine).

mod common;

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chela_testkit::telegram::{ChatSpec, UserSpec};
use chela_testkit::{FakeModel, FakeTelegram};
use common::{BenchResult, Memory, env_or, mib, row, table};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// Short messages sent in all.
const MESSAGES: usize = 40_000;
/// Private chats they are spread over (one session each).
const CHATS: usize = 5_000;
/// Idle time after the last reply before memory and disk are read.
const IDLE: Duration = Duration::from_secs(70);
/// How often memory is read while idling.
const IDLE_SAMPLE: Duration = Duration::from_secs(10);
/// Longest wait for the replies of one wave.
const WAVE_TIMEOUT: Duration = Duration::from_secs(900);
/// How often a wave checks for its replies.
const POLL: Duration = Duration::from_millis(200);
/// The first chat id (private chat id = user id).
const FIRST_CHAT: i64 = 100_000;
/// Log lines kept for error messages.
const LOG_TAIL: usize = 30;

/// A running `chela gateway`; its stderr is drained into a short tail.
struct Gateway {
    child: Child,
    /// Held open for the life of the process (the terminal channel reads it).
    _stdin: Option<ChildStdin>,
    tail: Arc<Mutex<VecDeque<String>>>,
    ready: Arc<std::sync::atomic::AtomicBool>,
}

impl Gateway {
    /// `chela --config <dir>/config.toml gateway` with HOME = `dir` and a clean environment.
    fn spawn(dir: &Path) -> BenchResult<Gateway> {
        let mut child = Command::new(common::chela_binary())
            .env_clear()
            .env("HOME", dir)
            .env("USER", "bench")
            .env("CHELA_RPC_LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env(
                "CHELA_STORE_ENGINE",
                std::env::var_os("CHELA_STORE_ENGINE").unwrap_or_default(),
            )
            .current_dir(dir)
            .arg("--config")
            .arg(dir.join("config.toml"))
            .arg("gateway")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(stderr) = child.stderr.take() {
            let (tail, ready) = (Arc::clone(&tail), Arc::clone(&ready));
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains("chela ready") {
                        ready.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                    if tail.len() >= LOG_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        Ok(Gateway {
            _stdin: child.stdin.take(),
            child,
            tail,
            ready,
        })
    }

    /// Waits for the `chela ready` line.
    async fn wait_ready(&self) -> BenchResult {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.ready.load(std::sync::atomic::Ordering::SeqCst) {
            if Instant::now() >= deadline {
                return Err(format!("no ready line within 60 s\n{}", self.tail()).into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// The last log lines.
    fn tail(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    fn memory(&self) -> BenchResult<Memory> {
        let pid = self.child.id().ok_or("chela gateway exited")?;
        common::memory_of(&pid.to_string())
    }

    /// SIGTERM, then SIGKILL if it has not exited within 30 s.
    async fn stop(mut self) -> BenchResult {
        if let Some(pid) = self.child.id() {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid)?),
                nix::sys::signal::Signal::SIGTERM,
            )?;
        }
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
            return Err("chela did not exit within 30 s of SIGTERM".into());
        }
        Ok(())
    }
}

/// Bytes of the files under `dir`: (apparent length, allocated blocks).
fn disk_usage(dir: &Path) -> BenchResult<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            let (len, blocks) = disk_usage(&entry.path())?;
            total = (total.0 + len, total.1 + blocks);
        } else {
            total = (total.0 + meta.len(), total.1 + meta.blocks() * 512);
        }
    }
    Ok(total)
}

/// RSS now and the peak so far, e.g. `52.1 MiB (peak 60.3 MiB)`.
fn rss(m: Memory) -> String {
    format!(
        "{} (peak {}, anon {})",
        mib(m.rss_kib),
        mib(m.hwm_kib),
        mib(m.anon_kib)
    )
}

/// A store size and its share per message.
fn per_message((len, blocks): (u64, u64), messages: usize) -> String {
    let n = messages.max(1) as f64;
    format!(
        "{:.1} MiB = {:.0} B/message (allocated {:.1} MiB = {:.0} B/message)",
        len as f64 / 1048576.0,
        len as f64 / n,
        blocks as f64 / 1048576.0,
        blocks as f64 / n
    )
}

/// Sends one wave (a message into each chat) and waits until `expected` replies were sent.
async fn wave(
    tg: &FakeTelegram,
    gw: &Gateway,
    round: usize,
    chats: usize,
    expected: usize,
) -> BenchResult<Duration> {
    let started = Instant::now();
    for i in 0..chats {
        let id = FIRST_CHAT + i64::try_from(i)?;
        let user = UserSpec::new(id, &format!("U{id}"));
        tg.user_sends(ChatSpec::private(id), user, &format!("hi {round} {i}"));
    }
    let deadline = started + WAVE_TIMEOUT;
    while tg.call_count("sendMessage") < expected {
        if Instant::now() >= deadline {
            return Err(format!(
                "wave {round}: {} of {expected} replies after {} s\n{}",
                tg.call_count("sendMessage"),
                WAVE_TIMEOUT.as_secs(),
                gw.tail()
            )
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(started.elapsed())
}

/// Idles for `idle`, reading memory every [`IDLE_SAMPLE`]; the readings.
async fn idle_samples(gw: &Gateway, idle: Duration) -> BenchResult<Vec<(u64, Memory)>> {
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < idle {
        tokio::time::sleep(IDLE_SAMPLE.min(idle)).await;
        samples.push((started.elapsed().as_secs(), gw.memory()?));
    }
    Ok(samples)
}

async fn bench() -> BenchResult {
    let messages = env_or("CHELA_BENCH_MESSAGES", MESSAGES);
    let chats = env_or("CHELA_BENCH_CHATS", CHATS).clamp(1, messages.max(1));
    let idle = Duration::from_secs(env_or("CHELA_BENCH_IDLE_S", IDLE.as_secs() as usize) as u64);
    let waves = messages.div_ceil(chats);
    let messages = waves * chats;
    let model = FakeModel::start().await?;
    let tg = FakeTelegram::start().await?;
    let dir = tempfile::tempdir()?;
    let config = format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"{}\"\napi_key = \"x\"\n\
         [store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\n\
         [channels.telegram]\ntoken = \"{}\"\napi_url = \"{}\"\ndm_policy = \"open\"\n\
         poll_timeout_s = 1\n",
        model.openai_base_url(),
        tg.token(),
        tg.api_url()
    );
    std::fs::write(dir.path().join("config.toml"), config)?;
    let data = dir.path().join("data");
    let mut rows = vec![
        row("binary", common::chela_binary().display().to_string()),
        row(
            "load",
            format!("{messages} messages over {chats} private chats ({waves} waves)"),
        ),
    ];

    let gw = Gateway::spawn(dir.path())?;
    gw.wait_ready().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    rows.push(row("RSS at start", rss(gw.memory()?)));
    let mut all_sessions = None;
    let mut sent = 0;
    for round in 0..waves {
        sent += chats;
        let took = wave(&tg, &gw, round, chats, sent).await?;
        let memory = gw.memory()?;
        all_sessions.get_or_insert(memory);
        rows.push(row(
            format!("wave {} done ({sent} messages)", round + 1),
            format!(
                "{} in {:.1} s = {:.0} msgs/s",
                rss(memory),
                took.as_secs_f64(),
                chats as f64 / took.as_secs_f64()
            ),
        ));
    }
    let end = gw.memory()?;
    let first = all_sessions.unwrap_or(end);
    rows.push(row("RSS when every session exists", rss(first)));
    rows.push(row(
        "RSS at the end",
        format!(
            "{} = {:+.1}% of the above",
            rss(end),
            (end.rss_kib as f64 / first.rss_kib.max(1) as f64 - 1.0) * 100.0
        ),
    ));
    for (secs, m) in idle_samples(&gw, idle).await? {
        rows.push(row(format!("RSS idle {secs} s"), rss(m)));
    }
    rows.push(row(
        "store while running, after idle",
        per_message(disk_usage(&data)?, messages),
    ));
    gw.stop().await?;
    rows.push(row(
        "store after a graceful stop",
        per_message(disk_usage(&data)?, messages),
    ));

    let again = Gateway::spawn(dir.path())?;
    again.wait_ready().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    rows.push(row(
        "restart on that store: RSS at start",
        rss(again.memory()?),
    ));
    for (secs, m) in idle_samples(&again, idle).await? {
        rows.push(row(format!("restart: RSS idle {secs} s"), rss(m)));
    }
    again.stop().await?;
    rows.push(row(
        "store after the restart",
        per_message(disk_usage(&data)?, messages),
    ));
    table(
        "chela memory bench (release gateway, FakeTelegram, FakeModel)",
        &rows,
    );
    if std::env::var_os("CHELA_BENCH_KEEP").is_some() {
        println!("  bench folder kept: {}", dir.keep().display());
    }
    Ok(())
}

fn main() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}
