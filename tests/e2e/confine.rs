//! End-to-end: what hooks, a coding agent's process and the commands it runs through chela's
//! ACP terminal reach through the real binary. Under the default `sandbox = "landlock"` they
//! cannot read chela's config, RPC token file, high-water file or store, but read and write
//! the home folder and the workspace; with `sandbox = "off"` the same probe reads them all
//! (so the first check means something).

use crate::common;

use common::{Setup, acp};

/// What a confined process sees: chela's files denied, home and workspace open, and (the
/// documented limit) no new file directly in the temp dir that holds chela's files.
const CONFINED: &str = "config:denied token:denied highwater:denied store:denied home:read \
                        rc:write cache:write newtop:denied ws:write #";
/// What an unconfined one sees.
const OPEN: &str = "config:read token:read highwater:read store:read home:read \
                    rc:write cache:write newtop:write ws:write #";

/// Writes `ws/probe.sh`: `sh probe.sh TAG` prints what it could read and write (run in the
/// workspace). Also the token file, a secret and an rc file in the home (the temp dir), and
/// a cache folder there.
fn write_probe(s: &Setup) {
    let p = |rel: &str| s.path(rel).display().to_string();
    let script = format!(
        "tag=$1\n\
         r() {{ if cat \"$1\" >/dev/null 2>&1; then printf '%s:read ' \"$2\"; else printf '%s:denied ' \"$2\"; fi; }}\n\
         w() {{ if {{ echo \"$tag\" >> \"$1\"; }} 2>/dev/null; then printf '%s:write' \"$2\"; else printf '%s:denied' \"$2\"; fi; }}\n\
         r {config} config; r {rpc} token; r {hw} highwater; r {store}/chela.redb store; r {home}/secret.txt home\n\
         w {home}/.agentrc rc; printf ' '; w {home}/.cache/made-$tag cache; printf ' '\n\
         w {home}/new-$tag newtop; printf ' '; w made-$tag ws; printf ' #'\n",
        config = p("config.toml"),
        rpc = p("data.rpc"),
        hw = p("data.highwater"),
        store = p("data"),
        home = p(""),
    );
    std::fs::create_dir_all(s.path("ws")).unwrap();
    std::fs::write(s.path("ws/probe.sh"), script).unwrap();
    std::fs::write(s.path("data.rpc"), "{\"token\":\"secret\"}").unwrap();
    std::fs::write(s.path("secret.txt"), "sk-secret").unwrap();
    std::fs::write(s.path(".agentrc"), "").unwrap();
    std::fs::create_dir_all(s.path(".cache")).unwrap();
}

fn append_config(s: &Setup, text: &str) {
    let mut config = std::fs::read_to_string(s.config()).unwrap();
    config.push_str(text);
    std::fs::write(s.config(), config).unwrap();
}

/// Runs one `chela agent` turn with an `after_run` hook that probes; returns its output.
async fn hook_probe(hooks_table: &str) -> String {
    let s = Setup::openai("followup").await;
    write_probe(&s);
    append_config(
        &s,
        &format!(
            "{hooks_table}\n[[hooks.after_run]]\ncommand = [\"sh\", \"-c\", \"sh probe.sh hook > hook-probe.txt\"]\ntimeout_s = 10\n"
        ),
    );
    let (status, json) = s.agent_json("hello").await;
    assert!(status.success(), "{json}");
    assert!(
        s.path("data/chela.redb").is_file(),
        "the store has its file"
    );
    std::fs::read_to_string(s.path("ws/hook-probe.txt")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_cannot_read_chelas_files_but_reaches_home_and_workspace() {
    assert_eq!(hook_probe("").await, CONFINED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_hooks_sandbox_off_a_hook_reaches_chelas_files() {
    assert_eq!(hook_probe("[hooks]\nsandbox = \"off\"\n").await, OPEN);
}

/// Binds `chela chat` to the fake agent (started by a shell that first probes, then becomes
/// the agent) and runs the probe through chela's terminal; returns (agent's, terminal's).
async fn acp_probe(acp_extra: &str) -> (String, String) {
    let s = Setup::openai("steer").await;
    write_probe(&s);
    acp::configure(&s, "approve-all", acp_extra);
    let agent = acp::fake_agent().display().to_string();
    let config = std::fs::read_to_string(s.config()).unwrap();
    let wrapped = config.replace(
        &format!("command = ['{agent}']"),
        &format!(
            "command = ['sh', '-c', 'sh probe.sh agent > agent-probe.txt; exec \"$0\"', '{agent}']"
        ),
    );
    assert_ne!(config, wrapped, "the harness command was found");
    std::fs::write(s.config(), wrapped).unwrap();
    let mut chat = s.chat();
    chat.send("/acp spawn --bind here").await;
    chat.wait_for("is bound here").await;
    chat.send("term sh probe.sh term").await;
    chat.wait_for("exit 0: ").await;
    let term = chat.wait_for(" #").await;
    chat.send("/acp close").await;
    chat.wait_for("Closed fake").await;
    chat.finish().await;
    let agent = std::fs::read_to_string(s.path("ws/agent-probe.txt")).unwrap();
    (agent, term)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coding_agent_and_its_terminal_cannot_read_chelas_files() {
    let (agent, term) = acp_probe("").await;
    assert_eq!(agent, CONFINED);
    assert_eq!(term, CONFINED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_acp_sandbox_off_the_agent_and_its_terminal_reach_everything() {
    let (agent, term) = acp_probe("sandbox = \"off\"").await;
    assert_eq!(agent, OPEN);
    assert_eq!(term, OPEN);
}
