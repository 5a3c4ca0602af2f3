//! End-to-end: the gateway RPC of a running `chela gateway` over a real WebSocket: the token,
//! `agent` + `agent.wait`, `abort`, `events.subscribe`, and `chela agent` / `chela status`
//! going through the RPC while the gateway holds the store.

use crate::common;

use chela::rpc::client::{ClientError, RpcClient};
use common::{Chat, KEY, Setup, WAIT};
use futures_util::StreamExt;
use serde_json::{Value, json};

const TOKEN: &str = "e2e-secret";

/// A `chela gateway` (terminal channel) with `[rpc] token` set, listening on a free port;
/// returns it and the address it reported.
async fn gateway(setup: &Setup) -> (Chat, String) {
    let config = std::fs::read_to_string(setup.config()).unwrap();
    std::fs::write(
        setup.config(),
        format!("{config}\n[rpc]\ntoken = \"{TOKEN}\"\n"),
    )
    .unwrap();
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "info");
    let chat = Chat::spawn(cmd);
    let line = chat.wait_stderr_line("rpc listening on ").await;
    let address = line
        .split("rpc listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    (chat, address)
}

async fn client(address: &str) -> RpcClient {
    RpcClient::connect(address, TOKEN).await.unwrap()
}

async fn stop(chat: Chat) -> String {
    chat.signal("TERM");
    let done = chat.finish().await;
    assert!(done.status.success(), "gateway exit: {}", done.stderr);
    done.stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_token_is_refused() {
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    match RpcClient::connect(&address, "wrong").await {
        Err(ClientError::Unauthorized { .. }) => {}
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("a wrong token was let in"),
    }
    let refused = tokio_tungstenite::connect_async(format!("ws://{address}/ws")).await;
    assert!(refused.is_err(), "no token was let in");
    // The token may also come as a query parameter.
    let (mut socket, _) =
        tokio_tungstenite::connect_async(format!("ws://{address}/ws?token={TOKEN}"))
            .await
            .unwrap();
    use futures_util::SinkExt;
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            r#"{"id":1,"method":"nope"}"#.into(),
        ))
        .await
        .unwrap();
    let answer = tokio::time::timeout(WAIT, socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let answer: Value = serde_json::from_str(answer.to_text().unwrap()).unwrap();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_answered_slowly_one_after_the_other() {
    // Issue #32.8: the RPC took 300 wrong tokens in 2.5 s; the panel waits 0.3 s per failure.
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    let start = std::time::Instant::now();
    let guesses: Vec<_> = (0..5)
        .map(|i| {
            let address = address.clone();
            tokio::spawn(async move { RpcClient::connect(&address, &format!("guess{i}")).await })
        })
        .collect();
    // While they wait, the right token gets in.
    let mut rpc = client(&address).await;
    assert!(rpc.call("status", json!({})).await.is_ok());
    for guess in guesses {
        assert!(matches!(
            guess.await.unwrap(),
            Err(ClientError::Unauthorized { .. })
        ));
    }
    // Five refusals at once took their turns: at least 5 x 0.3 s (a lower bound only).
    let took = start.elapsed();
    assert!(took >= std::time::Duration::from_millis(1500), "{took:?}");
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_then_wait_returns_the_reply_and_events_announce_the_run() {
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    let mut events = client(&address).await;
    assert_eq!(
        events.call("events.subscribe", json!({})).await.unwrap()["subscribed"],
        true
    );
    let mut rpc = client(&address).await;
    let accepted = rpc
        .call("agent", json!({"message": "hello there"}))
        .await
        .unwrap();
    let run_id = accepted["runId"].as_str().unwrap().to_owned();
    assert!(run_id.starts_with("run-"), "{accepted}");
    assert_eq!(accepted["session"], KEY);
    assert!(accepted["acceptedAt"].as_u64().is_some());
    let done = rpc
        .call("agent.wait", json!({"runId": run_id, "timeoutMs": 20_000}))
        .await
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert_eq!(done["text"], "ok: hello there");
    assert!(done["endedAt"].as_u64() >= done["startedAt"].as_u64());
    // A wait after the end still answers.
    let again = rpc
        .call("agent.wait", json!({"runId": run_id}))
        .await
        .unwrap();
    assert_eq!(again["status"], "ok");
    // The subscriber was told (its next frame with an id is the answer to this call).
    let sessions = events.call("sessions.list", json!({})).await.unwrap();
    assert!(
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == KEY),
        "{sessions}"
    );
    let status = rpc.call("status", json!({})).await.unwrap();
    assert_eq!(status["live"], true, "{status}");
    assert_eq!(status["pendingTotal"], 0, "{status}");
    // A command is answered without a run.
    let cmd = rpc
        .call("agent", json!({"message": "/status"}))
        .await
        .unwrap();
    let cmd_id = cmd["runId"].as_str().unwrap();
    assert!(cmd_id.starts_with("cmd-"), "{cmd}");
    let answer = rpc
        .call("agent.wait", json!({"runId": cmd_id}))
        .await
        .unwrap();
    assert!(answer["text"].as_str().unwrap().contains(KEY), "{answer}");
    let bad = rpc.call("agent.wait", json!({"runId": "nope"})).await;
    assert!(matches!(bad, Err(ClientError::Fault(f)) if f.code == -32602));
    rpc.close().await;
    events.close().await;
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_events_reach_subscribers() {
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(format!("ws://{address}/ws?token={TOKEN}"))
            .await
            .unwrap();
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    socket
        .send(Message::Text(
            r#"{"id":1,"method":"events.subscribe"}"#.into(),
        ))
        .await
        .unwrap();
    socket
        .send(Message::Text(
            r#"{"id":2,"method":"agent","params":{"message":"ping"}}"#.into(),
        ))
        .await
        .unwrap();
    let mut run_id = None;
    let event = loop {
        let frame = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a frame in time")
            .unwrap()
            .unwrap();
        let frame: Value = serde_json::from_str(frame.to_text().unwrap()).unwrap();
        if frame["id"] == 2 {
            run_id = Some(frame["result"]["runId"].clone());
        }
        if frame["event"] == "run" {
            break frame;
        }
    };
    assert_eq!(event["status"], "ok", "{event}");
    assert_eq!(event["text"], "ok: ping");
    assert_eq!(event["session"], KEY);
    assert_eq!(Some(event["runId"].clone()), run_id);
    stop(chat).await;
}

/// The live feed: a run's lifecycle, its text deltas in order (they add up to the final text)
/// and its tool calls, numbered without gaps, then the finished run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_events_stream_a_runs_lifecycle_deltas_and_tools() {
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    let mut rpc = client(&address).await;
    let subscribed = rpc
        .call("events.subscribe", json!({"session": KEY}))
        .await
        .unwrap();
    assert_eq!(subscribed["session"], KEY);
    let mut events = Vec::new();
    let accepted = rpc
        .call_watching("agent", json!({"message": "tool ls {}"}), &mut |e| {
            events.push(e.clone())
        })
        .await
        .unwrap();
    let run_id = accepted["runId"].as_str().unwrap().to_owned();
    let done = rpc
        .call_watching("agent.wait", json!({"runId": run_id}), &mut |e| {
            events.push(e.clone())
        })
        .await
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    // The `run` event may come just after the wait's answer.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !events.iter().any(|e| e["event"] == "run") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no run event: {events:#?}"
        );
        rpc.call_watching("status", json!({}), &mut |e| events.push(e.clone()))
            .await
            .unwrap();
    }
    let ours: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "agent" && e["runId"] == run_id.as_str())
        .collect();
    let seqs: Vec<u64> = ours.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=ours.len() as u64).collect::<Vec<_>>(),
        "{ours:#?}"
    );
    let kinds: Vec<String> = ours
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["stream"].as_str().unwrap(),
                e["phase"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("lifecycle:start"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("lifecycle:end"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "tool:start"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "tool:end"), "{kinds:?}");
    assert!(ours.iter().all(|e| e["session"] == KEY));
    let text: String = ours
        .iter()
        .filter(|e| e["stream"] == "assistant")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, done["text"].as_str().unwrap());
    assert!(
        ours.iter().filter(|e| e["stream"] == "assistant").count() > 1,
        "the text came in pieces: {ours:#?}"
    );
    let run = events.iter().find(|e| e["event"] == "run").unwrap();
    assert_eq!(run["runId"], run_id.as_str());
    rpc.close().await;
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_stops_a_slow_run() {
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    let mut rpc = client(&address).await;
    let accepted = rpc
        .call("agent", json!({"message": "slow 200 100"}))
        .await
        .unwrap();
    let run_id = accepted["runId"].as_str().unwrap().to_owned();
    setup.wait_requests(1).await;
    let early = rpc
        .call("agent.wait", json!({"runId": run_id, "timeoutMs": 1}))
        .await
        .unwrap();
    assert_eq!(early["status"], "timeout", "{early}");
    let aborted = rpc.call("abort", json!({"session": KEY})).await.unwrap();
    assert_eq!(aborted["stoppedRun"], true, "{aborted}");
    let done = rpc
        .call("agent.wait", json!({"runId": run_id}))
        .await
        .unwrap();
    assert_eq!(done["status"], "aborted", "{done}");
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_a_queued_message_learns_at_once_that_abort_dropped_it() {
    let setup = Setup::openai("followup").await;
    let (chat, address) = gateway(&setup).await;
    let mut rpc = client(&address).await;
    let slow = rpc
        .call("agent", json!({"message": "slow 200 100"}))
        .await
        .unwrap();
    setup.wait_requests(1).await;
    let queued = rpc
        .call("agent", json!({"message": "after it"}))
        .await
        .unwrap();
    let queued_id = queued["runId"].as_str().unwrap().to_owned();
    assert_ne!(slow["runId"], queued["runId"]);
    let mut waiter = client(&address).await;
    let wait = waiter.call(
        "agent.wait",
        json!({"runId": queued_id, "timeoutMs": 120_000}),
    );
    let abort = async {
        // Let the wait start first: wait briefly on the slow run.
        let early = rpc
            .call(
                "agent.wait",
                json!({"runId": slow["runId"], "timeoutMs": 300}),
            )
            .await
            .unwrap();
        assert_eq!(early["status"], "timeout", "{early}");
        let aborted = rpc.call("abort", json!({"session": KEY})).await.unwrap();
        assert_eq!(aborted["cleared"], 1, "{aborted}");
    };
    // Without the drop on the bus this wait would only end at its two-minute timeout.
    let (done, ()) = tokio::join!(tokio::time::timeout(WAIT, wait), abort);
    let done = done.expect("the wait ended at once").unwrap();
    assert_eq!(done["status"], "aborted", "{done}");
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chela_agent_and_status_go_through_the_rpc_while_the_gateway_runs() {
    let setup = Setup::openai("steer").await;
    let (chat, _address) = gateway(&setup).await;
    assert!(setup.path("data.rpc").is_file());
    let out = setup.run(&["agent", "--message", "hi"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "ok: hi");
    // A reply of several deltas is printed as it streams, once.
    let out = setup.run(&["agent", "--message", "slow 10 4"]).await;
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "tick 1 tick 2 tick 3 tick 4 \n"
    );
    let (status, json) = setup.agent_json("again").await;
    assert!(status.success(), "{json}");
    assert_eq!(json["status"], "ok");
    assert_eq!(json["text"], "ok: again");
    assert_eq!(json["sessionKey"], KEY);
    let out = setup.run(&["status"]).await;
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("gateway: running"), "{report}");
    assert!(report.contains("pending turns: 0"), "{report}");
    let out = setup.run(&["sessions", "list"]).await;
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{listed}");
    assert!(listed.contains(KEY), "{listed}");
    let out = setup.run(&["sessions", "show", KEY]).await;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("ok: again"), "{shown}");
    // After the transcript, what its model calls used and cost (gpt-4.1-mini has a price).
    let usage = shown.split("\n[usage]\n").nth(1).unwrap_or_default();
    assert!(usage.starts_with("Session: "), "{shown}");
    assert!(usage.contains(" model calls · $0."), "{shown}");
    let live = setup.run(&["sessions", "export", KEY]).await;
    assert!(live.status.success());
    let out = setup.run(&["doctor"]).await;
    let doctor = String::from_utf8_lossy(&out.stdout);
    assert!(
        doctor.contains("ok   store:") && doctor.contains("in use by the running gateway"),
        "{doctor}"
    );
    let out = setup.run(&["sessions", "import", "agent:main:main"]).await;
    assert!(!out.status.success(), "import needs the gateway stopped");
    stop(chat).await;
    // The export through the RPC is the export the store gives directly.
    let direct = setup.run(&["sessions", "export", KEY]).await;
    assert!(direct.status.success());
    assert_eq!(
        String::from_utf8_lossy(&live.stdout),
        String::from_utf8_lossy(&direct.stdout)
    );
    // The discovery file goes with the gateway; the direct path works again.
    assert!(!setup.path("data.rpc").exists());
    let out = setup.run(&["status"]).await;
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("gateway: running"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_rpc_address_is_a_clear_error_and_no_rpc_is_explained() {
    let setup = Setup::openai("steer").await;
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("CHELA_RPC_LISTEN", &taken);
    let out = common::run_to_end(cmd).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rpc.listen"), "{stderr}");
    assert!(stderr.contains(&taken), "{stderr}");

    // A gateway with the RPC off: the commands say why they cannot reach it.
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("CHELA_RPC_LISTEN", "").env("RUST_LOG", "info");
    let chat = Chat::spawn(cmd);
    chat.wait_stderr_line("chela ready").await;
    let out = setup.run(&["agent", "--message", "hi"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("[rpc] listen"), "{stderr}");
    stop(chat).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_needs_the_operator_token_of_the_discovery_file() {
    let setup = Setup::openai("steer").await;
    let (chat, address) = gateway(&setup).await;
    let params = json!({"channel": "telegram", "code": "ABCD1234"});
    // The configured (client) token does not change who may talk to the bot.
    let mut rpc = client(&address).await;
    match rpc.call("pairing.approve", params.clone()).await {
        Err(ClientError::Fault(fault)) => {
            assert_eq!(
                fault.code,
                chela::rpc::protocol::FORBIDDEN,
                "{}",
                fault.message
            );
            assert!(
                fault.message.contains("operator token"),
                "{}",
                fault.message
            );
        }
        other => panic!("the client token reached pairing.approve: {other:?}"),
    }
    assert!(rpc.call("pairing.list", json!({})).await.is_ok());
    // The operator token, in the discovery file beside the store, does.
    let found = chela::rpc::discovery::read(&setup.path("data.rpc")).unwrap();
    let operator = found.operator_token.unwrap();
    assert_ne!(operator, TOKEN);
    let mut op = RpcClient::connect(&address, &operator).await.unwrap();
    let approved = op.call("pairing.approve", params).await.unwrap();
    assert_eq!(approved["request"], Value::Null);
    // And `chela pairing`, run by the operator, reads it from there.
    let out = setup
        .run(&["pairing", "approve", "telegram", "ABCD1234"])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no pending code ABCD1234"), "{stderr}");
    stop(chat).await;
}

/// The discovery file of the gateway of `setup`, once written.
async fn discovery(setup: &Setup) -> chela::rpc::discovery::Discovery {
    let path = setup.path("data.rpc");
    common::wait_until("the discovery file", || {
        chela::rpc::discovery::read(&path).is_some()
    })
    .await;
    chela::rpc::discovery::read(&path).unwrap()
}

/// Runs the turn `message` in session `agent:main:main` through `rpc`; returns its text.
async fn turn_text(rpc: &mut RpcClient, message: &str) -> String {
    turn_text_in(rpc, "agent:main:main", message).await
}

/// Runs the turn `message` in session `session` through `rpc`; returns its text.
async fn turn_text_in(rpc: &mut RpcClient, session: &str, message: &str) -> String {
    let params = json!({"session": session, "message": message});
    let accepted = rpc.call("agent", params).await.unwrap();
    let done = rpc
        .call(
            "agent.wait",
            json!({"runId": accepted["runId"], "timeoutMs": 20_000}),
        )
        .await
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    done["text"].as_str().unwrap().to_owned()
}

/// Ann's Telegram session key.
const ANN_KEY: &str = "agent:main:telegram:direct:42";

/// A gateway with the RPC on and Ann (42) allowed in Telegram, after Ann said hello and got
/// her answer: the setup, the gateway and the RPC's discovery.
async fn ann_answered_with_rpc() -> (
    common::telegram::TgSetup,
    common::telegram::Gateway,
    chela::rpc::discovery::Discovery,
) {
    use common::telegram::{TgConfig, TgSetup, dm};
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &format!("[rpc]\ntoken = \"{TOKEN}\"\n"),
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "hello");
    gw.wait(&s, "Ann's answer", |s| s.texts(42) == ["ok: hello"])
        .await;
    let found = discovery(&s.setup).await;
    (s, gw, found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_operator_tokens_run_posts_into_a_chat_through_the_message_tool() {
    let ann_key = ANN_KEY;
    let (s, mut gw, found) = ann_answered_with_rpc().await;
    let post = |text: &str| format!(r#"tool message {{"text": "{text}", "target": "{ann_key}"}}"#);

    let mut client = RpcClient::connect(&found.address, TOKEN).await.unwrap();
    let refused = turn_text(&mut client, &post("from the client token")).await;
    assert!(refused.contains("not your conversation"), "{refused}");
    assert_eq!(s.texts(42), ["ok: hello"], "the client token's run posted");

    let operator = found.operator_token.unwrap();
    let mut op = RpcClient::connect(&found.address, &operator).await.unwrap();
    let sent = turn_text(&mut op, &post("from the operator token")).await;
    assert!(sent.contains(&format!("sent to {ann_key}")), "{sent}");
    gw.wait(&s, "the operator's message in Ann's chat", |s| {
        s.texts(42).iter().any(|t| t == "from the operator token")
    })
    .await;
    client.close().await;
    op.close().await;
    gw.stop().await;
    assert!(
        !s.texts(42).iter().any(|t| t.contains("client token")),
        "{:?}",
        s.texts(42)
    );
}

/// A client token's run in Ann's own session key, whose `message` targets that same key, is
/// answered in the RPC call's conversation: the run's own session resolves to the run's own
/// conversation, never to where the session last replied (Ann's Telegram chat).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tokens_run_in_anns_session_key_does_not_post_into_anns_chat() {
    let ann_key = ANN_KEY;
    let (s, gw, found) = ann_answered_with_rpc().await;
    let post =
        format!(r#"tool message {{"text": "from the client token", "target": "{ann_key}"}}"#);

    let mut client = RpcClient::connect(&found.address, TOKEN).await.unwrap();
    let answer = turn_text_in(&mut client, ann_key, &post).await;
    assert!(!answer.contains("telegram chat"), "{answer}");
    client.close().await;
    gw.stop().await;
    assert!(
        !s.texts(42).iter().any(|t| t.contains("client token")),
        "the client token's run posted into Ann's chat: {:?}",
        s.texts(42)
    );
}

/// `sessions_spawn` with `runtime: "acp"` starts a coding agent in any folder, served files
/// there by chela itself: owners only, as `/acp`. The client token's run is refused with a
/// tool error and no agent starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_tokens_run_may_not_start_a_coding_agent() {
    use common::telegram::{TgConfig, TgSetup};
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &format!("[rpc]\ntoken = \"{TOKEN}\"\n"),
        ..TgConfig::default()
    })
    .await;
    let files = common::acp::configure(&s.setup, "approve-reads", "");
    let gw = s.gateway();
    let found = discovery(&s.setup).await;
    let mut client = RpcClient::connect(&found.address, TOKEN).await.unwrap();
    let refused = turn_text(
        &mut client,
        r#"tool sessions_spawn {"task": "read the config", "runtime": "acp", "cwd": "/"}"#,
    )
    .await;
    assert!(
        refused.contains("only an owner may start a coding agent"),
        "{refused}"
    );
    assert_eq!(files.count("session/new"), 0, "{}", files.summary());
    client.close().await;
    gw.stop().await;
}
