use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;

use super::super::transport::decode;
use super::super::transport::test_support::{chunks, collect, split_every, sse};
use super::*;

const IDLE: Duration = Duration::from_secs(120);

async fn run(parts: Vec<String>) -> Vec<Result<ProviderEvent, ProviderError>> {
    collect(decode(chunks(parts), OpenAiDecoder::default(), IDLE)).await
}

fn ok(events: Vec<Result<ProviderEvent, ProviderError>>) -> Vec<ProviderEvent> {
    events
        .into_iter()
        .map(|e| e.unwrap_or_else(|err| panic!("unexpected error: {err}")))
        .collect()
}

fn text_stream() -> String {
    sse(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}"#,
        "[DONE]",
    ])
}

fn expected_text_events() -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::ThinkingDelta("think".into()),
        ProviderEvent::TextDelta("Hel".into()),
        ProviderEvent::TextDelta("lo".into()),
        ProviderEvent::Done {
            stop_reason: StopReason::Stop,
            usage: Usage {
                input: 10,
                output: 2,
                cache_read: 0,
                cache_write: 0,
                total_tokens: 12,
            },
        },
    ]
}

#[tokio::test]
async fn text_reasoning_and_usage_end_with_one_done() {
    assert_eq!(ok(run(vec![text_stream()]).await), expected_text_events());
}

#[tokio::test]
async fn chunk_boundaries_inside_events_do_not_matter() {
    for size in [1, 3, 7, 50] {
        let events = ok(run(split_every(&text_stream(), size)).await);
        assert_eq!(events, expected_text_events(), "chunk size {size}");
    }
}

#[tokio::test]
async fn multibyte_text_split_mid_character_survives() {
    let stream = sse(&[
        r#"{"choices":[{"delta":{"content":"héllo ✓"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let bytes = stream.into_bytes();
    let parts: Vec<Vec<u8>> = bytes.chunks(5).map(<[u8]>::to_vec).collect();
    let raw = futures_util::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
    let events = ok(collect(decode(raw, OpenAiDecoder::default(), IDLE)).await);
    assert_eq!(events[0], ProviderEvent::TextDelta("héllo ✓".into()));
}

#[tokio::test]
async fn tool_calls_are_assembled_by_index_across_chunks() {
    let stream = sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"ls","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\".\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":\"a.txt\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    let events = ok(run(split_every(&stream, 11)).await);
    assert_eq!(
        events,
        vec![
            ProviderEvent::ToolCall(ToolCall {
                id: "call_a".into(),
                name: "ls".into(),
                arguments: json!({"path": "."}),
            }),
            ProviderEvent::ToolCall(ToolCall {
                id: "call_b".into(),
                name: "read".into(),
                arguments: json!({"path": "a.txt"}),
            }),
            ProviderEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage::default(),
            },
        ]
    );
}

#[tokio::test]
async fn invalid_argument_json_is_passed_on_raw_and_empty_is_an_object() {
    let stream = sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"ls","arguments":"{\"path\": ."}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"date"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    let events = ok(run(vec![stream]).await);
    let ProviderEvent::ToolCall(first) = &events[0] else {
        panic!("expected a tool call, got {events:?}");
    };
    assert_eq!(first.arguments, json!({"_raw": "{\"path\": ."}));
    let ProviderEvent::ToolCall(second) = &events[1] else {
        panic!("expected a tool call, got {events:?}");
    };
    assert_eq!(second.arguments, json!({}));
}

#[tokio::test]
async fn missing_finish_reason_and_done_still_ends_with_done() {
    let plain = sse(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]);
    let events = ok(run(vec![plain]).await);
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Done {
            stop_reason: StopReason::Stop,
            usage: Usage::default()
        })
    );

    let with_call = sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"ls","arguments":"{}"}}]}}]}"#,
    ]);
    let events = ok(run(vec![with_call]).await);
    assert!(matches!(events[0], ProviderEvent::ToolCall(_)));
    assert!(matches!(
        events[1],
        ProviderEvent::Done {
            stop_reason: StopReason::ToolUse,
            ..
        }
    ));
    assert_eq!(events.len(), 2);
}

#[tokio::test]
async fn length_finish_reason_and_cached_tokens() {
    let stream = sse(&[
        r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":40}}}"#,
        "[DONE]",
    ]);
    let events = ok(run(vec![stream]).await);
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Done {
            stop_reason: StopReason::Length,
            usage: Usage {
                input: 60,
                output: 5,
                cache_read: 40,
                cache_write: 0,
                total_tokens: 105,
            },
        })
    );
}

#[tokio::test]
async fn stop_after_tool_calls_still_asks_for_tool_results() {
    let stream = sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"ls","arguments":"{}"}}]},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let events = ok(run(vec![stream]).await);
    assert!(matches!(
        events.last(),
        Some(ProviderEvent::Done {
            stop_reason: StopReason::ToolUse,
            ..
        })
    ));
}

#[tokio::test]
async fn events_after_done_are_ignored() {
    let mut stream = text_stream();
    stream.push_str(&sse(&[r#"{"choices":[{"delta":{"content":"late"}}]}"#]));
    assert_eq!(ok(run(vec![stream]).await), expected_text_events());
}

#[tokio::test]
async fn error_chunk_and_garbage_become_stream_errors() {
    let stream = sse(&[
        r#"{"choices":[{"delta":{"content":"a"}}]}"#,
        r#"{"error":{"message":"model crashed"}}"#,
    ]);
    let events = run(vec![stream]).await;
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[1], Err(ProviderError::Stream(m)) if m == "model crashed"));

    let events = run(vec![sse(&["not json"])]).await;
    assert!(matches!(&events[..], [Err(ProviderError::Stream(_))]));
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_ends_the_stream_with_idle_timeout() {
    let first = sse(&[r#"{"choices":[{"delta":{"content":"a"}}]}"#]);
    let bytes = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(first.into_bytes())])
        .chain(futures_util::stream::pending());
    let mut stream = decode(bytes, OpenAiDecoder::default(), Duration::from_secs(5));
    assert_eq!(
        stream.next().await.map(|r| r.ok()),
        Some(Some(ProviderEvent::TextDelta("a".into())))
    );
    let start = tokio::time::Instant::now();
    assert!(matches!(
        stream.next().await,
        Some(Err(ProviderError::IdleTimeout(5)))
    ));
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert!(stream.next().await.is_none());
}
