//! End-to-end: bad configs and missing credentials make `chela` exit 2 with a message that
//! names what to fix.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{Setup, chela_command, run_to_end};

/// Writes `config` into a fresh temp dir and runs `chela --config it chat`.
async fn chat_with_config(config: &str) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let out = run_config(dir.path(), &path).await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

async fn run_config(home: &Path, config: &Path) -> Output {
    let mut cmd = chela_command(home);
    cmd.arg("--config").arg(config).arg("chat");
    run_to_end(cmd).await
}

#[tokio::test]
async fn a_value_of_the_wrong_type_names_the_key_and_line() {
    let (out, stderr) = chat_with_config("[queue]\ndebounce_ms = \"abc\"\n").await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("queue.debounce_ms"), "{stderr}");
    assert!(stderr.contains(":2:"), "line 2 is named: {stderr}");
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn a_duration_past_its_bound_is_refused_naming_the_key() {
    // Accepted before, and a panic at SIGTERM (`Instant + Duration` overflowing).
    let (out, stderr) = chat_with_config(
        "[agent]\nshutdown_grace_s = 18446744073709551615\n[model]\nprovider = \"echo\"\n",
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(":2:1: agent.shutdown_grace_s: must be at most 86400 (seconds)"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let (out, stderr) = chat_with_config("[delivery]\nttl = \"400days\"\n").await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("delivery.ttl: must be at most 365days"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unknown_key_is_named() {
    let (out, stderr) = chat_with_config("[queue]\nmode = \"steer\"\nbogus_key = 1\n").await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bogus_key"), "{stderr}");
    assert!(stderr.contains(":3:"), "line 3 is named: {stderr}");
}

#[tokio::test]
async fn an_unknown_queue_mode_is_refused() {
    let (out, stderr) = chat_with_config("[queue]\nmode = \"sometimes\"\n").await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("queue.mode"), "{stderr}");
}

#[tokio::test]
async fn a_missing_config_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_config(dir.path(), Path::new("/nonexistent.toml")).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent.toml"), "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");
}

#[tokio::test]
async fn openai_without_a_key_or_base_url_says_to_set_openai_api_key() {
    let (out, stderr) =
        chat_with_config("[model]\nprovider = \"openai\"\n[store]\npath = \"data\"\n").await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[tokio::test]
async fn anthropic_without_a_key_says_to_set_anthropic_api_key() {
    let (out, stderr) =
        chat_with_config("[model]\nprovider = \"anthropic\"\n[store]\npath = \"data\"\n").await;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
}

#[tokio::test]
async fn bad_usage_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = chela_command(dir.path());
    cmd.arg("no-such-command");
    let out = run_to_end(cmd).await;
    assert_eq!(out.status.code(), Some(2));
    let mut cmd = chela_command(dir.path());
    cmd.arg("agent");
    let out = run_to_end(cmd).await;
    assert_eq!(out.status.code(), Some(2), "agent without --message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_vars_in_the_config_are_expanded() {
    let setup = Setup::openai("steer").await;
    let config = "[model]\nprovider = \"openai\"\nbase_url = \"${FAKE_URL}\"\n\
                  api_key = \"${FAKE_KEY:-test}\"\n[store]\npath = \"data\"\n\
                  [agent]\nworkspace = \"ws\"\n";
    std::fs::write(setup.config(), config).unwrap();
    let mut cmd = setup.chela(&["agent", "--message", "expanded", "--json"]);
    cmd.env("FAKE_URL", setup.fake.openai_base_url());
    let out = run_to_end(cmd).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {:?}", out.stderr);
    assert!(stdout.contains("ok: expanded"), "{stdout}");
}
