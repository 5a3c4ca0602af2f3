//! The fake model over the OpenAI Responses API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chela_testkit::FakeModel;
use common::{names, post, post_sse, responses_parts};
use serde_json::{Value, json};

fn request(input: Value) -> Value {
    json!({
        "model": "gpt-5.2",
        "stream": true,
        "instructions": "you are codex",
        "tools": [
            { "type": "function", "name": "shell", "parameters": {} },
            { "type": "function", "name": "update_plan", "parameters": {} },
        ],
        "input": input,
    })
}

#[tokio::test]
async fn plain_text_streams_as_a_message_item_with_usage() {
    let model = FakeModel::start().await.unwrap();
    let input = json!([
        { "type": "message", "role": "developer", "content": [{ "type": "input_text", "text": "rules" }] },
        { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "say hi" }] },
    ]);
    let events = post_sse(&model, "/v1/responses", &request(input)).await;
    let (deltas, calls) = responses_parts(&events);
    assert_eq!(deltas.concat(), "ok: say hi");
    assert!(deltas.len() >= 3);
    assert!(calls.is_empty());

    let names = names(&events);
    assert_eq!(names[0], "response.created");
    assert_eq!(names[names.len() - 1], "response.completed");
    assert!(names.contains(&"response.output_item.added"));
    assert!(names.contains(&"response.output_item.done"));
    let completed = events.last().unwrap().json();
    let response = &completed["response"];
    assert_eq!(response["status"], "completed");
    assert_eq!(response["model"], "gpt-5.2");
    assert_eq!(response["output"][0]["content"][0]["text"], "ok: say hi");
    assert!(response["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(response["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let sequence: Vec<u64> = events
        .iter()
        .map(|e| e.json()["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(sequence, (0..events.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn string_input_is_the_user_text() {
    let model = FakeModel::start().await.unwrap();
    let (deltas, _) =
        responses_parts(&post_sse(&model, "/v1/responses", &request(json!("plain"))).await);
    assert_eq!(deltas.concat(), "ok: plain");
}

#[tokio::test]
async fn run_calls_shell_then_done_after_function_call_output() {
    let model = FakeModel::start().await.unwrap();
    let mut input = json!([{ "role": "user", "content": "run ls -a" }]);
    let events = post_sse(&model, "/v1/responses", &request(input.clone())).await;
    let (deltas, calls) = responses_parts(&events);
    assert!(deltas.is_empty());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_1_1");
    assert_eq!(calls[0].name, "shell");
    assert_eq!(
        calls[0].arguments,
        json!({ "command": ["bash", "-lc", "ls -a"] })
    );
    let names = names(&events);
    let argument_deltas = names
        .iter()
        .filter(|n| **n == "response.function_call_arguments.delta")
        .count();
    assert!(argument_deltas >= 2);
    let completed = events.last().unwrap().json();
    assert_eq!(completed["response"]["output"][0]["type"], "function_call");

    let items = input.as_array_mut().unwrap();
    items.push(
        json!({ "type": "function_call", "call_id": "call_1_1", "name": "shell",
                       "arguments": "{\"command\":[\"bash\",\"-lc\",\"ls -a\"]}" }),
    );
    items.push(
        json!({ "type": "function_call_output", "call_id": "call_1_1", "output": ".\n..\nfile" }),
    );
    let (deltas, _) = responses_parts(&post_sse(&model, "/v1/responses", &request(input)).await);
    assert_eq!(deltas.concat(), "done: .\n..\nfile");
}

#[tokio::test]
async fn non_streaming_request_gets_one_response_object() {
    let model = FakeModel::start().await.unwrap();
    let mut body = request(json!("tool update_plan {\"plan\":[]}"));
    body["stream"] = json!(false);
    let response: Value = post(&model, "/v1/responses", &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(response["object"], "response");
    assert_eq!(response["output"][0]["name"], "update_plan");
    assert_eq!(response["output"][0]["arguments"], "{\"plan\":[]}");
}

#[tokio::test]
async fn escalate_fills_codex_exec_command_schema_with_require_escalated() {
    let model = FakeModel::start().await.unwrap();
    // The exec_command tool as codex-acp 0.16.0 offers it (trimmed descriptions), next to the
    // nameless built-ins it also sends.
    let body = json!({
        "model": "gpt-5.2",
        "stream": true,
        "tools": [
            { "type": "function", "name": "exec_command", "strict": false, "parameters": {
                "type": "object",
                "properties": {
                    "cmd": { "type": "string" },
                    "justification": { "type": "string" },
                    "sandbox_permissions": { "type": "string",
                                             "enum": ["use_default", "require_escalated"] },
                    "workdir": { "type": "string" },
                },
                "required": ["cmd"],
                "additionalProperties": false,
            } },
            { "type": "custom", "name": "apply_patch" },
            { "type": "web_search" },
        ],
        "input": [{ "type": "message", "role": "user",
                    "content": [{ "type": "input_text", "text": "escalate touch x" }] }],
    });
    let (_, calls) = responses_parts(&post_sse(&model, "/v1/responses", &body).await);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "exec_command");
    assert_eq!(calls[0].arguments["cmd"], "touch x");
    assert_eq!(
        calls[0].arguments["sandbox_permissions"],
        "require_escalated"
    );
    assert!(calls[0].arguments["justification"].is_string());
}
