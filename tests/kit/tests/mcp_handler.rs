//! The fake MCP server's protocol over an in-memory stdio pair ([`serve_stdio`] on a
//! `tokio::io::duplex`), with tokio's clock paused: a `sleep` takes no real time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_testkit::mcp::jsonrpc::{call, request};
use chela_testkit::mcp::{
    HandlerOptions, McpEvent, StdioEnd, StdioOptions, serve_stdio, tools::IMAGE_BASE64,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

struct Session {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    server: JoinHandle<std::io::Result<StdioEnd>>,
}

impl Session {
    fn start(options: StdioOptions) -> Session {
        let (input, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, output) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(serve_stdio(server_in, server_out, options));
        let output = BufReader::new(output).lines();
        Session {
            input,
            output,
            server,
        }
    }

    async fn send(&mut self, messages: &[Value]) {
        let mut text = String::new();
        for message in messages {
            text.push_str(&format!("{message}\n"));
        }
        self.input.write_all(text.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = self.output.next_line().await.unwrap().expect("an answer");
        serde_json::from_str(&line).unwrap()
    }

    async fn end(self) -> StdioEnd {
        drop(self.input);
        self.server.await.unwrap().unwrap()
    }
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap()
}

#[tokio::test(start_paused = true)]
async fn initialize_list_and_every_tool() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let handler = HandlerOptions {
        crash_tool: true,
        observer: Some(Arc::new(move |e: &McpEvent| {
            seen.lock().unwrap().push(e.to_string())
        })),
        ..HandlerOptions::default()
    };
    let mut s = Session::start(StdioOptions {
        handler,
        crash_after: None,
    });
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    s.send(&[request(1, "initialize", init)]).await;
    let answer = s.next().await;
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        answer["result"]["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    s.send(&[
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        request(2, "ping", json!({})),
    ])
    .await;
    assert_eq!(
        s.next().await,
        json!({"jsonrpc": "2.0", "id": 2, "result": {}})
    );
    s.send(&[request(3, "tools/list", json!({}))]).await;
    assert_eq!(
        s.next().await["result"]["tools"].as_array().unwrap().len(),
        9
    );

    s.send(&[call(4, "echo", json!({"text": "hi"}))]).await;
    assert_eq!(text(&s.next().await), "echo: hi");
    s.send(&[call(5, "add", json!({"a": 2, "b": 40}))]).await;
    let sum = s.next().await;
    assert_eq!(
        (text(&sum), &sum["result"]["structuredContent"]),
        ("42", &json!({"sum": 42}))
    );
    s.send(&[call(6, "fail", json!({}))]).await;
    let fail = s.next().await;
    assert_eq!(
        (text(&fail), &fail["result"]["isError"]),
        ("it failed", &json!(true))
    );
    s.send(&[call(7, "big", json!({"chars": 3000}))]).await;
    assert_eq!(text(&s.next().await), "x".repeat(3000));
    s.send(&[call(8, "image", json!({}))]).await;
    let image = s.next().await;
    assert_eq!(text(&image), "here is a picture");
    assert_eq!(image["result"]["content"][1]["data"], IMAGE_BASE64);
    s.send(&[call(9, "nope", json!({}))]).await;
    assert_eq!(text(&s.next().await), "unknown tool nope");
    assert_eq!(s.end().await, StdioEnd::Eof);

    let events = events.lock().unwrap().clone();
    assert_eq!(
        &events[..4],
        [
            "initialize",
            "notifications/initialized",
            "ping",
            "tools/list"
        ]
    );
    assert_eq!(&events[4..6], ["tools/call", "call echo"]);
}

#[tokio::test(start_paused = true)]
async fn calls_run_concurrently_and_cancel_ends_a_sleep() {
    let mut s = Session::start(StdioOptions::default());
    s.send(&[
        call(1, "sleep", json!({"ms": 5000})),
        call(2, "echo", json!({"text": "first"})),
    ])
    .await;
    assert_eq!(s.next().await["id"], 2);
    let slept = s.next().await;
    assert_eq!((&slept["id"], text(&slept)), (&json!(1), "slept 5000 ms"));

    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "test"}});
    s.send(&[call(3, "sleep", json!({"ms": 600_000})), cancel])
        .await;
    s.send(&[request(4, "ping", json!({}))]).await;
    assert_eq!(s.next().await["id"], 4);
    // The cancelled call is never answered: the next answer is the one asked next.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    s.send(&[request(5, "ping", json!({}))]).await;
    assert_eq!(s.next().await["id"], 5);
    assert_eq!(s.end().await, StdioEnd::Eof);
}

#[tokio::test(start_paused = true)]
async fn slow_start_delays_only_initialize() {
    let handler = HandlerOptions {
        slow_start: Duration::from_secs(10),
        ..HandlerOptions::default()
    };
    let mut s = Session::start(StdioOptions {
        handler,
        crash_after: None,
    });
    s.send(&[
        request(1, "initialize", json!({})),
        request(2, "ping", json!({})),
    ])
    .await;
    assert_eq!(s.next().await["id"], 2);
    let init = s.next().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        init["result"]["serverInfo"],
        json!({"name": "fake-mcp", "version": "1.0.0"})
    );
}

#[tokio::test(start_paused = true)]
async fn bad_messages_get_errors() {
    let mut s = Session::start(StdioOptions::default());
    s.input.write_all(b"not json\n\n").await.unwrap();
    assert_eq!(s.next().await["error"]["code"], -32700);
    s.send(&[request(1, "resources/list", json!({}))]).await;
    assert_eq!(s.next().await["error"]["code"], -32601);
    s.send(&[json!({"id": 2, "method": "ping"})]).await;
    assert_eq!(s.next().await["error"]["code"], -32600);
    s.send(&[request(3, "tools/call", json!({}))]).await;
    assert_eq!(s.next().await["error"]["code"], -32602);
    s.send(&[call(4, "crash", json!({}))]).await;
    assert_eq!(text(&s.next().await), "unknown tool crash");
}

#[tokio::test(start_paused = true)]
async fn crash_tool_and_crash_after_end_the_session() {
    let crashing = HandlerOptions {
        crash_tool: true,
        ..HandlerOptions::default()
    };
    let mut s = Session::start(StdioOptions {
        handler: crashing,
        crash_after: None,
    });
    s.send(&[call(1, "crash", json!({}))]).await;
    assert_eq!(s.server.await.unwrap().unwrap(), StdioEnd::Crashed);
    assert!(
        s.output.next_line().await.unwrap().is_none(),
        "crash answers nothing"
    );

    let mut s = Session::start(StdioOptions {
        handler: HandlerOptions::default(),
        crash_after: Some(2),
    });
    s.send(&[
        request(1, "ping", json!({})),
        call(2, "echo", json!({"text": "a"})),
    ])
    .await;
    s.send(&[call(3, "echo", json!({"text": "b"}))]).await;
    let ids: Vec<Value> = vec![
        s.next().await["id"].clone(),
        s.next().await["id"].clone(),
        s.next().await["id"].clone(),
    ];
    assert_eq!(ids, [json!(1), json!(2), json!(3)]);
    assert_eq!(s.server.await.unwrap().unwrap(), StdioEnd::Crashed);
}
