//! [`FakeMcpHttp`], the fake MCP server over streamable HTTP, driven with reqwest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chela_testkit::FakeMcpHttp;
use chela_testkit::mcp::jsonrpc::{call, request};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};

const BOTH: &str = "application/json, text/event-stream";

fn post(mcp: &FakeMcpHttp, session: Option<&str>, message: &Value) -> RequestBuilder {
    let request = raw_post(mcp, BOTH, "application/json", message);
    match session {
        Some(session) => request.header("mcp-session-id", session),
        None => request,
    }
}

fn raw_post(
    mcp: &FakeMcpHttp,
    accept: &str,
    content_type: &str,
    message: &Value,
) -> RequestBuilder {
    reqwest::Client::new()
        .post(mcp.url())
        .header("accept", accept)
        .header("content-type", content_type)
        .body(message.to_string())
}

fn content_type(response: &Response) -> String {
    let value = response.headers().get("content-type").unwrap();
    value.to_str().unwrap().to_owned()
}

/// Initializes a session; returns its id.
async fn initialize(mcp: &FakeMcpHttp) -> String {
    let init = request(1, "initialize", json!({"protocolVersion": "2025-11-25"}));
    let response = post(mcp, None, &init)
        .header("authorization", "Bearer sekrit")
        .header("x-custom", "yes")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(content_type(&response).starts_with("application/json"));
    let session = response
        .headers()
        .get("mcp-session-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!session.is_empty() && session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["serverInfo"]["name"], "fake-mcp");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = post(mcp, Some(&session), &note).send().await.unwrap();
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
    assert_eq!(accepted.text().await.unwrap(), "");
    session
}

/// The `data:` of each SSE event of `body`, in order (priming events give "").
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|event| !event.is_empty())
        .map(|event| {
            let data = event.lines().find_map(|l| l.strip_prefix("data:"));
            data.unwrap_or_default().trim().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_session_lists_and_calls_in_both_answer_forms() {
    let mcp = FakeMcpHttp::start().await.unwrap();
    assert!(mcp.url().starts_with("http://127.0.0.1:") && mcp.url().ends_with("/mcp"));
    let session = initialize(&mcp).await;

    let list = post(&mcp, Some(&session), &request(2, "tools/list", json!({})))
        .send()
        .await
        .unwrap();
    assert!(content_type(&list).starts_with("application/json"));
    let list: Value = list.json().await.unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"crash") && names.contains(&"echo"),
        "{names:?}"
    );

    let echo = post(
        &mcp,
        Some(&session),
        &call(3, "echo", json!({"text": "hi"})),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(content_type(&echo), "text/event-stream");
    let body = echo.text().await.unwrap();
    assert!(
        body.starts_with("id: ") && body.contains("event: message\n"),
        "{body:?}"
    );
    let data = sse_data(&body);
    assert_eq!(data[0], "", "priming event first");
    let answer: Value = serde_json::from_str(&data[1]).unwrap();
    assert_eq!(
        (
            answer["id"].clone(),
            answer["result"]["content"][0]["text"].clone()
        ),
        (json!(3), json!("echo: hi"))
    );

    let add = post(
        &mcp,
        Some(&session),
        &call(4, "add", json!({"a": 1, "b": 2})),
    )
    .send()
    .await
    .unwrap();
    assert!(content_type(&add).starts_with("application/json"));
    let add: Value = add.json().await.unwrap();
    assert_eq!(add["result"]["structuredContent"], json!({"sum": 3}));
    let crash: Value = post(&mcp, Some(&session), &call(5, "crash", json!({})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(crash["result"]["content"][0]["text"], "unknown tool crash");

    assert_eq!(mcp.calls(), ["echo", "add", "crash"]);
    let requests = mcp.requests();
    let methods: Vec<_> = requests
        .iter()
        .map(|r| r.method.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call",
            "tools/call"
        ]
    );
    assert_eq!(requests[0].headers["authorization"], "Bearer sekrit");
    assert_eq!(requests[0].headers["x-custom"], "yes");
    assert_eq!(requests[2].headers["mcp-session-id"], session);
    mcp.stop().await.unwrap();
}

#[tokio::test]
async fn bad_requests_are_refused() {
    let mcp = FakeMcpHttp::start().await.unwrap();
    let ping = request(9, "ping", json!({}));
    let json_only = raw_post(&mcp, "application/json", "application/json", &ping);
    assert_eq!(
        json_only.send().await.unwrap().status(),
        StatusCode::NOT_ACCEPTABLE
    );
    let text = raw_post(&mcp, BOTH, "text/plain", &ping);
    assert_eq!(
        text.send().await.unwrap().status(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert_eq!(
        post(&mcp, None, &ping).send().await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    let unknown = post(&mcp, Some("no-such-session"), &ping)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);

    let session = initialize(&mcp).await;
    assert_eq!(
        post(&mcp, Some(&session), &ping)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let get = reqwest::Client::new()
        .get(mcp.url())
        .header("accept", "text/event-stream");
    assert_eq!(
        get.send().await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );

    mcp.set_down(true);
    let down = post(&mcp, Some(&session), &ping).send().await.unwrap();
    assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
    mcp.set_down(false);

    let delete = reqwest::Client::new()
        .delete(mcp.url())
        .header("mcp-session-id", &session);
    assert_eq!(delete.send().await.unwrap().status(), StatusCode::OK);
    assert!(mcp.sessions().is_empty());
    let after = post(&mcp, Some(&session), &ping).send().await.unwrap();
    assert_eq!(after.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_cancelled_sleep_ends_its_stream_without_an_answer() {
    let mcp = FakeMcpHttp::start().await.unwrap();
    let session = initialize(&mcp).await;
    let sleep = post(
        &mcp,
        Some(&session),
        &call(7, "sleep", json!({"ms": 600_000})),
    );
    let mut stream = sleep.send().await.unwrap();
    assert_eq!(content_type(&stream), "text/event-stream");
    let priming = stream.chunk().await.unwrap().unwrap();
    assert!(priming.starts_with(b"id: "), "{priming:?}");

    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "bored"}});
    let accepted = post(&mcp, Some(&session), &cancel).send().await.unwrap();
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
    assert_eq!(
        stream.chunk().await.unwrap(),
        None,
        "the stream ends, unanswered"
    );
    assert_eq!(mcp.cancelled(), ["7"]);

    let short = post(&mcp, Some(&session), &call(8, "sleep", json!({"ms": 1})));
    let data = sse_data(&short.send().await.unwrap().text().await.unwrap());
    let answer: Value = serde_json::from_str(&data[1]).unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "slept 1 ms");
}

#[tokio::test]
async fn stop_ends_a_call_under_way() {
    let mcp = FakeMcpHttp::start().await.unwrap();
    let session = initialize(&mcp).await;
    let sleep = post(
        &mcp,
        Some(&session),
        &call(2, "sleep", json!({"ms": 600_000})),
    );
    let mut stream = sleep.send().await.unwrap();
    assert!(stream.chunk().await.unwrap().is_some());
    mcp.stop().await.unwrap();
    assert!(matches!(stream.chunk().await, Ok(None) | Err(_)));
}
