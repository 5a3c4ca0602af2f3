use std::time::Duration;

use serde_json::json;

use super::super::transport::decode;
use super::super::transport::test_support::{chunks, collect, split_every};
use super::*;

async fn run(parts: Vec<String>) -> Vec<Result<ProviderEvent, ProviderError>> {
    let idle = Duration::from_secs(120);
    collect(decode(chunks(parts), AnthropicDecoder::default(), idle)).await
}

fn ok(events: Vec<Result<ProviderEvent, ProviderError>>) -> Vec<ProviderEvent> {
    events
        .into_iter()
        .map(|e| e.unwrap_or_else(|err| panic!("unexpected error: {err}")))
        .collect()
}

/// `event: <name>\ndata: <json>\n\n` for each pair, as Anthropic sends them.
fn named(events: &[(&str, &str)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn tool_turn() -> String {
    named(&[
        (
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[],"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":5}}}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me look."}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        ),
        ("ping", r#"{"type":"ping"}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking"}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":1}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"ls","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\".\"}"}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":2}"#,
        ),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":40}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ])
}

fn expected_tool_turn() -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::ThinkingDelta("Let me look.".into()),
        ProviderEvent::ThinkingSealed {
            signature: "abc".into(),
            redacted: false,
        },
        ProviderEvent::TextDelta("Checking".into()),
        ProviderEvent::ToolCall(ToolCall {
            id: "toolu_1".into(),
            name: "ls".into(),
            arguments: json!({"path": "."}),
        }),
        ProviderEvent::Done {
            stop_reason: StopReason::ToolUse,
            usage: Usage {
                input: 25,
                output: 40,
                cache_read: 5,
                cache_write: 0,
                total_tokens: 70,
            },
        },
    ]
}

#[tokio::test]
async fn thinking_text_and_tool_use_end_with_one_done() {
    assert_eq!(ok(run(vec![tool_turn()]).await), expected_tool_turn());
}

#[tokio::test]
async fn chunk_boundaries_inside_events_do_not_matter() {
    for size in [1, 4, 13, 64] {
        let events = ok(run(split_every(&tool_turn(), size)).await);
        assert_eq!(events, expected_tool_turn(), "chunk size {size}");
    }
}

#[tokio::test]
async fn stop_reasons_map_to_pi_vocabulary() {
    for (wire, expected) in [
        ("end_turn", StopReason::Stop),
        ("max_tokens", StopReason::Length),
        ("tool_use", StopReason::ToolUse),
        ("stop_sequence", StopReason::Stop),
    ] {
        let delta = format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{wire}"}}}}"#);
        let stream = named(&[
            ("message_delta", &delta),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        let events = ok(run(vec![stream]).await);
        assert!(
            matches!(events[..], [ProviderEvent::Done { stop_reason, .. }] if stop_reason == expected),
            "{wire}: {events:?}"
        );
    }
}

#[tokio::test]
async fn invalid_tool_input_is_passed_on_raw() {
    let stream = named(&[
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"ls","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{oops"}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        ),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = ok(run(vec![stream]).await);
    assert_eq!(
        events[0],
        ProviderEvent::ToolCall(ToolCall {
            id: "t".into(),
            name: "ls".into(),
            arguments: json!({"_raw": "{oops"}),
        })
    );
}

#[tokio::test]
async fn error_event_is_a_stream_error() {
    let stream = named(&[
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        ),
        (
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
    ]);
    let events = run(vec![stream]).await;
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[1], Err(ProviderError::Stream(m)) if m == "Overloaded"));
}

#[tokio::test]
async fn a_stream_cut_before_the_stop_reason_is_an_error() {
    let stream = named(&[(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#,
    )]);
    let events = run(vec![stream]).await;
    assert!(matches!(events[0], Ok(ProviderEvent::TextDelta(_))));
    assert!(matches!(events[1], Err(ProviderError::Stream(_))));
    assert_eq!(events.len(), 2);
}

#[tokio::test]
async fn a_missing_message_stop_after_the_stop_reason_still_ends_with_done() {
    let stream = named(&[(
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
    )]);
    let events = ok(run(vec![stream]).await);
    assert_eq!(events.len(), 1);
    assert!(matches!(
        events[0],
        ProviderEvent::Done {
            stop_reason: StopReason::Stop,
            ..
        }
    ));
}
