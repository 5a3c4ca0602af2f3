//! End-to-end: `[hooks]` through the binary. A `before_tool` hook blocks `exec` of commands
//! with `rm` (the model sees why, the file stays); an `after_run` hook gets each run's JSON,
//! without chela's secrets or provider keys in its environment (only what `pass_env` names).

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{KEY, Setup, assert_paired, run_to_end};
use serde_json::Value;

const GUARD: &str = "#!/bin/sh\n\
    if grep -q 'rm '; then echo 'rm is not allowed here' >&2; exit 2; fi\n\
    exit 0\n";

const HOOKS: &str = r#"
[[hooks.before_tool]]
command = ["hooks/no-rm.sh"]
tools = ["exec"]

[[hooks.after_run]]
command = ["sh", "-c", "cat >> runs.jsonl; echo >> runs.jsonl; env > hook-env.txt"]
timeout_s = 5
pass_env = ["SOME_TOOL_VAR"]
"#;

/// `chela agent --json --message text` with secrets in its environment; the JSON line.
async fn agent(s: &Setup, text: &str) -> Value {
    let mut cmd = s.chela(&["agent", "--json", "--message", text]);
    cmd.env("TELEGRAM_BOT_TOKEN", "TOKEN_SEEN")
        .env("CHELA_RPC_TOKEN", "CHELA_SEEN")
        .env("SOME_TOOL_VAR", "PLAIN_SEEN_ok")
        .env("OPENAI_API_KEY", "PROVIDER_SEEN");
    let out = run_to_end(cmd).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout {stdout}, stderr {stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON ({e}): {stdout:?}, stderr {stderr:?}"))
}

fn runs(s: &Setup) -> Vec<Value> {
    std::fs::read_to_string(s.path("ws/runs.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_before_tool_hook_blocks_rm_and_an_after_run_hook_sees_each_run() {
    let s = Setup::openai("followup").await;
    let mut config = std::fs::read_to_string(s.config()).unwrap();
    config.push_str(HOOKS);
    std::fs::write(s.config(), config).unwrap();
    std::fs::create_dir_all(s.path("hooks")).unwrap();
    std::fs::write(s.path("hooks/no-rm.sh"), GUARD).unwrap();
    std::fs::set_permissions(
        s.path("hooks/no-rm.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(s.path("ws")).unwrap();
    std::fs::write(s.path("ws/keep.txt"), "precious").unwrap();

    let json = agent(&s, r#"tool exec {"command": "rm keep.txt"}"#).await;
    assert_eq!(json["status"], "ok", "{json}");
    let text = json["text"].as_str().unwrap();
    assert_eq!(
        text, "done: Blocked by hook: rm is not allowed here",
        "{json}"
    );
    assert_eq!(
        std::fs::read_to_string(s.path("ws/keep.txt")).unwrap(),
        "precious"
    );
    let entries = s.export(KEY).await;
    let results = assert_paired(&entries);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1["isError"], true);

    let json = agent(&s, r#"tool exec {"command": "echo fine > made.txt"}"#).await;
    assert_eq!(json["status"], "ok", "{json}");
    assert_eq!(
        std::fs::read_to_string(s.path("ws/made.txt")).unwrap(),
        "fine\n"
    );

    let runs = runs(&s);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0]["event"], "after_run");
    assert_eq!(runs[0]["session"], KEY);
    assert_eq!(runs[0]["status"], "ok");
    assert_eq!(runs[0]["text"], text);
    assert!(runs[0].get("error").is_none(), "{runs:?}");
    assert_eq!(runs[1]["status"], "ok");

    let env = std::fs::read_to_string(s.path("ws/hook-env.txt")).unwrap();
    assert!(env.contains("PLAIN_SEEN_ok"), "{env}");
    assert!(
        !env.contains("TOKEN_SEEN") && !env.contains("CHELA_SEEN"),
        "{env}"
    );
    // Provider keys are not a hook's either, unless named in its pass_env.
    assert!(!env.contains("PROVIDER_SEEN"), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
}

/// An `after_run` hook that records its capabilities and whether it can connect to `port` on
/// loopback (a port the default `[hooks] network = "web"` does not open) or listen at all.
fn probe_hook(port: u16) -> String {
    let script = format!(
        "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | tr -s '\\t' ' ' > hook-privs.txt; \
         perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"127.0.0.1\", PeerPort => {port}); print \"connect:\", ($s ? \"ok\" : \"$!\"), \" \"' > hook-net.txt; \
         perl -MSocket -e 'socket(my $s, PF_INET, SOCK_STREAM, 0) or die; print \"listen:\", (listen($s, 1) ? \"ok\" : \"$!\")' >> hook-net.txt"
    );
    let command = serde_json::to_string(&["sh", "-c", &script]).unwrap();
    format!("\n[[hooks.after_run]]\ncommand = {command}\ntimeout_s = 10\n")
}

/// Runs one turn with the probe hook (and `extra` config) while a server listens on
/// loopback; returns what the hook wrote: its privileges and what it could do on the network.
async fn probe_with(extra: &str) -> (String, String) {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let s = Setup::openai("followup").await;
    let mut config = std::fs::read_to_string(s.config()).unwrap();
    config.push_str(&probe_hook(port));
    config.push_str(extra);
    std::fs::write(s.config(), config).unwrap();
    std::fs::create_dir_all(s.path("ws")).unwrap();

    let json = agent(&s, "hello").await;
    assert_eq!(json["status"], "ok", "{json}");
    let privs = std::fs::read_to_string(s.path("ws/hook-privs.txt")).unwrap();
    let net = std::fs::read_to_string(s.path("ws/hook-net.txt")).unwrap();
    (privs, net)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_runs_without_capabilities_and_can_neither_listen_nor_reach_a_loopback_port() {
    let (privs, net) = probe_with("").await;
    assert_eq!(privs, "CapEff: 0000000000000000\nNoNewPrivs: 1\n");
    assert_eq!(
        net,
        "connect:Permission denied listen:Operation not permitted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_hooks_sandbox_off_a_hook_still_runs_without_capabilities() {
    let (privs, net) = probe_with("\n[hooks]\nsandbox = \"off\"\n").await;
    assert_eq!(privs, "CapEff: 0000000000000000\nNoNewPrivs: 1\n");
    // Off: the network is not confined.
    assert_eq!(net, "connect:ok listen:ok");
}
