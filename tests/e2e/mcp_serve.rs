//! `chela mcp serve` driven by an MCP client: rmcp's own client speaks MCP over the server's
//! stdin/stdout, against a running Telegram gateway (the kit's fake Bot API). Through the
//! tools it lists the sessions, reads the exact tail of a transcript, posts a text into a
//! session's chat (the fake Telegram gets it, the transcript records it, the agent sees it at
//! its next turn), gets clear errors for a bad key or a session with no chat, and does all
//! that with the client token: the discovery file's operator token is never presented.

use std::collections::BTreeSet;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::common::telegram::{TgSetup, dm};
use crate::common::{WAIT, chela_command, wait_until};

/// The session of Ann's DM (user 42).
const KEY: &str = "agent:main:telegram:direct:42";

type Client = RunningService<RoleClient, ()>;

/// Starts `cmd` (a `chela mcp serve`) and initializes an MCP session with it.
async fn start(cmd: tokio::process::Command) -> Client {
    let transport = TokioChildProcess::new(cmd).unwrap();
    tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialized in time")
        .expect("the server initializes")
}

/// Calls `tool` with `arguments`: its text and whether it is an error.
async fn call(client: &Client, tool: &'static str, arguments: Value) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    let request = CallToolRequestParams::new(tool).with_arguments(arguments);
    let result = tokio::time::timeout(WAIT, client.call_tool(request))
        .await
        .expect("answered in time")
        .expect("the call is answered");
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect();
    (texts.join("\n"), result.is_error == Some(true))
}

/// The history lines after the tool's first line (which says how many of how many).
async fn tail(client: &Client, n: usize) -> Vec<String> {
    let (text, error) = call(
        client,
        "session_history",
        json!({"session": KEY, "tail": n}),
    )
    .await;
    assert!(!error, "{text}");
    text.lines().skip(1).map(str::to_owned).collect()
}

/// Ann says `text` in her DM and the bot answers it.
async fn ann_says(s: &TgSetup, gateway: &mut crate::common::telegram::Gateway, text: &str) {
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, text);
    let answer = format!("ok: {text}");
    gateway
        .wait(s, &answer, |t| t.texts(42).contains(&answer))
        .await;
}

/// The discovery file's operator token replaced by one the gateway would refuse: a client
/// presenting it would be turned away with 401. Returns the file's address and client token.
fn spoil_operator_token(s: &TgSetup) -> (String, String) {
    let path = s.setup.path("data.rpc");
    let mut found: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(found["operator_token"].is_string(), "{found}");
    found["operator_token"] = json!("not-the-operator-token");
    std::fs::write(&path, found.to_string()).unwrap();
    let text = |field: &str| found[field].as_str().unwrap().to_owned();
    (text("address"), text("token"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_lists_reads_and_posts_into_a_chat_with_the_client_token() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gateway = s.gateway();
    ann_says(&s, &mut gateway, "first note").await;
    ann_says(&s, &mut gateway, "second note").await;
    wait_until("the discovery file", || s.setup.path("data.rpc").exists()).await;
    let (address, client_token) = spoil_operator_token(&s);

    let client = start(s.setup.chela(&["mcp", "serve"])).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let served = BTreeSet::from(["session_history", "session_send", "sessions_list"]);
    assert_eq!(
        names, served,
        "no other tool (no operator method) is served"
    );

    let (text, error) = call(&client, "sessions_list", json!({})).await;
    assert!(!error && text.contains(KEY), "{text}");
    assert_eq!(tail(&client, 1).await, ["assistant: ok: second note"]);
    let three = tail(&client, 3).await;
    assert_eq!(three.len(), 3, "{three:?}");
    assert_eq!(three[0], "assistant: ok: first note");
    assert!(
        three[1].starts_with("user: ") && three[1].ends_with("second note"),
        "{three:?}"
    );

    let report = "build finished: 3 tests fail";
    let (text, error) = call(
        &client,
        "session_send",
        json!({"session": KEY, "text": report}),
    )
    .await;
    assert!(!error, "{text}");
    assert!(text.contains("recorded in its transcript"), "{text}");
    let posted = |t: &TgSetup| t.texts(42).iter().any(|m| m == report);
    gateway.wait(&s, "the report in Ann's chat", posted).await;
    let last = tail(&client, 1).await.join("\n");
    assert!(
        last.starts_with("user: [Posted into this chat") && last.ends_with(report),
        "{last}"
    );
    ann_says(&s, &mut gateway, "what happened?").await;
    let asked = s.setup.model_calls().last().unwrap().to_string();
    assert!(asked.contains(report), "the agent sees the report: {asked}");

    let (text, error) = call(&client, "session_history", json!({"session": "no key"})).await;
    assert!(error && text.contains("invalid session key"), "{text}");
    let nowhere = json!({"session": "agent:main:telegram:direct:99", "text": "hi"});
    let (text, error) = call(&client, "session_send", nowhere).await;
    assert!(error && text.contains("has no chat to post into"), "{text}");
    client.cancel().await.unwrap();

    // Told the address and the token, it needs no discovery file (as in a sandbox).
    let config = std::fs::read_to_string(s.setup.config()).unwrap();
    let elsewhere = config.replace("path = \"data\"", "path = \"elsewhere\"");
    std::fs::write(s.setup.path("elsewhere.toml"), elsewhere).unwrap();
    std::fs::write(s.setup.path("token"), format!("{client_token}\n")).unwrap();
    let mut cmd = chela_command(s.setup.dir.path());
    cmd.args([
        "--config",
        "elsewhere.toml",
        "mcp",
        "serve",
        "--token-file",
        "token",
    ])
    .env("CHELA_RPC_URL", format!("ws://{address}"));
    let client = start(cmd).await;
    let (text, error) = call(&client, "sessions_list", json!({"limit": 1})).await;
    assert!(!error && text.contains(KEY), "{text}");
    client.cancel().await.unwrap();
    gateway.stop().await;
}
