//! chela's ACP client (`chela::acp::client::AcpClient`) against the scripted
//! `fake-acp-agent`: the terminal service on a real PTY, updates mapped to progress lines,
//! a stream that ends without a stop reason, an unknown update kind, session/close.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use chela::acp::client::{AcpClient, Services, TurnEnd};
use chela::acp::updates::UpdateMapper;
use chela::config::{HarnessConfig, NonInteractive, PermissionMode};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

async fn start(dir: &Path) -> AcpClient {
    start_with(dir, PermissionMode::ApproveAll).await
}

async fn start_with(dir: &Path, permissions: PermissionMode) -> AcpClient {
    let harness = HarnessConfig {
        command: vec![common::acp::fake_agent().to_str().unwrap().to_owned()],
        env: BTreeMap::from([(
            "FAKE_ACP_STATE".to_owned(),
            dir.join("state").to_str().unwrap().to_owned(),
        )]),
        cwd: None,
    };
    let services = Services {
        permissions,
        asker: None,
        terminal_output_limit: 4096,
        non_interactive: NonInteractive::Deny,
        sandbox: Default::default(),
        hidden: Vec::new().into(),
        mcp_servers: Vec::new().into(),
    };
    AcpClient::start("fake", &harness, dir, services)
        .await
        .unwrap()
}

/// Runs one prompt; returns how it ended and the mapped text (progress lines on).
async fn turn(client: &AcpClient, id: &str, text: &str) -> (TurnEnd, String) {
    let (tx, mut rx) = mpsc::channel(256);
    let mapped = tokio::spawn(async move {
        let mut mapper = UpdateMapper::new(true);
        while let Some(update) = rx.recv().await {
            mapper.map(&update);
        }
        mapper.text().to_owned()
    });
    let end = client
        .prompt(id, text, tx, &CancellationToken::new())
        .await
        .unwrap();
    (end, mapped.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_requests_run_on_a_pty_inside_the_session_folder() {
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path()).await;
    let id = client.new_session(dir.path()).await.unwrap();
    std::fs::write(dir.path().join("check.sh"), "pwd\ntest -t 0 && echo tty\n").unwrap();
    let (end, text) = turn(&client, &id, "term sh check.sh").await;
    assert!(matches!(end, TurnEnd::Stopped(_)), "{end:?}");
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert!(text.starts_with("exit 0: "), "{text}");
    assert!(text.contains(cwd.to_str().unwrap()), "{text}");
    assert!(
        text.contains("tty"),
        "the command did not run on a terminal: {text}"
    );
    std::fs::write(dir.path().join("fail.sh"), "exit 7\n").unwrap();
    let (_, text) = turn(&client, &id, "term sh fail.sh").await;
    assert!(text.starts_with("exit 7"), "{text}");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_and_tool_calls_become_progress_lines_and_unknown_updates_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path()).await;
    let id = client.new_session(dir.path()).await.unwrap();
    let (_, text) = turn(&client, &id, "plan").await;
    assert!(text.contains("📋 "), "{text}");
    assert!(text.contains("🔧 "), "{text}");
    assert!(text.ends_with("planned"), "{text}");
    let (end, text) = turn(&client, &id, "unknown-update").await;
    assert!(matches!(end, TurnEnd::Stopped(_)), "{end:?}");
    assert_eq!(text, "after unknown update");
    assert!(client.is_alive());
    client.close_session(&id).await;
    client.shutdown().await;
    assert!(!client.is_alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_without_a_stop_reason_still_completes() {
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path()).await;
    let id = client.new_session(dir.path()).await.unwrap();
    let (end, text) = turn(&client, &id, "noreply-close").await;
    assert_eq!(end, TurnEnd::Closed);
    assert!(!text.is_empty());
    assert!(!client.is_alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_is_an_error_naming_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let client = start(dir.path()).await;
    let id = client.new_session(dir.path()).await.unwrap();
    let (tx, _rx) = mpsc::channel(256);
    let err = client
        .prompt(&id, "crash", tx, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("exit code 3"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_refused_by_approve_reads_says_why_and_which_setting_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let client = start_with(dir.path(), PermissionMode::ApproveReads).await;
    let id = client.new_session(dir.path()).await.unwrap();
    let (end, text) = turn(&client, &id, "perm Run rm -rf build").await;
    assert!(matches!(end, TurnEnd::Stopped(_)), "{end:?}");
    assert!(text.contains("permission: reject_once"), "{text}");
    assert!(
        text.contains("🚫 Run rm -rf build refused: [acp] permissions = \"approve-reads\""),
        "{text}"
    );
    assert!(text.contains("\"approve-all\""), "{text}");
    assert!(
        !text.contains("failed"),
        "the refusal is shown once: {text}"
    );
    client.shutdown().await;
}
