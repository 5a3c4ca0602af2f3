//! Start-up time and memory of the real `chela gateway` binary against the fake model.
//!
//! Run with `cargo bench --bench startup` (release profile), or `benches/run.sh`. Reports
//! figures only; nothing here asserts a time.
//!
//! Each run spawns `chela --config <tmp>/config.toml gateway` with stdin piped and kept open
//! (the terminal channel reads it), `RUST_LOG=info` and `HOME=<tmp>`, in a fresh folder, and
//! measures the wall time from spawn to the `chela ready` line on stderr, next to the
//! `elapsed_ms` the binary logs itself. The first [`RSS_RUNS`] runs then idle for
//! [`IDLE`] and read VmRSS/VmHWM from `/proc/<pid>/status`, send one line on stdin and time
//! the reply on stdout (a cold first turn), and read the memory again. Every run ends with
//! SIGTERM, timing the graceful shutdown. `CHELA_BENCH_BIN` measures another `chela` binary.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use chela_testkit::FakeModel;
use common::{BenchResult, Memory, Summary, mib, ms, row, table};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// Start-ups measured.
const RUNS: usize = 10;
/// Runs that also measure idle memory and a first turn.
const RSS_RUNS: usize = 3;
/// Idle time before memory is read.
const IDLE: Duration = Duration::from_secs(2);
/// Longest wait for the ready line, a reply or an exit.
const WAIT: Duration = Duration::from_secs(20);

/// What one run measured.
#[derive(Debug, Default)]
struct Run {
    /// Spawn to the ready line, measured here.
    wall: Duration,
    /// `elapsed_ms` logged by the binary.
    logged_ms: Option<u64>,
    /// Memory after idling.
    idle: Option<Memory>,
    /// One line on stdin to the reply's line on stdout.
    first_turn: Option<Duration>,
    /// Memory after that turn.
    after_turn: Option<Memory>,
    /// SIGTERM to exit.
    shutdown: Option<Duration>,
}

/// A string as a TOML basic string (JSON string escapes are valid TOML).
fn toml_str(s: &str) -> BenchResult<String> {
    Ok(serde_json::to_string(s)?)
}

/// Removes ANSI escape sequences (in case the log is coloured).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number after `elapsed_ms=` in a log line.
fn logged_elapsed(line: &str) -> Option<u64> {
    let rest = line.split("elapsed_ms=").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Sends SIGTERM to `child` and waits for it to exit; the time it took.
async fn terminate(child: &mut Child) -> BenchResult<Duration> {
    let pid = child.id().ok_or("the gateway already exited")?;
    let started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid)?),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    match tokio::time::timeout(WAIT, child.wait()).await {
        Ok(status) => {
            status?;
            Ok(started.elapsed())
        }
        Err(_) => {
            child.kill().await?;
            Err("the gateway did not exit within 20 s of SIGTERM".into())
        }
    }
}

