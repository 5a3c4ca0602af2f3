//! End-to-end: commands a model runs (`exec`) do not see chela's own secrets (bot tokens,
//! `CHELA_*` variables), while the rest of the environment passes through.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, run_to_end};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_does_not_inherit_chelas_secrets() {
    let s = Setup::openai("followup").await;
    for pty in [false, true] {
        let mut cmd = s.chela(&[
            "agent",
            "--json",
            "--message",
            &format!(
                r#"tool exec {{"command": "env | grep -c -e TOKEN_SEEN -e CHELA_SEEN -e PLAIN_SEEN_ok", "pty": {pty}}}"#
            ),
        ]);
        cmd.env("TELEGRAM_BOT_TOKEN", "TOKEN_SEEN")
            .env("CHELA_RPC_TOKEN", "CHELA_SEEN")
            .env("SOME_TOOL_VAR", "PLAIN_SEEN_ok");
        let out = run_to_end(cmd).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        // Only the plain variable matched: one line.
        assert!(stdout.contains(r#"done: 1"#), "pty {pty}: {stdout}");
    }
}
