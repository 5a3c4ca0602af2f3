//! End-to-end: what `exec` reaches through the real binary. Under the default Landlock
//! sandbox a command reads and writes the workspace but not chela's store, config, RPC token
//! file or the rest of the home folder; with `sandbox = "off"` the same command reaches them
//! all (so the first check means something). Provider keys in chela's environment do not
//! reach it unless passed by `[tools.exec] pass_env`.

use crate::common;

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

/// A shell line trying the three ways to be reached or reach out over TCP, printing
/// `connect:<result> bind:<result> listen:<result>`: connect to the test's loopback server on
/// `server` (a port no policy opens, as chela's RPC and panel), serve on 127.0.0.1:`free`, and
/// serve on a port the kernel picks (`listen` on a socket never bound, which no bind rule sees).
fn net_probe(server: u16, free: u16) -> String {
    format!(
        "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"127.0.0.1\", PeerPort => {server}); print \"connect:\", ($s ? \"ok\" : \"$!\"), \" \"'; \
         perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => \"127.0.0.1\", LocalPort => {free}, Listen => 1); print \"bind:\", ($s ? \"ok\" : \"$!\"), \" \"'; \
         perl -MSocket -e 'socket(my $s, PF_INET, SOCK_STREAM, 0) or die; print \"listen:\", (listen($s, 1) ? \"ok\" : \"$!\")'"
    )
}

/// A loopback server the agent's processes should not reach, and a port nobody listens on.
fn ports() -> (std::net::TcpListener, u16) {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    (server, free)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_can_neither_listen_nor_reach_a_loopback_port_by_default() {
    let s = setup("").await;
    let (server, free) = ports();
    let port = server.local_addr().unwrap().port();
    let text = exec(&s, &net_probe(port, free)).await;
    assert_eq!(
        text,
        "done: connect:Permission denied bind:Permission denied listen:Operation not permitted\n[exit code 0]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_ports_opens_a_port_to_connect_to_but_listening_stays_refused() {
    let (server, free) = ports();
    let port = server.local_addr().unwrap().port();
    let s = setup(&format!(
        "[tools.exec]\nnetwork = \"none\"\nallow_ports = [{port}]\n"
    ))
    .await;
    let text = exec(&s, &net_probe(port, free)).await;
    assert_eq!(
        text,
        "done: connect:ok bind:Permission denied listen:Operation not permitted\n[exit code 0]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_network_all_exec_connects_and_listens() {
    let s = setup("[tools.exec]\nnetwork = \"all\"\n").await;
    let (server, free) = ports();
    let port = server.local_addr().unwrap().port();
    let text = exec(&s, &net_probe(port, free)).await;
    assert_eq!(text, "done: connect:ok bind:ok listen:ok\n[exit code 0]");
}

/// A shell line printing exec's capability sets and `no_new_privs` from /proc/self/status,
/// then whether `mknod` of a character device in the workspace works.
const PRIVS_PROBE: &str = "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\\t' ' '; \
     if mknod node c 1 3 2>/dev/null; then echo mknod:ok; else echo mknod:refused; fi";

/// Whether the test runs as root (the owner of /proc/self is the process's user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_without_capabilities_and_with_no_new_privs() {
    assert_no_privileges(&setup("").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sandbox_off_exec_still_runs_without_capabilities() {
    assert_no_privileges(&setup("[tools.exec]\nsandbox = \"off\"\n").await).await;
}

/// Runs [`PRIVS_PROBE`] through exec in `s`: no capability, `no_new_privs`, no `mknod`.
async fn assert_no_privileges(s: &Setup) {
    let text = exec(s, PRIVS_PROBE).await;
    let zero = "0000000000000000";
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert!(text.contains(&format!("{set}: {zero}\n")), "{set}: {text}");
    }
    // Only a process holding CAP_SETPCAP (root) can empty its bounding set.
    if is_root() {
        assert!(text.contains(&format!("CapBnd: {zero}\n")), "{text}");
    }
    assert!(text.contains("NoNewPrivs: 1\n"), "{text}");
    assert!(text.contains("mknod:refused"), "{text}");
    assert!(!s.path("ws/node").exists());
}
