//! Helpers shared by the fake model tests: posting JSON and reading SSE bodies back.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use chela_testkit::FakeModel;
use serde_json::{Value, json};

/// One server-sent event: its name (if any) and data.
#[derive(Debug, Clone)]
pub struct Sse {
    pub event: Option<String>,
    pub data: String,
}

impl Sse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("event data is JSON")
    }
}

/// POSTs `body` to `path` on `model` with an auth header, as agents do.
pub async fn post(model: &FakeModel, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", model.base_url()))
        .bearer_auth("sk-anything")
        .header("x-api-key", "anything")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// POSTs and parses the whole SSE body.
pub async fn post_sse(model: &FakeModel, path: &str, body: &Value) -> Vec<Sse> {
    let response = post(model, path, body).await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    parse_sse(&response.text().await.unwrap())
}

pub fn parse_sse(text: &str) -> Vec<Sse> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event:") {
                    event = Some(name.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
                }
            }
            Sse {
                event,
                data: data.join("\n"),
            }
        })
        .collect()
}

/// A tool call as a client assembles it from a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// Chat Completions: the text deltas and the assembled tool calls.
pub fn chat_parts(events: &[Sse]) -> (Vec<String>, Vec<Call>) {
    let mut deltas = Vec::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for event in events.iter().filter(|e| e.data != "[DONE]") {
        let chunk = event.json();
        let delta = &chunk["choices"][0]["delta"];
        if let Some(text) = delta["content"].as_str() {
            deltas.push(text.to_owned());
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                calls.push(Default::default());
            }
            let entry = &mut calls[index];
            if let Some(id) = call["id"].as_str() {
                entry.0 = id.to_owned();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                entry.1 = name.to_owned();
            }
            entry
                .2
                .push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    (deltas, assemble(calls))
}

/// Responses: the text deltas and the function calls from `output_item.done`.
pub fn responses_parts(events: &[Sse]) -> (Vec<String>, Vec<Call>) {
    let mut deltas = Vec::new();
    let mut calls = Vec::new();
    for event in events {
        let data = event.json();
        assert_eq!(event.event.as_deref(), data["type"].as_str());
        match event.event.as_deref() {
            Some("response.output_text.delta") => {
                deltas.push(data["delta"].as_str().unwrap().to_owned())
            }
            Some("response.output_item.done") if data["item"]["type"] == "function_call" => {
                let item = &data["item"];
                calls.push((
                    item["call_id"].as_str().unwrap().to_owned(),
                    item["name"].as_str().unwrap().to_owned(),
                    item["arguments"].as_str().unwrap().to_owned(),
                ));
            }
            _ => {}
        }
    }
    (deltas, assemble(calls))
}

/// Anthropic: the text deltas and the tool_use blocks with their joined input JSON.
pub fn anthropic_parts(events: &[Sse]) -> (Vec<String>, Vec<Call>) {
    let mut deltas = Vec::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for event in events {
        let data = event.json();
        assert_eq!(event.event.as_deref(), data["type"].as_str());
        match event.event.as_deref() {
            Some("content_block_start") if data["content_block"]["type"] == "tool_use" => {
                let block = &data["content_block"];
                calls.push((
                    block["id"].as_str().unwrap().to_owned(),
                    block["name"].as_str().unwrap().to_owned(),
                    String::new(),
                ));
            }
            Some("content_block_delta") => match data["delta"]["type"].as_str() {
                Some("text_delta") => deltas.push(data["delta"]["text"].as_str().unwrap().into()),
                Some("input_json_delta") => calls
                    .last_mut()
                    .unwrap()
                    .2
                    .push_str(data["delta"]["partial_json"].as_str().unwrap()),
                other => panic!("unexpected delta {other:?}"),
            },
            _ => {}
        }
    }
    (deltas, assemble(calls))
}

fn assemble(calls: Vec<(String, String, String)>) -> Vec<Call> {
    calls
        .into_iter()
        .map(|(id, name, arguments)| Call {
            id,
            name,
            arguments: serde_json::from_str(&arguments).expect("arguments are JSON"),
        })
        .collect()
}

/// A streaming Chat Completions request with one user message.
pub fn chat_request(text: &str) -> Value {
    json!({
        "model": "fake-model",
        "stream": true,
        "messages": [
            { "role": "system", "content": "be brief" },
            { "role": "user", "content": text },
        ],
    })
}

/// The names of the events, in order.
pub fn names(events: &[Sse]) -> Vec<&str> {
    events.iter().filter_map(|e| e.event.as_deref()).collect()
}
