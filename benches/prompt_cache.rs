//! Request bytes and cached share per turn, with and without prompt caching (issue #37.6).
//!
//! Run with `cargo bench --bench prompt_cache` or `benches/run.sh prompt_cache`. Reports
//! figures only; nothing here asserts a size.
//!
//! The real `chela chat` talks to the test kit's fake model, which simulates a provider's
//! prompt cache (`tests/kit/src/model/cache.rs`): OpenAI's automatic prefix caching (at least
//! 1,024 tokens) and Anthropic's `cache_control` marks with their 20-block lookback. Each run
//! is [`TURNS`] turns of one session with the default agent (every tool, the real system
//! prompt), every third turn a tool call, so tool loops come in; queue mode `followup`, so
//! each line is a turn of its own. For each wire format, with
//! `[model] prompt_cache` off and on, it prints each model call's request bytes and the
//! share of its prompt tokens read from the cache, as chela recorded them from the usage the
//! fake reported (the transcript's `usage`).

mod common;

use std::process::Stdio;

use chela_testkit::FakeModel;
use common::{BenchResult, chela_binary, row, table};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Turns of the session.
const TURNS: usize = 9;

fn main() -> BenchResult {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        for (kind, label) in [
            ("openai", "OpenAI chat completions"),
            ("anthropic", "Anthropic Messages"),
        ] {
            for cache in [false, true] {
                let rows = run(kind, cache).await?;
                let title = format!("{label}, prompt_cache = {cache}");
                table(&title, &rows);
            }
        }
        Ok(())
    })
}

/// The turns' lines: a plain message, or a tool call every third turn.
fn lines() -> String {
    (1..=TURNS)
        .map(|i| match i % 3 {
            0 => format!("tool read {{\"path\": \"note-{i}.txt\"}}\n"),
            _ => format!("message {i}: tell me something about the number {i}\n"),
        })
        .collect()
}

/// One session through `chela chat`; a row per model call.
async fn run(kind: &str, cache: bool) -> BenchResult<Vec<(String, String)>> {
    let fake = FakeModel::start().await?;
    let dir = tempfile::tempdir()?;
    let base = match kind {
        "anthropic" => fake.base_url(),
        _ => fake.openai_base_url(),
    };
    let config = format!(
        "[model]\nprovider = \"{kind}\"\nbase_url = \"{base}\"\napi_key = \"bench\"\n\
         prompt_cache = {cache}\n[store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\n\
         [queue]\nmode = \"followup\"\n"
    );
    std::fs::write(dir.path().join("config.toml"), config)?;
    let chela = |args: &[&str]| {
        let mut cmd = Command::new(chela_binary());
        cmd.env_clear()
            .env("HOME", dir.path())
            .env("USER", "bench")
            .env("CHELA_RPC_LISTEN", "")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(dir.path())
            .arg("--config")
            .arg(dir.path().join("config.toml"))
            .args(args);
        cmd
    };
    let mut child = chela(&["chat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(lines().as_bytes()).await?;
    }
    child.wait().await?;
    let export = chela(&["sessions", "export", "agent:main:terminal:direct:bench"])
        .output()
        .await?;
    let usages: Vec<Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["message"]["role"] == "assistant")
        .map(|entry| entry["message"]["usage"].clone())
        .collect();
    let requests = fake.requests();
    let mut rows = Vec::new();
    let (mut all_prompt, mut all_cached) = (0u64, 0u64);
    for (i, (request, usage)) in requests.iter().zip(&usages).enumerate() {
        let number = |key: &str| usage[key].as_u64().unwrap_or(0);
        let (input, read, write) = (number("input"), number("cacheRead"), number("cacheWrite"));
        let prompt = input + read + write;
        all_prompt += prompt;
        all_cached += read;
        let bytes = request.body.to_string().len();
        rows.push(row(
            format!("call {:>2}", i + 1),
            format!(
                "{bytes:>6} bytes, {prompt:>5} prompt tokens, {read:>5} cached ({:>3.0}%), {write:>5} written",
                share(read, prompt)
            ),
        ));
    }
    rows.push(row(
        "all calls",
        format!(
            "{} calls, {all_cached} of {all_prompt} prompt tokens cached ({:.0}%)",
            requests.len(),
            share(all_cached, all_prompt)
        ),
    ));
    Ok(rows)
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    part as f64 * 100.0 / whole as f64
}
