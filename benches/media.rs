//! Media in (issue #14.6): 20 Telegram users each send a 5 MB photo at the same moment.
//! Reported: the gateway's peak RSS (VmHWM) before and after, so the growth per user can be
//! set against the file size (downloads stream to disk: no whole file is held per user), and
//! per photo the time from the user sending it to the model call that carries it (download
//! into the workspace included), as median and p99.
//!
//! `[model] vision = "off"`: the model gets the note with the saved path, not the picture, so
//! the figure is the download's, not the base64 copy a vision call makes of each image.
//!
//! Run with `cargo bench --bench media` (release), or for a debug-build figure
//! `cargo test --bench media` (label it so). Reports figures only. `CHELA_BENCH_BIN` runs
//! another `chela` binary.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chela_testkit::telegram::{ChatSpec, FileSpec, UserSpec};
use chela_testkit::{FakeModel, FakeTelegram};
use common::{BenchResult, Summary, memory_of, mib, ms, row, table, tg_gateway};

/// Users, each in their own DM, each sending one photo.
const USERS: i64 = 20;
/// Size of each photo.
const PHOTO_BYTES: usize = 5 * 1024 * 1024;
/// How often the bench looks at the model's requests.
const POLL: Duration = Duration::from_millis(5);
/// Longest wait for all model calls.
const TIMEOUT: Duration = Duration::from_secs(120);
/// Quiet time before the baseline is read.
const SETTLE: Duration = Duration::from_secs(2);

/// A photo's bytes (distinct per user).
fn photo(user: i64) -> Vec<u8> {
    (0..PHOTO_BYTES)
        .map(|i| ((i as u64 * 31 + user as u64) % 251) as u8)
        .collect()
}

/// The caption that marks user `id`'s message in the model's requests.
fn caption(id: i64) -> String {
    format!("photo from user {id}")
}

/// Whether a request body's messages carry `needle` in some user message.
fn carries(body: &serde_json::Value, needle: &str) -> bool {
    body["messages"].as_array().is_some_and(|m| {
        m.iter()
            .any(|m| m["role"] == "user" && m.to_string().contains(needle))
    })
}

fn main() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> BenchResult {
    let model = FakeModel::start().await?;
    let tg = Arc::new(FakeTelegram::start().await?);
    let dir = tempfile::tempdir()?;
    tg_gateway::write_config(dir.path(), &model, &tg, "")?;
    let config = dir.path().join("config.toml");
    let text = std::fs::read_to_string(&config)?
        .replace("api_key = \"x\"\n", "api_key = \"x\"\nvision = \"off\"\n");
    std::fs::write(&config, text)?;
    let bin = common::chela_binary();
    let mut child = tg_gateway::spawn(&bin, dir.path())?;
    let pid = child.id().ok_or("the gateway has no pid")?.to_string();
    tg_gateway::wait_polling(&tg).await?;
    tokio::time::sleep(SETTLE).await;
    let before = memory_of(&pid)?;

    let photos: Vec<(i64, Vec<u8>)> = (1..=USERS).map(|n| (700 + n, photo(n))).collect();
    let start = Instant::now();
    let mut sent_at = Vec::new();
    for (id, bytes) in photos {
        let user = UserSpec::new(id, &format!("U{id}"));
        sent_at.push((id, start.elapsed()));
        tg.user_sends_file(
            ChatSpec::private(id),
            user,
            &caption(id),
            FileSpec::photo(bytes),
        );
    }
    let mut seen: Vec<Option<Duration>> = vec![None; sent_at.len()];
    let mut peak = before.hwm_kib;
    while seen.iter().any(Option::is_none) {
        if start.elapsed() > TIMEOUT {
            return Err(format!("not every photo reached the model within {TIMEOUT:?}").into());
        }
        let requests = model.requests();
        for (i, (id, _)) in sent_at.iter().enumerate() {
            if seen[i].is_none() && requests.iter().any(|r| carries(&r.body, &caption(*id))) {
                seen[i] = Some(start.elapsed());
            }
        }
        peak = peak.max(memory_of(&pid)?.hwm_kib);
        tokio::time::sleep(POLL).await;
    }
    let after = memory_of(&pid)?;
    child.start_kill()?;
    let _ = child.wait().await;

    let waits: Vec<Duration> = sent_at
        .iter()
        .zip(&seen)
        .filter_map(|((_, at), seen)| seen.map(|s| s.saturating_sub(*at)))
        .collect();
    let wait = Summary::of(&waits).ok_or("no samples")?;
    let grown = after.hwm_kib.max(peak).saturating_sub(before.hwm_kib);
    let profile = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    table(
        &format!(
            "media: {USERS} users send a {} MB photo at once ({}, {profile})",
            PHOTO_BYTES >> 20,
            bin.display()
        ),
        &[
            row("peak RSS before", mib(before.hwm_kib)),
            row("peak RSS after", mib(after.hwm_kib.max(peak))),
            row("growth", mib(grown)),
            row("growth per user", mib(grown / USERS as u64)),
            row("photo size", mib((PHOTO_BYTES / 1024) as u64)),
            row("photo -> model call p50", ms(wait.p50)),
            row("photo -> model call p99", ms(wait.p99)),
        ],
    );
    Ok(())
}
