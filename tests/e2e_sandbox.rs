//! End-to-end: what `exec` reaches through the real binary. Under the default Landlock
//! sandbox a command reads and writes the workspace but not chela's store, config, RPC token
//! file or the rest of the home folder; with `sandbox = "off"` the same command reaches them
//! all (so the first check means something). Provider keys in chela's environment do not
//! reach it unless passed by `[tools.exec] pass_env`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Setup;

/// A shell line printing `NAME:read` or `NAME:denied` for each secret, and whether the
/// workspace and the folder above it can be written.
fn probe(s: &Setup) -> String {
    let p = |rel: &str| s.path(rel).display().to_string();
    format!(
        "r() {{ if cat \"$1\" >/dev/null 2>&1; then printf '%s:read ' $2; else printf '%s:denied ' $2; fi; }}; \
         r {} config; r {} token; r {} home; \
         if ls {} >/dev/null 2>&1; then printf 'store:read '; else printf 'store:denied '; fi; \
         echo hi > made.txt && printf 'ws:write '; \
         if touch {} 2>/dev/null; then printf 'out:write'; else printf 'out:denied'; fi",
        p("config.toml"),
        p("data.rpc"),
        p("secret.txt"),
        p("data"),
        p("escape.txt"),
    )
}

/// Runs `command` through `exec` in `chela agent` and returns the model's final text.
async fn exec(s: &Setup, command: &str) -> String {
    let call = serde_json::json!({ "command": command });
    let out = s
        .run(&["agent", "--json", "--message", &format!("tool exec {call}")])
        .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(line).unwrap();
    json["text"].as_str().unwrap_or_default().to_owned()
}

async fn setup(extra: &str) -> Setup {
    let s = Setup::openai("followup").await;
    let mut config = std::fs::read_to_string(s.config()).unwrap();
    config.push_str(extra);
    std::fs::write(s.config(), config).unwrap();
    // The gateway's token file and a secret in the home folder (HOME is the temp dir).
    std::fs::write(s.path("data.rpc"), "{\"token\":\"secret\"}").unwrap();
    std::fs::write(s.path("secret.txt"), "sk-secret").unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_keeps_exec_in_the_workspace() {
    let s = setup("").await;
    let text = exec(&s, &probe(&s)).await;
    assert_eq!(
        text,
        "done: config:denied token:denied home:denied store:denied ws:write out:denied\n[exit code 0]"
    );
    assert!(s.path("ws/made.txt").is_file());
    assert!(!s.path("escape.txt").exists());
    // The system stays usable: programs run, /dev/null and the temp folder are writable.
    let text = exec(
        &s,
        "ls /usr/bin >/dev/null && t=$(mktemp) && echo ok > $t && cat $t",
    )
    .await;
    assert_eq!(text, "done: ok\n[exit code 0]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sandbox_off_the_same_command_reaches_everything() {
    let s = setup("[tools.exec]\nsandbox = \"off\"\n").await;
    let text = exec(&s, &probe(&s)).await;
    assert_eq!(
        text,
        "done: config:read token:read home:read store:read ws:write out:write\n[exit code 0]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_keys_reach_exec_only_when_passed() {
    let s = setup("[tools.exec]\npass_env = [\"GITHUB_TOKEN\"]\n").await;
    let count = "env | grep -c -e sk-provider -e gh-passed -e other-var";
    // A background job writes its count; the foreground call waits for it, then counts too.
    let calls = serde_json::json!([
        {"name": "exec", "arguments": {"command": format!("{count} > bg.txt"), "background": true}},
        {"name": "exec", "arguments": {"command": format!("while [ ! -s bg.txt ]; do sleep 0.05; done; cat bg.txt; {count}")}},
    ]);
    let mut cmd = s.chela(&["agent", "--json", "--message", &format!("tools {calls}")]);
    cmd.env("OPENAI_API_KEY", "sk-provider")
        .env("ANTHROPIC_API_KEY", "sk-provider")
        .env("GITHUB_TOKEN", "gh-passed")
        .env("SOME_OTHER_VAR", "other-var");
    let out = common::run_to_end(cmd).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    // Only the passed variable matched, in the background and in the foreground: one line.
    assert!(
        stdout.contains(r#""text":"done: 1\n1\n[exit code 0]""#),
        "{stdout}"
    );
}
