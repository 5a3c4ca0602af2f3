//! The fake model over Anthropic Messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chela_testkit::FakeModel;
use common::{anthropic_parts, names, post, post_sse};
use serde_json::{Value, json};

const PATH: &str = "/v1/messages?beta=true";

fn request(messages: Value) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": true,
        "system": [{ "type": "text", "text": "you are claude code" }],
        "tools": [
            { "name": "Read", "input_schema": {} },
            { "name": "Bash", "input_schema": {} },
        ],
        "messages": messages,
    })
}

#[tokio::test]
async fn plain_text_streams_in_the_messages_event_order() {
    let model = FakeModel::start().await.unwrap();
    let events = post_sse(
        &model,
        PATH,
        &request(json!([{ "role": "user", "content": "hi there" }])),
    )
    .await;
    let (deltas, calls) = anthropic_parts(&events);
    assert_eq!(deltas.concat(), "ok: hi there");
    assert!(deltas.len() >= 3);
    assert!(calls.is_empty());
    let names = names(&events);
    assert_eq!(names[0], "message_start");
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    assert!(names.contains(&"content_block_start") && names.contains(&"content_block_stop"));
    let delta = events[events.len() - 2].json();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert!(
        events[0].json()["message"]["usage"]["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn run_calls_bash_then_done_after_tool_result_even_with_system_entries() {
    let model = FakeModel::start().await.unwrap();
    let mut messages = json!([
        { "role": "user", "content": [
            { "type": "text", "text": "<system-reminder>context</system-reminder>" },
            { "type": "text", "text": "run echo hi" },
        ]},
        { "role": "system", "content": "a mid-conversation system entry" },
    ]);
    let events = post_sse(&model, PATH, &request(messages.clone())).await;
    let (_, calls) = anthropic_parts(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "toolu_1_1");
    assert_eq!(calls[0].name, "Bash");
    assert_eq!(calls[0].arguments, json!({ "command": "echo hi" }));
    let input_deltas = events
        .iter()
        .filter(|e| e.data.contains("input_json_delta"))
        .count();
    assert!(input_deltas >= 2);
    assert_eq!(
        events[events.len() - 2].json()["delta"]["stop_reason"],
        "tool_use"
    );

    let list = messages.as_array_mut().unwrap();
    list.push(json!({ "role": "assistant", "content": [
        { "type": "tool_use", "id": "toolu_1_1", "name": "Bash", "input": { "command": "echo hi" } },
    ]}));
    list.push(json!({ "role": "user", "content": [
        { "type": "tool_result", "tool_use_id": "toolu_1_1", "content": [{ "type": "text", "text": "hi" }] },
        { "type": "text", "text": "<system-reminder>still here</system-reminder>" },
    ]}));
    list.push(json!({ "role": "system", "content": "another system entry" }));
    let (deltas, calls) = anthropic_parts(&post_sse(&model, PATH, &request(messages)).await);
    assert_eq!(deltas.concat(), "done: hi");
    assert!(calls.is_empty());
}

#[tokio::test]
async fn system_role_entries_are_not_the_last_user_text() {
    let model = FakeModel::start().await.unwrap();
    let messages = json!([
        { "role": "user", "content": "hello" },
        { "role": "system", "content": "tool Read {}" },
    ]);
    let (deltas, calls) = anthropic_parts(&post_sse(&model, PATH, &request(messages)).await);
    assert_eq!(deltas.concat(), "ok: hello");
    assert!(calls.is_empty());
}

#[tokio::test]
async fn count_tokens_and_non_streaming_message() {
    let model = FakeModel::start().await.unwrap();
    let body = request(json!([{ "role": "user", "content": "tool Read {\"file_path\":\"/x\"}" }]));
    let counted: Value = post(&model, "/v1/messages/count_tokens", &body)
        .await
        .json()
        .await
        .unwrap();
    assert!(counted["input_tokens"].as_u64().unwrap() > 0);

    let mut body = body;
    body["stream"] = json!(false);
    let message: Value = post(&model, "/v1/messages", &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["type"], "tool_use");
    assert_eq!(message["content"][0]["id"], "toolu_2_1");
    assert_eq!(message["content"][0]["input"], json!({ "file_path": "/x" }));
}
