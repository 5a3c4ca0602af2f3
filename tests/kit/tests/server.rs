//! Directives shared by every format, and the server's own behaviour: errors, rate limits,
//! long answers, slow and stalled streams, models, 404s, recording, shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chela_testkit::FakeModel;
use common::{anthropic_parts, chat_parts, chat_request, parse_sse, post, post_sse};
use futures_util::StreamExt;
use serde_json::{Value, json};

fn anthropic_request(text: &str) -> Value {
    json!({ "model": "m", "max_tokens": 10, "stream": true,
            "messages": [{ "role": "user", "content": text }] })
}

#[tokio::test]
async fn ratelimit_answers_429_with_retry_after_then_recovers_across_endpoints() {
    let model = FakeModel::start().await.unwrap();
    let first = post(&model, "/v1/chat/completions", &chat_request("ratelimit 2")).await;
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "1");
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");

    let second = post(&model, "/v1/messages", &anthropic_request("ratelimit 2")).await;
    assert_eq!(second.status(), 429);
    assert_eq!(second.headers()["retry-after"], "1");
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");

    let other = post(&model, "/v1/chat/completions", &chat_request("ratelimit 1")).await;
    assert_eq!(other.status(), 429, "another text has its own counter");

    let events = post_sse(&model, "/v1/chat/completions", &chat_request("ratelimit 2")).await;
    assert_eq!(chat_parts(&events).0.concat(), "ok: recovered");
}

#[tokio::test]
async fn error_directive_answers_that_status_in_the_provider_shape() {
    let model = FakeModel::start().await.unwrap();
    let response = post(&model, "/v1/chat/completions", &chat_request("error 503")).await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "fake error 503");

    let response = post(&model, "/v1/messages", &anthropic_request("error 400")).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["message"], "fake error 400");
}

#[tokio::test]
async fn long_answer_has_exactly_n_chars_in_chunks_of_about_fifty() {
    let model = FakeModel::start().await.unwrap();
    for n in [1, 73, 1234, 5000] {
        let events = post_sse(
            &model,
            "/v1/messages",
            &anthropic_request(&format!("long {n}")),
        )
        .await;
        let (deltas, _) = anthropic_parts(&events);
        let text = deltas.concat();
        assert_eq!(text.chars().count(), n);
        assert!(text.ends_with('.'));
        assert!(deltas.iter().all(|d| d.chars().count() <= 50));
        assert_eq!(deltas.len(), n.div_ceil(50));
    }
}

#[tokio::test]
async fn run_without_a_shell_tool_says_so_and_picks_exec_command_for_codex() {
    let model = FakeModel::start().await.unwrap();
    let (deltas, calls) =
        chat_parts(&post_sse(&model, "/v1/chat/completions", &chat_request("run ls")).await);
    assert_eq!(deltas.concat(), "no shell tool offered");
    assert!(calls.is_empty());

    let mut request = chat_request("run cargo test");
    request["tools"] = json!([
        { "type": "function", "function": { "name": "read" } },
        { "type": "function", "function": { "name": "bash" } },
        { "type": "function", "function": { "name": "exec_command" } },
    ]);
    let (_, calls) = chat_parts(&post_sse(&model, "/v1/chat/completions", &request).await);
    assert_eq!(calls[0].name, "exec_command");
    assert_eq!(calls[0].arguments, json!({ "cmd": "cargo test" }));
}

#[tokio::test]
async fn slow_sends_numbered_ticks() {
    let model = FakeModel::start().await.unwrap();
    let events = post_sse(&model, "/v1/chat/completions", &chat_request("slow 1 3")).await;
    let (deltas, _) = chat_parts(&events);
    assert_eq!(deltas, ["tick 1 ", "tick 2 ", "tick 3 "]);
}

#[tokio::test]
async fn stall_sends_thinking_then_holds_the_stream_until_the_client_leaves() {
    let model = FakeModel::start().await.unwrap();
    let response = post(&model, "/v1/messages", &anthropic_request("stall")).await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("thinking...") {
        let bytes = body.next().await.expect("stream still open").unwrap();
        seen.push_str(std::str::from_utf8(&bytes).unwrap());
    }
    let (deltas, _) = anthropic_parts(&parse_sse(&seen));
    assert_eq!(deltas, ["thinking..."]);
    assert!(!seen.contains("message_stop"));
    drop(body);

    let events = post_sse(&model, "/v1/messages", &anthropic_request("still serving")).await;
    assert_eq!(anthropic_parts(&events).0.concat(), "ok: still serving");
}

#[tokio::test]
async fn shutdown_ends_a_stalled_stream() {
    let model = FakeModel::start().await.unwrap();
    let response = post(&model, "/v1/chat/completions", &chat_request("stall")).await;
    let reading = tokio::spawn(async move { response.text().await });
    model.shutdown().await.unwrap();
    let text = reading.await.unwrap().unwrap_or_default();
    assert!(!text.contains("[DONE]"));
}

#[tokio::test]
async fn models_lists_fake_model_and_unknown_paths_are_json_404s() {
    let model = FakeModel::start().await.unwrap();
    let client = reqwest::Client::new();
    let models: Value = client
        .get(format!("{}/models", model.openai_base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "fake-model");
    assert_eq!(models["data"].as_array().unwrap().len(), 1);

    let missing = client
        .get(format!("{}/v2/nothing", model.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error");
}

#[tokio::test]
async fn every_post_is_recorded_in_order_with_path_and_body() {
    let model = FakeModel::start().await.unwrap();
    assert_eq!(model.request_count(), 0);
    assert!(model.base_url().starts_with("http://127.0.0.1:"));
    assert_eq!(model.openai_base_url(), format!("{}/v1", model.base_url()));
    assert_eq!(
        model.addr().port(),
        model
            .base_url()
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap()
    );

    post_sse(&model, "/v1/chat/completions", &chat_request("one")).await;
    post_sse(&model, "/v1/messages?beta=true", &anthropic_request("two")).await;
    post(
        &model,
        "/v1/messages/count_tokens",
        &anthropic_request("three"),
    )
    .await;
    post(&model, "/v1/elsewhere", &json!({ "four": 4 })).await;

    let requests = model.requests();
    assert_eq!(model.request_count(), 4);
    let paths: Vec<_> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/messages",
            "/v1/messages/count_tokens",
            "/v1/elsewhere"
        ]
    );
    assert_eq!(requests[0].body, chat_request("one"));
    assert_eq!(requests[1].body["messages"][0]["content"], "two");
    assert_eq!(requests[3].body, json!({ "four": 4 }));
}
