//! `stream_call` over a real socket against a tiny scripted HTTP server (one canned
//! response per connection), so that no test depends on the shared fake model server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::super::openai_stream::OpenAiDecoder;
use super::*;

type Requests = Arc<Mutex<Vec<String>>>;

/// Serves `responses` in order, one per connection; records each request's head.
async fn serve(responses: Vec<String>) -> std::io::Result<(String, Requests)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let seen: Requests = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        for response in responses {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head and the (small) body: enough for a `content-length` request.
            while let Ok(n) = socket.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
            }
            if let Ok(mut list) = record.lock() {
                list.push(String::from_utf8_lossy(&request).into_owned());
            }
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    Ok((url, seen))
}

fn response(status: &str, extra_headers: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra_headers}connection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn call(url: &str, max_retries: u32) -> Result<EventStream, ProviderError> {
    let client = http_client()?;
    let headers = HeaderMap::new();
    let endpoint = Endpoint {
        client: &client,
        url,
        base_url: url,
        headers: &headers,
        idle_timeout: Duration::from_secs(10),
        max_retries,
    };
    stream_call(endpoint, &json!({"stream": true}), OpenAiDecoder::default()).await
}

#[tokio::test]
async fn retries_a_429_then_streams_the_answer() -> Result<(), Box<dyn std::error::Error>> {
    let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let (url, seen) = serve(vec![
        response(
            "429 Too Many Requests",
            "retry-after: 0\r\n",
            "application/json",
            r#"{"error":{"message":"slow down"}}"#,
        ),
        response("200 OK", "", "text/event-stream", sse),
    ])
    .await?;
    let events: Vec<_> = call(&format!("{url}/chat/completions"), 2)
        .await?
        .collect()
        .await;
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[0], Ok(ProviderEvent::TextDelta(t)) if t == "hi"));
    assert!(matches!(&events[1], Ok(ProviderEvent::Done { .. })));
    let seen = seen.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].starts_with("POST /chat/completions"));
    assert!(!seen[0].to_ascii_lowercase().contains("authorization"));
    assert!(seen[0].contains(r#"{"stream":true}"#));
    Ok(())
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_keeps_the_message()
-> Result<(), Box<dyn std::error::Error>> {
    let (url, seen) = serve(vec![response(
        "401 Unauthorized",
        "",
        "application/json",
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
    )])
    .await?;
    match call(&url, 3).await {
        Err(ProviderError::Status {
            status,
            message,
            retry_after,
        }) => {
            assert_eq!(status, 401);
            assert_eq!(message, "Incorrect API key provided");
            assert_eq!(retry_after, None);
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a 401 gave a stream"),
    }
    assert_eq!(seen.lock().map_err(|_| "poisoned")?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    drop(listener);
    match call(&url, 0).await {
        Err(ProviderError::Connect { url: named, .. }) => assert_eq!(named, url),
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("connected to a closed port"),
    }
    Ok(())
}
