//! MCP servers' tools called by chela's agent, end to end: `chela chat` with `[mcp.servers]`
//! on the kit's `fake-mcp-server` (stdio) and `FakeMcpHttp` (streamable HTTP); the fake model
//! calls `SERVER__tool` and the chat shows the result. Also the scrubbed environment and the
//! sandbox, the output cap, a crash and the restart, a server too slow to hold a run, tool
//! policy, per-agent selection, approvals, and the servers coding agents get in
//! `session/new`.

use std::path::Path;

use crate::common;

use chela_testkit::mcp::FakeMcpHttp;
use common::{Chat, Setup, count};

/// The tool names the first model request offered.
fn offered(setup: &Setup) -> Vec<String> {
    let calls = setup.model_calls();
    let first = calls.first().expect("a model call");
    (first["tools"].as_array().into_iter().flatten())
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The last tool result the model was sent.
fn last_tool_result(setup: &Setup) -> String {
    let calls = setup.model_calls();
    let last = calls.last().expect("a model call");
    let messages = last["messages"].as_array().expect("messages");
    let result = messages.iter().rev().find(|m| m["role"] == "tool");
    result.expect("a tool result")["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `setup`'s config with `tables` appended.
fn append(setup: &Setup, tables: &str) {
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(tables);
    std::fs::write(setup.config(), config).unwrap();
}

/// A stdio server table for the kit's fake server, logging to `log`, with `more` lines.
/// (The log's folder is made here: the sandbox lets a server make nothing directly in the
/// folder holding chela's store and config.)
fn stdio_server(name: &str, log: &Path, args: &[&str], more: &str) -> String {
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let mut argv = vec!["--log".to_owned(), log.display().to_string()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    format!(
        "[mcp.servers.{name}]\ncommand = {:?}\nargs = {argv:?}\n{more}\n",
        common::acp::fake_mcp_server().display().to_string()
    )
}

/// Starts `chela chat` with `vars` added to its environment.
fn chat_with(setup: &Setup, vars: &[(&str, &str)]) -> Chat {
    let mut cmd = setup.chela(&["chat"]);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    Chat::spawn(cmd)
}

/// Sends a tool directive and returns the `done:` line it ends with.
async fn call(chat: &mut Chat, tool: &str, args: &str) -> String {
    chat.send(&format!("tool {tool} {args}")).await;
    chat.wait_for("done:").await;
    format!("done:{}", chat.wait_for("\n").await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_tools_answer_in_a_scrubbed_sandbox_capped_and_restarted() {
    let setup = Setup::openai("followup").await;
    let log = setup.path("mcp/kit.log");
    let server = stdio_server("kit", &log, &[], "env = { KIT_VAR = \"from-config\" }");
    append(
        &setup,
        &format!("[tools]\ndeny = [\"kit__add\"]\n[mcp]\nstartup_timeout_s = 20\n{server}"),
    );
    std::fs::create_dir_all(setup.path("ws")).unwrap();
    std::fs::write(setup.path("ws/note.txt"), "a note in the workspace").unwrap();
    let mut chat = chat_with(&setup, &[("CHELA_SECRET", "s3cret")]);

    let done = call(&mut chat, "kit__echo", r#"{"text": "hi"}"#).await;
    assert!(done.contains("done: echo: hi"), "{done}");
    let tools = offered(&setup);
    assert!(tools.contains(&"kit__echo".to_owned()), "{tools:?}");
    assert!(tools.contains(&"kit__sleep".to_owned()), "{tools:?}");
    // Tool policy: a denied tool is neither offered nor run.
    assert!(!tools.contains(&"kit__add".to_owned()), "{tools:?}");
    let done = call(&mut chat, "kit__add", r#"{"a": 1, "b": 2}"#).await;
    assert!(done.contains("not allowed in this conversation"), "{done}");

    // The scrubbed environment: the config's variable, none of chela's.
    let done = call(&mut chat, "kit__env", r#"{"name": "KIT_VAR"}"#).await;
    assert!(done.contains("done: from-config"), "{done}");
    let done = call(&mut chat, "kit__env", r#"{"name": "CHELA_SECRET"}"#).await;
    assert!(done.contains("done: (unset)"), "{done}");

    // The sandbox: the workspace is readable, chela's config is not.
    let note = setup.path("ws/note.txt").display().to_string();
    let done = call(&mut chat, "kit__read", &format!(r#"{{"path": "{note}"}}"#)).await;
    assert!(done.contains("done: a note in the workspace"), "{done}");
    let config = setup.config().display().to_string();
    call(
        &mut chat,
        "kit__read",
        &format!(r#"{{"path": "{config}"}}"#),
    )
    .await;
    let result = last_tool_result(&setup);
    assert!(!result.contains("api_key"), "the config leaked: {result}");
    assert!(result.contains("ermission denied"), "{result}");

    // Output is capped like every tool's (max_output_chars = 20000 by default).
    call(&mut chat, "kit__big", r#"{"chars": 50000}"#).await;
    let result = last_tool_result(&setup);
    assert!(
        result.contains("chars omitted of 50000 total"),
        "{}",
        result.len()
    );
    assert!(result.chars().count() <= 20_000, "{}", result.len());

    // A crash: the call answers that the server is unavailable; it is started again.
    let done = call(&mut chat, "kit__crash", "{}").await;
    assert!(done.contains("unavailable"), "{done}");
    let mut back = String::new();
    for _ in 0..40 {
        back = call(&mut chat, "kit__echo", r#"{"text": "back"}"#).await;
        if back.contains("echo: back") {
            break;
        }
        assert!(back.contains("unavailable"), "{back}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(back.contains("done: echo: back"), "{back}");
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(count(&log, "start "), 2, "{log}");
    assert_eq!(
        count(&log, "call kit__"),
        0,
        "the server sees its own names: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_gets_its_headers_and_a_slow_or_unchosen_server_is_not_offered() {
    let setup = Setup::openai("followup").await;
    let web = FakeMcpHttp::start().await.unwrap();
    let slow = stdio_server(
        "slow",
        &setup.path("mcp/slow.log"),
        &["--slow-start-ms", "60000"],
        "",
    );
    let other = stdio_server("other", &setup.path("mcp/other.log"), &[], "");
    append(
        &setup,
        &format!(
            "[mcp]\nstartup_timeout_s = 2\n[mcp.servers.web]\nurl = \"{}\"\n\
             headers = {{ Authorization = \"Bearer ${{MCP_TOKEN}}\" }}\n{slow}{other}",
            web.url()
        ),
    );
    // The default agent uses web and slow, not other.
    let config = std::fs::read_to_string(setup.config()).unwrap();
    let config = config.replace("[agent]\n", "[agent]\nmcp = [\"web\", \"slow\"]\n");
    std::fs::write(setup.config(), config).unwrap();
    let mut chat = chat_with(&setup, &[("MCP_TOKEN", "tok-123")]);

    let done = call(&mut chat, "web__echo", r#"{"text": "over http"}"#).await;
    assert!(done.contains("done: echo: over http"), "{done}");
    let done = call(&mut chat, "web__add", r#"{"a": 2, "b": 3}"#).await;
    assert!(done.contains("done: 5"), "{done}");
    let tools = offered(&setup);
    assert!(tools.contains(&"web__echo".to_owned()), "{tools:?}");
    // The slow server was still starting past the bound: the run did not wait for it.
    assert!(!tools.iter().any(|t| t.starts_with("slow__")), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("other__")), "{tools:?}");
    chat.finish().await;

    let requests = web.requests();
    let authorized = (requests.iter())
        .filter(|r| r.headers.get("authorization").map(String::as_str) == Some("Bearer tok-123"))
        .count();
    assert_eq!(authorized, requests.len(), "{requests:#?}");
    assert_eq!(web.calls(), ["echo", "add"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_a_server_that_asks_wait_for_an_owners_approval() {
    let setup = Setup::openai("followup").await;
    let server = stdio_server(
        "kit",
        &setup.path("mcp/kit.log"),
        &[],
        "approvals = \"ask\"",
    );
    append(&setup, &format!("[mcp]\nstartup_timeout_s = 20\n{server}"));
    let mut chat = setup.chat();

    chat.send(r#"tool kit__echo {"text": "careful"}"#).await;
    chat.wait_for("Approval needed to run:\nkit__echo {\"text\":\"careful\"}")
        .await;
    let line = chat.wait_for(" allow-once").await;
    let id = line.rsplit("/approve ").next().unwrap();
    let id = id.trim_end_matches(" allow-once").to_owned();
    chat.send(&format!("/approve {id} deny")).await;
    chat.wait_for("done: The owner denied running this command.")
        .await;
    let log = std::fs::read_to_string(setup.path("mcp/kit.log")).unwrap();
    assert_eq!(count(&log, "call echo"), 0, "{log}");

    chat.send(r#"tool kit__echo {"text": "careful"}"#).await;
    let line = chat.wait_for(" allow-once").await;
    let id = line.rsplit("/approve ").next().unwrap();
    let id = id.trim_end_matches(" allow-once").to_owned();
    chat.send(&format!("/approve {id} allow-once")).await;
    chat.wait_for("done: echo: careful").await;
    chat.finish().await;
}

/// The `mcpServers` a fake coding agent got in `session/new`; `http`: it says it takes HTTP
/// servers.
async fn servers_given_to_a_coding_agent(http: bool) -> Vec<serde_json::Value> {
    let setup = Setup::openai("followup").await;
    let server = stdio_server("kit", &setup.path("mcp/kit.log"), &[], "");
    append(
        &setup,
        &format!(
            "[mcp]\nstartup_timeout_s = 20\n{server}[mcp.servers.web]\n\
             url = \"http://127.0.0.1:9/mcp\"\nheaders = {{ X-Key = \"k\" }}\n\
             [mcp.servers.own]\ncommand = \"/bin/true\"\ncoding_agents = false\n"
        ),
    );
    let env = if http { "FAKE_ACP_MCP_HTTP = '1'" } else { "" };
    let files = common::acp::configure_with_env(&setup, "approve-reads", "", env);
    let mut chat = setup.chat();
    chat.send("/acp spawn --bind here").await;
    chat.wait_for("is bound here").await;
    chat.send("hello agent").await;
    chat.wait_for("echo: hello agent").await;
    chat.finish().await;
    let created = files.calls("session/new");
    assert_eq!(created.len(), 1, "{}", files.summary());
    created[0]["mcpServers"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coding_agent_gets_the_stdio_servers_and_http_ones_when_it_takes_them() {
    let servers = servers_given_to_a_coding_agent(false).await;
    // This agent does not say it takes HTTP servers: only the stdio one.
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert_eq!(servers[0]["name"], "kit");
    assert_eq!(
        servers[0]["command"].as_str().unwrap(),
        common::acp::fake_mcp_server().display().to_string()
    );
    assert!(servers[0].get("type").is_none(), "{servers:?}");

    let servers = servers_given_to_a_coding_agent(true).await;
    let names: Vec<&str> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kit", "web"], "{servers:?}");
    assert_eq!(servers[1]["type"], "http");
    assert_eq!(servers[1]["headers"][0]["value"], "k");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_lists_each_servers_tools_and_status_and_the_panel_show_them() {
    let setup = Setup::openai("followup").await;
    let server = stdio_server("kit", &setup.path("mcp/kit.log"), &[], "");
    append(
        &setup,
        &format!(
            "[rpc]\ntoken = \"mcp-client-token\"\n[mcp]\nstartup_timeout_s = 20\n{server}\
             [mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n"
        ),
    );
    let out = setup.run(&["doctor"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("ok   mcp kit: 9 tools: kit__echo, kit__add"),
        "{text}"
    );
    assert!(
        text.contains("FAIL mcp broken: cannot start /nonexistent/mcp-server: no such program"),
        "{text}"
    );
    assert!(text.contains("ok   mcp sandbox: landlock"), "{text}");

    let config = std::fs::read_to_string(setup.config()).unwrap();
    let config = config.replace(
        "command = \"/nonexistent/mcp-server\"",
        "command = \"/nonexistent/mcp-server\"\nenabled = false",
    );
    std::fs::write(setup.config(), config).unwrap();
    let mut chat = setup.chat();
    let done = call(&mut chat, "kit__echo", r#"{"text": "up"}"#).await;
    assert!(done.contains("done: echo: up"), "{done}");
    let status = setup.run(&["status"]).await;
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("mcp servers: 1\n  kit (stdio: ") && status.contains("): ready, 9 tools"),
        "{status}"
    );
    let found = chela::rpc::discovery::read(&setup.path("data.rpc")).unwrap();
    let base = format!("http://{}", found.address);
    let http = crate::panel::http();
    let (cookie, _) = crate::panel::login(&http, &base, "mcp-client-token").await;
    let page = http
        .get(format!("{base}/panel"))
        .header(reqwest::header::COOKIE, cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<h2>MCP servers</h2>"), "{page}");
    assert!(page.contains("<span class=ok>ready</span>"), "{page}");
    assert!(page.contains("kit__echo, kit__add"), "{page}");
    chat.finish().await;
}

/// Calls `web__echo` through `hub` until it answers (the server came back), at most ~10 s.
async fn echo_until_it_answers(
    hub: &chela::mcp::Hub,
    tool: &chela::mcp::RemoteTool,
) -> Vec<String> {
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut failures = Vec::new();
    for _ in 0..40 {
        match hub
            .call(tool, serde_json::json!({"text": "again"}), &cancel)
            .await
        {
            Ok(reply) if reply.text == "echo: again" => return failures,
            Ok(reply) => failures.push(reply.text),
            Err(e) => failures.push(e.to_string()),
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    panic!("the server never answered again: {failures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_goes_down_or_forgets_its_session_is_reached_again() {
    let web = FakeMcpHttp::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[agent]\nworkspace = {:?}\n[mcp]\nstartup_timeout_s = 10\n[mcp.servers.web]\nurl = \"{}\"\n",
        dir.path().join("ws").display().to_string(),
        web.url()
    );
    let config = chela::config::Config::from_toml_str(&toml, "c.toml", &|_| None).unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let hub = chela::mcp::Hub::start(&config, &shutdown).unwrap();
    hub.settled(None).await;
    let tools = hub.tools(None);
    let echo = tools.iter().find(|t| t.exposed == "web__echo").unwrap();
    assert!(echo_until_it_answers(&hub, echo).await.is_empty());

    // Down: calls fail and say so; back up, they answer again.
    web.set_down(true);
    let cancel = tokio_util::sync::CancellationToken::new();
    let failed = hub
        .call(echo, serde_json::json!({"text": "x"}), &cancel)
        .await;
    assert!(failed.is_err(), "{failed:?}");
    web.set_down(false);
    echo_until_it_answers(&hub, echo).await;
    // The failed call broke the connection: nothing went through it again before the
    // server was started again.
    assert!(hub.status()[0].restarts >= 1, "{:?}", hub.status());

    // The server forgot every session (it restarted): the next call starts a new one.
    web.expire_sessions();
    let failures = echo_until_it_answers(&hub, echo).await;
    assert!(failures.is_empty(), "{failures:?}");
    let status = hub.status();
    assert_eq!(
        status[0].state,
        chela::mcp::ServerState::Ready,
        "{status:?}"
    );
    shutdown.cancel();
}
