//! End-to-end: commands a model runs (`exec`) do not see chela's own secrets (bot tokens,
//! `CHELA_*` variables), while variables named in `[tools.exec] pass_env` pass through.

use crate::common;

use common::{Setup, run_to_end};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_does_not_inherit_chelas_secrets() {
    let s = Setup::openai("followup").await;
    // Beyond PATH, HOME, LANG and the like, only variables named here pass.
    let config = std::fs::read_to_string(s.config()).unwrap();
    let config = format!("{config}\n[tools.exec]\npass_env = [\"SOME_TOOL_VAR\"]\n");
    std::fs::write(s.config(), config).unwrap();
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
