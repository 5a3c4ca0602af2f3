//! End-to-end: `chela agent --message ... --json` against a fake model over real sockets (a
//! command, answering without a run, prints JSON too).

use crate::common;

use common::{KEY, Provider, Setup, assert_paired, messages, text_of, tool_calls};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_calling_turn_pairs_every_call_with_a_result() {
    let setup = Setup::openai("steer").await;
    let (status, json) = setup
        .agent_json(r#"tool write {"path":"note.txt","content":"hi"}"#)
        .await;
    assert!(status.success(), "{json}");
    assert_eq!(json["status"], "ok", "{json}");
    assert_eq!(json["sessionKey"], KEY);
    assert!(json["runId"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(
        json["text"].as_str().unwrap().starts_with("done:"),
        "{json}"
    );
    let written = std::fs::read_to_string(setup.path("ws/note.txt")).unwrap();
    assert_eq!(written, "hi");

    let entries = setup.export(KEY).await;
    assert_eq!(entries[0]["type"], "session");
    assert_eq!(entries[0]["version"], 4);
    let msgs = messages(&entries);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    let calls = tool_calls(msgs[1]);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "write");
    assert_eq!(msgs[1]["stopReason"], "toolUse");
    // The result directly follows its call and carries the same id.
    assert_eq!(msgs[2]["toolCallId"], calls[0]["id"]);
    assert_eq!(msgs[2]["isError"], false);
    assert_eq!(assert_paired(&entries).len(), 1);
    assert!(text_of(msgs[3]).starts_with("done:"));
    // Entries form one chain.
    for pair in entries[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ls_tool_lists_the_workspace() {
    let setup = Setup::openai("steer").await;
    std::fs::create_dir_all(setup.path("ws")).unwrap();
    std::fs::write(setup.path("ws/present.txt"), "x").unwrap();
    let (status, json) = setup.agent_json("tool ls {}").await;
    assert!(status.success(), "{json}");
    assert_eq!(json["status"], "ok");
    let text = json["text"].as_str().unwrap();
    assert!(text.starts_with("done:"), "{json}");
    assert!(text.contains("present.txt"), "{json}");
    let entries = setup.export(KEY).await;
    let results = assert_paired(&entries);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1["toolName"], "ls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_exits_1_with_an_error_status() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "max_retries = 1").await;
    let (status, json) = setup.agent_json("error 500").await;
    assert_eq!(status.code(), Some(1), "{json}");
    assert_eq!(json["status"], "error");
    assert!(
        json["error"].as_str().unwrap().contains("model error"),
        "{json}"
    );
    // One call and one retry.
    assert_eq!(setup.fake.request_count(), 2);
    // A client error is not retried.
    let (status, json) = setup.agent_json("error 400").await;
    assert_eq!(status.code(), Some(1), "{json}");
    assert_eq!(setup.fake.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_provider_answers_and_runs_tools() {
    let setup = Setup::start(Provider::Anthropic, "steer", 200, "").await;
    let (status, json) = setup.agent_json("hi").await;
    assert!(status.success(), "{json}");
    assert_eq!(json["text"], "ok: hi");

    let (status, json) = setup
        .agent_json(r#"tool write {"path":"a.txt","content":"from claude"}"#)
        .await;
    assert!(status.success(), "{json}");
    assert!(
        json["text"].as_str().unwrap().starts_with("done:"),
        "{json}"
    );
    let written = std::fs::read_to_string(setup.path("ws/a.txt")).unwrap();
    assert_eq!(written, "from claude");

    let paths: Vec<String> = setup.fake.requests().into_iter().map(|r| r.path).collect();
    assert!(
        paths.iter().all(|p| p.starts_with("/v1/messages")),
        "{paths:?}"
    );
    assert!(paths.iter().filter(|p| *p == "/v1/messages").count() >= 3);
    let entries = setup.export(KEY).await;
    let results = assert_paired(&entries);
    assert_eq!(results.len(), 1);
    assert!(results[0].0.starts_with("toolu_"), "{:?}", results[0].0);
    // The second turn's first model call saw the first turn.
    let calls = setup.model_calls();
    let second_turn = &calls[1];
    let sent = serde_json::to_string(&second_turn["messages"]).unwrap();
    assert!(sent.contains("ok: hi"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_answers_json_too() {
    let setup = Setup::openai("steer").await;
    let (status, json) = setup.agent_json("/whoami").await;
    assert!(status.success(), "{json}");
    assert_eq!(json["status"], "ok", "{json}");
    assert_eq!(json["command"], true, "{json}");
    assert_eq!(json["sessionKey"], KEY);
    assert!(!json["text"].as_str().unwrap().is_empty(), "{json}");
}
