//! The fake model over OpenAI Chat Completions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chela_testkit::FakeModel;
use common::{chat_parts, chat_request, post, post_sse};
use serde_json::json;

#[tokio::test]
async fn plain_text_streams_as_word_deltas_then_usage_then_done() {
    let model = FakeModel::start().await.unwrap();
    let mut request = chat_request("hello there  world");
    request["stream_options"] = json!({ "include_usage": true });
    let events = post_sse(&model, "/v1/chat/completions", &request).await;

    let (deltas, calls) = chat_parts(&events);
    assert_eq!(deltas.concat(), "ok: hello there  world");
    assert!(deltas.len() >= 4, "{deltas:?}");
    assert!(calls.is_empty());
    let n = events.len();
    assert_eq!(events[n - 1].data, "[DONE]");
    let usage = events[n - 2].json();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(usage["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    assert_eq!(events[n - 3].json()["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn user_content_parts_are_read_as_the_user_text() {
    let model = FakeModel::start().await.unwrap();
    let request = json!({
        "model": "m", "stream": true,
        "messages": [{ "role": "user", "content": [
            { "type": "text", "text": "first" },
            { "type": "image_url", "image_url": { "url": "data:," } },
            { "type": "text", "text": "second" },
        ]}],
    });
    let (deltas, _) = chat_parts(&post_sse(&model, "/v1/chat/completions", &request).await);
    assert_eq!(deltas.concat(), "ok: first\nsecond");
}

#[tokio::test]
async fn tool_call_streams_split_arguments_then_done_after_tool_result() {
    let model = FakeModel::start().await.unwrap();
    let mut request = chat_request(r#"tool read_file {"path": "src/main.rs"}"#);
    let events = post_sse(&model, "/v1/chat/completions", &request).await;
    let (deltas, calls) = chat_parts(&events);
    assert!(deltas.concat().is_empty());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_1_1");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(calls[0].arguments, json!({ "path": "src/main.rs" }));
    let argument_chunks = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter(|e| e.json()["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] != "")
        .filter(|e| !e.json()["choices"][0]["delta"]["tool_calls"].is_null())
        .count();
    assert!(
        argument_chunks >= 2,
        "arguments came in {argument_chunks} chunk(s)"
    );
    let finish = &events[events.len() - 2].json()["choices"][0]["finish_reason"];
    assert_eq!(finish, "tool_calls");

    let messages = request["messages"].as_array_mut().unwrap();
    messages.push(
        json!({ "role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1_1", "type": "function",
            "function": { "name": "read_file", "arguments": "{\"path\":\"src/main.rs\"}" },
        }]}),
    );
    messages.push(json!({ "role": "tool", "tool_call_id": "call_1_1", "content": "fn main() {}" }));
    let (deltas, calls) = chat_parts(&post_sse(&model, "/v1/chat/completions", &request).await);
    assert_eq!(deltas.concat(), "done: fn main() {}");
    assert!(calls.is_empty());
}

#[tokio::test]
async fn tools_directive_gives_two_calls_in_one_response() {
    let model = FakeModel::start().await.unwrap();
    let request = chat_request(
        r#"tools [{"name":"read","arguments":{"path":"a"}},{"name":"write","arguments":{"path":"b","text":"x"}}]"#,
    );
    let (_, calls) = chat_parts(&post_sse(&model, "/v1/chat/completions", &request).await);
    let ids: Vec<_> = calls.iter().map(|c| c.id.as_str()).collect();
    let names: Vec<_> = calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(ids, ["call_1_1", "call_1_2"]);
    assert_eq!(names, ["read", "write"]);
    assert_eq!(calls[1].arguments, json!({ "path": "b", "text": "x" }));
}

#[tokio::test]
async fn non_streaming_request_gets_one_completion() {
    let model = FakeModel::start().await.unwrap();
    let mut request = chat_request("tool ping {}");
    request["stream"] = json!(false);
    let response = post(&model, "/v1/chat/completions", &request).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["name"],
        "ping"
    );
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );

    let response = post(
        &model,
        "/v1/chat/completions",
        &json!({
            "messages": [{ "role": "user", "content": "hi" }],
        }),
    )
    .await;
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "ok: hi");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
}
