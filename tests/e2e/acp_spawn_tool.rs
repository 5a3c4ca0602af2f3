//! End-to-end, the `sessions_spawn` tool with `runtime: "acp"`: chela's own agent (the fake
//! model, told to call the tool) hands a task to the scripted `fake-acp-agent`, once (the
//! answer comes back as the tool result) or in a new Telegram forum topic bound to it (the
//! task is that topic's first message).

use crate::common;

use chela_testkit::{ChatSpec, SendOptions, UserSpec};
use common::Setup;
use common::acp;
use common::telegram::{TgConfig, TgSetup};

const FORUM: i64 = -1_001_777_000_002;
const ANN: i64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_off_spawn_returns_the_coding_agents_answer_to_the_model() {
    let s = Setup::openai("followup").await;
    let files = acp::configure(&s, "approve-reads", "");
    let (status, json) = s
        .agent_json(r#"tool sessions_spawn {"task": "hello there", "runtime": "acp"}"#)
        .await;
    assert!(status.success(), "{json}");
    let text = json["text"].as_str().unwrap();
    // The fake model quotes the tool result back: the coding agent's answer went through.
    assert!(text.contains("fake answered:"), "{text}");
    assert!(text.contains("echo: hello there"), "{text}");
    assert_eq!(files.count("session/prompt"), 1, "{}", files.summary());
    assert_eq!(files.count("session/new"), 1, "{}", files.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_spawn_is_a_tool_error_the_model_sees() {
    let s = Setup::openai("followup").await;
    acp::configure(&s, "approve-reads", "");
    let (status, json) = s
        .agent_json(r#"tool sessions_spawn {"task": "x", "runtime": "acp", "agent": "nope"}"#)
        .await;
    assert!(status.success(), "{json}");
    let text = json["text"].as_str().unwrap();
    assert!(text.contains("no coding agent named \"nope\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_session_spawn_opens_a_topic_and_sends_it_the_task() {
    let s = TgSetup::with(TgConfig {
        telegram: "group_policy = \"open\"\nrequire_mention = false",
        // Groups get no tools unless the policy says so: this forum may spawn.
        tables: &format!(
            "[commands]\nowner_allow_from = [\"telegram:{ANN}\"]\n\
             [tools.groups.\"telegram:{FORUM}\"]\nprofile = \"coding\""
        ),
        ..TgConfig::default()
    })
    .await;
    s.tg.add_chat(ChatSpec::forum(FORUM, "Forum"));
    let files = acp::configure(&s.setup, "approve-reads", "");
    let mut gw = s.gateway();
    s.tg.user_sends_with(
        ChatSpec::forum(FORUM, "Forum"),
        UserSpec::new(ANN, "Ann"),
        r#"tool sessions_spawn {"task": "build it", "runtime": "acp", "thread": true, "mode": "session", "label": "job"}"#,
        SendOptions::default(),
    );
    gw.wait(&s, "the task answered in a new topic", |s| {
        s.sent(FORUM)
            .iter()
            .any(|m| m.thread_id.is_some() && m.text == "echo: build it")
    })
    .await;
    let topics = s.tg.topics(FORUM);
    assert_eq!(topics.len(), 1, "{topics:?}");
    assert_eq!(topics[0].name, "job");
    // The parent conversation (General) gets the model's own answer quoting the tool result.
    gw.wait(&s, "the parent's answer in General", |s| {
        s.sent(FORUM)
            .iter()
            .any(|m| m.thread_id.is_none() && m.text.contains("done: Started"))
    })
    .await;
    assert_eq!(files.count("session/prompt"), 1, "{}", files.summary());
    gw.stop().await;
}