/// Sends one line and waits for the stdout line holding its reply.
async fn first_turn(
    stdin: &mut ChildStdin,
    stdout: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> BenchResult<Duration> {
    let started = Instant::now();
    stdin.write_all(b"hello from the bench\n").await?;
    stdin.flush().await?;
    loop {
        let line = tokio::time::timeout(WAIT, stdout.next_line())
            .await
            .map_err(|_| "no reply on stdout within 20 s")??
            .ok_or("stdout closed before the reply")?;
        if line.contains("ok: hello from the bench") {
            return Ok(started.elapsed());
        }
    }
}

/// One start-up; `measure_memory` adds the idle, first-turn and memory readings.
async fn run_once(fake: &FakeModel, measure_memory: bool) -> BenchResult<Run> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("config.toml");
    let text = format!(
        "[store]\npath = {}\n\n[model]\nprovider = \"openai\"\nbase_url = {}\napi_key = \"x\"\n\n\
         [agent]\nworkspace = {}\n\n[terminal]\nuser = \"bench\"\n",
        toml_str(&dir.path().join("data").to_string_lossy())?,
        toml_str(&fake.openai_base_url())?,
        toml_str(&dir.path().join("workspace").to_string_lossy())?,
    );
    std::fs::write(&config, text)?;
    let started = Instant::now();
    let mut child = Command::new(common::chela_binary())
        .arg("--config")
        .arg(&config)
        .arg("gateway")
        .env("HOME", dir.path())
        .env("RUST_LOG", "info")
        .env("CHELA_RPC_LISTEN", "127.0.0.1:0") // the RPC runs, on a free port
        .env("NO_COLOR", "1")
        .env_remove("CHELA_CONFIG")
        .env_remove("CHELA_STORE_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let mut stderr = BufReader::new(stderr).lines();
    let mut run = Run::default();
    let mut log = Vec::new();
    loop {
        let line = tokio::time::timeout(WAIT, stderr.next_line())
            .await
            .map_err(|_| format!("no ready line within 20 s; log: {log:?}"))??;
        let Some(line) = line else {
            return Err(format!("the gateway exited before it was ready; log: {log:?}").into());
        };
        let line = strip_ansi(&line);
        if line.contains("chela ready") {
            run.wall = started.elapsed();
            run.logged_ms = logged_elapsed(&line);
            break;
        }
        log.push(line);
    }
    // Keep draining stderr so the gateway never blocks on a full pipe.
    let drain = tokio::spawn(async move {
        let mut rest = stderr.into_inner();
        let mut sink = Vec::new();
        let _ = rest.read_to_end(&mut sink).await;
    });
    if measure_memory {
        let pid = child.id().ok_or("the gateway exited")?.to_string();
        tokio::time::sleep(IDLE).await;
        run.idle = Some(common::memory_of(&pid)?);
        let mut stdout = BufReader::new(stdout).lines();
        run.first_turn = Some(first_turn(&mut stdin, &mut stdout).await?);
        run.after_turn = Some(common::memory_of(&pid)?);
        run.shutdown = Some(terminate(&mut child).await?);
    } else {
        run.shutdown = Some(terminate(&mut child).await?);
    }
    drop(stdin);
    let _ = drain.await;
    Ok(run)
}

/// The median of `values` (upper median for an even count); `None` when empty.
fn median_u64(values: &mut [u64]) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

async fn bench() -> BenchResult {
    let fake = FakeModel::start().await?;
    let mut runs = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        runs.push(run_once(&fake, i < RSS_RUNS).await?);
    }
    let walls: Vec<Duration> = runs.iter().map(|r| r.wall).collect();
    let wall = Summary::of(&walls).ok_or("no runs")?;
    let mut logged: Vec<u64> = runs.iter().filter_map(|r| r.logged_ms).collect();
    let shutdowns: Vec<Duration> = runs.iter().filter_map(|r| r.shutdown).collect();
    let turns: Vec<Duration> = runs.iter().filter_map(|r| r.first_turn).collect();
    let mut idle_rss: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.idle.map(|m| m.rss_kib))
        .collect();
    let mut idle_hwm: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.idle.map(|m| m.hwm_kib))
        .collect();
    let mut idle_anon: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.idle.map(|m| m.anon_kib))
        .collect();
    let mut turn_rss: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.after_turn.map(|m| m.rss_kib))
        .collect();
    let mut turn_hwm: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.after_turn.map(|m| m.hwm_kib))
        .collect();
    let fmt_mib = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), mib);
    let binary = std::fs::metadata(common::chela_binary())?.len();
    let mut rows = vec![
        row("binary size", mib(binary / 1024)),
        row("runs", RUNS.to_string()),
        row("spawn -> ready, wall (median)", ms(wall.p50)),
        row(
            "spawn -> ready, wall (min / max)",
            format!("{} / {}", ms(wall.min), ms(wall.max)),
        ),
        row(
            "ready elapsed_ms logged by chela (median)",
            median_u64(&mut logged).map_or_else(|| "n/a".into(), |v| format!("{v} ms")),
        ),
        row(
            "ready elapsed_ms logged (all runs)",
            format!("{:?}", runs.iter().map(|r| r.logged_ms).collect::<Vec<_>>()),
        ),
    ];
    if let Some(s) = Summary::of(&shutdowns) {
        rows.push(row("SIGTERM -> exit (median)", ms(s.p50)));
    }
    rows.push(row(
        format!("idle {IDLE:?}: VmRSS (median of {RSS_RUNS})"),
        fmt_mib(median_u64(&mut idle_rss)),
    ));
    rows.push(row(
        format!("idle {IDLE:?}: RssAnon, heap and stacks (median of {RSS_RUNS})"),
        fmt_mib(median_u64(&mut idle_anon)),
    ));
    rows.push(row(
        format!("idle {IDLE:?}: VmHWM (median of {RSS_RUNS})"),
        fmt_mib(median_u64(&mut idle_hwm)),
    ));
    if let Some(s) = Summary::of(&turns) {
        rows.push(row(
            "first turn via stdin -> reply on stdout (median)",
            ms(s.p50),
        ));
    }
    rows.push(row(
        "after that turn: VmRSS / VmHWM (median)",
        format!(
            "{} / {}",
            fmt_mib(median_u64(&mut turn_rss)),
            fmt_mib(median_u64(&mut turn_hwm))
        ),
    ));
    table(
        "startup: `chela gateway` release binary, terminal channel, fake model",
        &rows,
    );
    println!(
        "  (memory under 20 concurrent users is measured in-process by `--bench turns`, \
         section (c): the terminal channel is a single user)"
    );
    Ok(())
}

fn main() -> BenchResult {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench())
}
