//! ACP helpers for the end-to-end tests: the `fake-acp-agent` binary (built once per test
//! process next to the `chela` binary under test), the `[acp]` tables that make it the
//! default harness of a [`Setup`], and readers of the agent's method log.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::Setup;

/// The harness name the tests configure.
pub const HARNESS: &str = "fake";

/// The `fake-acp-agent` binary of this build (same target dir and profile as `chela`).
///
/// Cargo builds a dev-dependency's library for the root crate's tests, not its binaries, and
/// `CARGO_BIN_EXE_fake-acp-agent` exists only inside the kit crate. `cargo test --workspace`
/// (the test command) builds it beside `chela`, so a binary newer than every file of the kit
/// is used as it is. Otherwise (e.g. `cargo test --all-features --test e2e` after the kit changed) the first
/// call runs `cargo build -p chela-testkit --bin fake-acp-agent` into the same target dir;
/// that build resolves the dependencies' features for the kit alone, so it rebuilds some
/// of them, which is why it is not run when the binary is up to date.
pub fn fake_agent() -> PathBuf {
    static AGENT: OnceLock<PathBuf> = OnceLock::new();
    AGENT
        .get_or_init(|| build_kit_bin("fake-acp-agent"))
        .clone()
}

/// The kit's `fake-mcp-server` binary of this build, found or built as [`fake_agent`] is.
pub fn fake_mcp_server() -> PathBuf {
    static SERVER: OnceLock<PathBuf> = OnceLock::new();
    SERVER
        .get_or_init(|| build_kit_bin("fake-mcp-server"))
        .clone()
}

fn build_kit_bin(name: &str) -> PathBuf {
    let chela = Path::new(env!("CARGO_BIN_EXE_chela"));
    let profile_dir = chela.parent().expect("chela's folder");
    let target_dir = profile_dir.parent().expect("the target dir");
    let agent = profile_dir.join(name);
    // Only a target dir of this checkout: one shared with another checkout may hold its kit.
    if target_dir.starts_with(env!("CARGO_MANIFEST_DIR")) && is_newer_than_the_kit(&agent) {
        return agent;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "chela-testkit", "--bin", name])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("run cargo build for a kit binary");
    assert!(
        out.status.success(),
        "cargo build -p chela-testkit --bin {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(agent.is_file(), "{} was not built", agent.display());
    agent
}

/// Whether `binary` exists and was written after every file of the kit (`tests/kit`), the
/// workspace manifest and the lockfile.
fn is_newer_than_the_kit(binary: &Path) -> bool {
    fn newest(path: &Path) -> std::time::SystemTime {
        let Ok(meta) = std::fs::metadata(path) else {
            return std::time::SystemTime::UNIX_EPOCH;
        };
        let own = meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        let entries = std::fs::read_dir(path).into_iter().flatten().flatten();
        entries.map(|e| newest(&e.path())).fold(own, std::cmp::max)
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = std::fs::metadata(binary).and_then(|m| m.modified());
    let inputs = [
        root.join("tests/kit"),
        root.join("Cargo.lock"),
        root.join("Cargo.toml"),
    ];
    let newest_input = inputs.iter().map(|p| newest(p)).max();
    built.is_ok_and(|built| newest_input.is_some_and(|input| built > input))
}

/// Where the fake agent of a setup keeps its sessions and its method log.
pub struct AgentFiles {
    /// `FAKE_ACP_STATE`.
    pub state: PathBuf,
    /// `FAKE_ACP_LOG`.
    pub log: PathBuf,
}

impl AgentFiles {
    /// Every JSON line of the method log so far (none before the agent first started).
    pub fn entries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("each log line is JSON"))
            .collect()
    }

    /// The requests and notifications the agent received with method `method`.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.entries()
            .into_iter()
            .filter(|e| e["method"] == method)
            .collect()
    }

    /// How many times the agent received `method`.
    pub fn count(&self, method: &str) -> usize {
        self.calls(method).len()
    }

    /// The session ids the agent saw with `method`, in order.
    pub fn session_ids(&self, method: &str) -> Vec<String> {
        self.calls(method)
            .iter()
            .filter_map(|e| e["sessionId"].as_str().map(str::to_owned))
            .collect()
    }

    /// The outcomes of the permission requests the agent made, in order.
    pub fn permission_outcomes(&self) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|e| e["reply"] == "session/request_permission")
            .filter_map(|e| e["outcome"].as_str().map(str::to_owned))
            .collect()
    }

    /// The method names in order, one short line (for failure messages).
    pub fn summary(&self) -> String {
        self.entries()
            .iter()
            .map(|e| {
                e["method"]
                    .as_str()
                    .or_else(|| e["reply"].as_str())
                    .unwrap_or("?")
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Appends `[acp]` (default agent [`HARNESS`], permission mode `permissions`, `extra` lines)
/// and `[acp.agents.fake]` to the setup's config; the agent keeps its state and log in the
/// setup's temp dir. Must come after every other table.
pub fn configure(setup: &Setup, permissions: &str, extra: &str) -> AgentFiles {
    configure_with_env(setup, permissions, extra, "")
}

/// [`configure`] with `agent_env` (`KEY = 'value', ...`) added to the agent's environment.
pub fn configure_with_env(
    setup: &Setup,
    permissions: &str,
    extra: &str,
    agent_env: &str,
) -> AgentFiles {
    let files = AgentFiles {
        state: setup.path("acp-state"),
        log: setup.path("acp.log"),
    };
    std::fs::create_dir_all(&files.state).expect("create the agent's state dir");
    // Made here: under the default sandbox the agent cannot create files directly in the
    // temp dir, which holds chela's store and config (it may write existing ones).
    std::fs::write(&files.log, "").expect("create the agent's log");
    let mut text = std::fs::read_to_string(setup.config()).expect("read config");
    text.push_str(&format!(
        "\n[acp]\ndefault_agent = \"{HARNESS}\"\npermissions = \"{permissions}\"\n{extra}\n\
         [acp.agents.{HARNESS}]\ncommand = [{agent}]\n\
         env = {{ FAKE_ACP_STATE = {state}, FAKE_ACP_LOG = {log}{sep}{agent_env} }}\n",
        sep = if agent_env.is_empty() { "" } else { ", " },
        agent = toml_string(&fake_agent()),
        state = toml_string(&files.state),
        log = toml_string(&files.log),
    ));
    std::fs::write(setup.config(), text).expect("write config");
    files
}

/// `path` as a TOML literal string.
fn toml_string(path: &Path) -> String {
    let s = path.to_str().expect("a UTF-8 path");
    assert!(!s.contains('\''), "no quote in {s}");
    format!("'{s}'")
}
