//! Conformance of chela's ACP client with real third-party coding agents, run offline against
//! the kit's fake model (see `tests/conformance/acp/NOTES.md` and shared/recipes): Codex
//! (`@zed-industries/codex-acp` 0.16.0) and Claude Code (`@agentclientprotocol/claude-agent-acp`
//! 0.76.0), installed by `scripts/test.sh` from `tests/conformance/acp/package-lock.json`.
//!
//! Each agent, bound to the terminal conversation of `chela chat` with `permissions = "ask"`:
//! a text turn; a shell tool turn whose permission request is asked in the chat and allowed
//! there (the file the command writes appears); a slow turn stopped with `/stop` (the agent
//! answers `cancelled`); and after restarting chela, the next turn resumes the agent's session
//! with `session/load` (the model sees the earlier turns again). Each also gets chela's
//! `[mcp.servers]` in `session/new` and offers that server's tools to its model.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Chat, Setup};

/// The npm folder of the agents.
fn install_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/acp");
    assert!(
        dir.join("node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp")
            .exists()
            && dir
                .join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js")
                .exists(),
        "the ACP agents are not installed in {}/node_modules: run scripts/test.sh (it runs \
         npm ci there)",
        dir.display()
    );
    dir
}

/// `path` as a TOML literal string.
fn lit(path: &Path) -> String {
    format!("'{}'", path.to_str().unwrap())
}

/// Appends `[acp]` with the `name` harness pointed at the fake model; returns the setup.
async fn setup(name: &str) -> Setup {
    let s = Setup::openai("followup").await;
    let dir = install_dir();
    let harness = match name {
        "codex" => {
            let home = s.path("codex-home");
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(
                home.join("config.toml"),
                format!(
                    "model = \"gpt-5.2\"\nmodel_provider = \"local\"\n\
                     approval_policy = \"on-request\"\nsandbox_mode = \"workspace-write\"\n\
                     check_for_update_on_startup = false\n\
                     [model_providers.local]\nname = \"local\"\nbase_url = \"{}\"\n\
                     wire_api = \"responses\"\nenv_key = \"LOCAL_API_KEY\"\n\
                     requires_openai_auth = false\nrequest_max_retries = 0\n\
                     stream_max_retries = 0\n[analytics]\nenabled = false\n",
                    s.fake.openai_base_url()
                ),
            )
            .unwrap();
            let bin = dir.join("node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp");
            format!(
                "command = [{}]\nenv = {{ CODEX_HOME = {}, LOCAL_API_KEY = 'fake' }}\n",
                lit(&bin),
                lit(&home)
            )
        }
        _ => {
            let config = s.path("claude-config");
            std::fs::create_dir_all(&config).unwrap();
            // Claude Code makes `<tmp>/claude-<uid>` at start. This test's store lives under
            // /tmp, so the sandbox lets nothing new be made directly in /tmp (an ancestor of
            // a hidden path, docs/tools.md): its temp folder is one made beforehand.
            let tmp = s.path("claude-tmp");
            std::fs::create_dir_all(&tmp).unwrap();
            let entry =
                dir.join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js");
            format!(
                "command = ['node', {}]\nenv = {{ ANTHROPIC_BASE_URL = '{}', \
                 ANTHROPIC_API_KEY = 'fake', CLAUDE_CONFIG_DIR = {}, CLAUDE_CODE_TMPDIR = {}, \
                 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = '1', DISABLE_TELEMETRY = '1', \
                 DISABLE_AUTOUPDATER = '1', IS_SANDBOX = '1' }}\n",
                lit(&entry),
                s.fake.base_url(),
                lit(&config),
                lit(&tmp)
            )
        }
    };
    let mut text = std::fs::read_to_string(s.config()).unwrap();
    // The agents reach the fake model on its loopback port, as an operator opens a local
    // model server's port (the default network policy allows only 80 and 443).
    text.push_str(&format!(
        "\n[acp]\npermissions = \"ask\"\nask_timeout_s = 60\nallow_ports = [{}]\n\
         [acp.agents.{name}]\n{harness}",
        s.fake.addr().port()
    ));
    // An MCP server the agent gets in `session/new` (and starts itself).
    text.push_str(&format!(
        "[mcp.servers.kit]\ncommand = {}\n",
        lit(&common::acp::fake_mcp_server())
    ));
    std::fs::write(s.config(), text).unwrap();
    s
}

/// The model requests the agent made so far (either wire format), as raw JSON text.
fn agent_requests(s: &Setup) -> Vec<String> {
    s.fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/responses") || r.path.starts_with("/v1/messages"))
        .map(|r| r.body.to_string())
        .collect()
}

async fn conformance(name: &str, tool_directive: &str) {
    let s = setup(name).await;
    let mut chat: Chat = s.chat();
    chat.send(&format!("/acp spawn {name} --bind here")).await;
    chat.wait_for("is bound here").await;

    // A text turn.
    chat.send("hello there").await;
    chat.wait_for("hello there").await;
    // The agent took chela's MCP server from `session/new`: the model is offered its tools.
    let first = agent_requests(&s);
    assert!(
        first
            .iter()
            .any(|body| body.contains("Answers `echo: <text>`")),
        "the agent's model request lacks the MCP server's echo tool: {first:#?}"
    );

    // A tool turn: the agent asks permission, the owner allows it in the chat.
    chat.send(&format!(
        "{tool_directive} echo approved > made-by-agent.txt"
    ))
    .await;
    chat.wait_for("asks permission").await;
    chat.send("allow").await;
    chat.wait_for("done:").await;
    let made = s.path("ws/made-by-agent.txt");
    common::wait_until("the agent's command wrote its file", || made.exists()).await;
    assert_eq!(std::fs::read_to_string(&made).unwrap().trim(), "approved");

    // A cancel: /stop during a slow stream ends the turn as cancelled.
    chat.send("slow 200 100").await;
    chat.wait_for("tick 2").await;
    chat.send("/stop").await;
    chat.wait_for("Stopped.").await;
    let output = chat.output();
    // The agent answered `cancelled` in time (else the turn ends with "did not stop").
    assert!(output.contains("[stopped]"), "{output}");
    assert!(!output.contains("did not stop"), "{output}");
    chat.finish().await;

    // A restart: the binding survives and the agent's session is loaded, not recreated.
    let before = agent_requests(&s).len();
    let mut chat = s.chat();
    chat.send("what came before").await;
    chat.wait_for("what came before").await;
    chat.finish().await;
    let requests = agent_requests(&s);
    let after = &requests[before..];
    assert!(
        after
            .iter()
            .any(|body| body.contains("what came before") && body.contains("hello there")),
        "the resumed session's model request lacks the earlier turns: {after:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_text_tool_permission_cancel_and_load() {
    conformance("codex", "escalate").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_agent_acp_text_tool_permission_cancel_and_load() {
    conformance("claude", "run").await;
}
