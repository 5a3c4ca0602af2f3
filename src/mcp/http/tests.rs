//! rmcp's client driving [`transport`] against a small streamable HTTP server (axum), and
//! the settings and limits refused.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, PingRequest, RequestId,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpResponseLimits,
};
use serde_json::{Value, json};
use tokio::time::timeout;

use super::*;

/// Longest wait for any step: past it the client hangs.
const PATIENCE: Duration = Duration::from_secs(10);

/// The session id the server hands out.
const SESSION: &str = "session-1";

/// One request the server received.
struct Seen {
    method: Method,
    /// The JSON-RPC method of a POST.
    rpc: String,
    headers: HeaderMap,
}

/// The server's state: what it saw, and the status that refuses `tools/call` if any.
#[derive(Clone, Default)]
struct Server {
    seen: Arc<Mutex<Vec<Seen>>>,
    refuse_calls: Option<StatusCode>,
}

impl Server {
    fn record(&self, method: Method, rpc: &str, headers: HeaderMap) {
        let rpc = rpc.to_owned();
        self.seen.lock().unwrap().push(Seen {
            method,
            rpc,
            headers,
        });
    }

    /// Returns once a `method` request arrived.
    async fn saw(&self, method: Method) {
        while !self.seen.lock().unwrap().iter().any(|s| s.method == method) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Serves on 127.0.0.1 and returns the endpoint's URL.
    async fn start(self) -> String {
        let app = Router::new()
            .route("/mcp", post(on_post).get(on_get).delete(on_delete))
            .with_state(self);
        serve(app).await + "/mcp"
    }
}

/// Serves `app` on a free port of 127.0.0.1: `http://127.0.0.1:PORT`.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

/// initialize: JSON and a session; notifications: 202; tools/list: JSON; tools/call: an
/// event stream that starts with an empty priming event, echoing argument `text`.
async fn on_post(State(server): State<Server>, headers: HeaderMap, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    let rpc = request["method"].as_str().unwrap_or_default();
    server.record(Method::POST, rpc, headers);
    let id = &request["id"];
    match (rpc, server.refuse_calls) {
        ("initialize", _) => {
            let result = json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "test", "version": "1"},
            });
            let headers = [
                ("content-type", "application/json"),
                ("mcp-session-id", SESSION),
            ];
            (headers, answer(id, result)).into_response()
        }
        _ if rpc.starts_with("notifications/") => StatusCode::ACCEPTED.into_response(),
        ("tools/list", _) => {
            let tools = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
            ([("content-type", "application/json")], answer(id, tools)).into_response()
        }
        ("tools/call", Some(status)) => (status, "refused").into_response(),
        ("tools/call", None) => {
            let text = &request["params"]["arguments"]["text"];
            let result = json!({"content": [{"type": "text", "text": text}]});
            let events = format!("id: 0\ndata:\n\nid: 1\ndata: {}\n\n", answer(id, result));
            ([("content-type", "text/event-stream")], events).into_response()
        }
        _ => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// The server offers no event stream of its own.
async fn on_get(State(server): State<Server>, headers: HeaderMap) -> StatusCode {
    server.record(Method::GET, "", headers);
    StatusCode::METHOD_NOT_ALLOWED
}

async fn on_delete(State(server): State<Server>, headers: HeaderMap) -> StatusCode {
    server.record(Method::DELETE, "", headers);
    StatusCode::OK
}

/// A JSON-RPC answer to `id`.
fn answer(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// A target at `url` with the one header `name: value`.
fn target(url: &str, name: &str, value: &str) -> HttpTarget {
    let headers = BTreeMap::from([(name.to_owned(), value.to_owned())]);
    HttpTarget {
        url: url.to_owned(),
        headers,
    }
}

/// A call of tool `echo` with `text`.
fn echo(text: &str) -> CallToolRequestParams {
    let arguments = json!({"text": text}).as_object().cloned().unwrap();
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers.get(name).map(|value| value.to_str().unwrap())
}

#[tokio::test]
async fn json_and_event_stream_answers_with_the_session_and_headers() {
    let server = Server::default();
    let mut target = target(&server.clone().start().await, "X-Api-Key", "k1");
    target
        .headers
        .insert("Authorization".into(), "Basic dTpw".into());

    let client = ().serve(transport(&target).unwrap());
    let client = timeout(PATIENCE, client).await.unwrap().unwrap();
    let tools = timeout(PATIENCE, client.list_all_tools())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "echo");
    let result = timeout(PATIENCE, client.call_tool(echo("hi")))
        .await
        .unwrap()
        .unwrap();
    let result = serde_json::to_value(&result).unwrap();
    assert_eq!(result["content"][0]["text"], "hi");
    timeout(PATIENCE, client.cancel()).await.unwrap().unwrap();
    // Closing ends the session (rmcp's worker sends the DELETE as it stops).
    timeout(PATIENCE, server.saw(Method::DELETE)).await.unwrap();

    let seen = server.seen.lock().unwrap();
    let rpcs: Vec<&str> = seen.iter().map(|s| s.rpc.as_str()).collect();
    for rpc in [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ] {
        assert!(rpcs.contains(&rpc), "{rpc} not in {rpcs:?}");
    }
    assert!(
        seen.iter().any(|s| s.method == Method::GET),
        "no GET of the event stream"
    );
    for request in seen.iter() {
        assert_eq!(header(request, "x-api-key"), Some("k1"));
        assert_eq!(header(request, "authorization"), Some("Basic dTpw"));
        let session = header(request, "mcp-session-id");
        let expected = (request.rpc != "initialize").then_some(SESSION);
        assert_eq!(session, expected, "{} {}", request.method, request.rpc);
    }
    for request in seen.iter().filter(|s| s.method == Method::POST) {
        assert_eq!(header(request, "accept"), Some(client::POST_ACCEPT));
        assert_eq!(header(request, "content-type"), Some("application/json"));
    }
}

#[tokio::test]
async fn a_refused_call_is_an_error_not_a_hang() {
    for status in [
        StatusCode::NOT_ACCEPTABLE,
        StatusCode::INTERNAL_SERVER_ERROR,
    ] {
        let server = Server {
            refuse_calls: Some(status),
            ..Server::default()
        };
        let target = target(&server.start().await, "x-api-key", "k1");
        let client = ().serve(transport(&target).unwrap());
        let client = timeout(PATIENCE, client).await.unwrap().unwrap();
        let outcome = timeout(PATIENCE, client.call_tool(echo("hi"))).await;
        let error = outcome.unwrap().unwrap_err();
        assert!(
            error.to_string().contains(status.as_str()),
            "{status}: {error}"
        );
    }
}

#[tokio::test]
async fn an_oversize_json_answer_is_refused() {
    let json = [("content-type", "application/json")];
    let chunks =
        || futures_util::stream::iter((0..3).map(|_| Ok::<_, std::io::Error>(vec![b' '; 40])));
    let app = Router::new()
        .route(
            "/sized",
            post(move || async move { (json, " ".repeat(100)) }),
        )
        .route(
            "/chunked",
            post(move || async move { (json, Body::from_stream(chunks())) }),
        );
    let base = serve(app).await;
    let client = ReqwestClient::new().unwrap();
    let mut limits = StreamableHttpResponseLimits::default();
    limits.max_json_response_size = 64;
    for path in ["sized", "chunked"] {
        let ping = ClientRequest::PingRequest(PingRequest::default());
        let message = ClientJsonRpcMessage::request(ping, RequestId::Number(1));
        let uri = format!("{base}/{path}").into();
        let answer = client
            .post_message_with_response_limits(uri, message, None, None, HashMap::new(), limits)
            .await;
        assert!(
            matches!(
                answer,
                Err(StreamableHttpError::ResponseBodyTooLarge { max_size: 64 })
            ),
            "{path}: {answer:?}"
        );
    }
}

#[test]
fn bad_settings_are_refused_before_connecting() {
    let refusal = |url: &str, name: &str, value: &str| transport(&target(url, name, value)).err();
    let ok = "https://mcp.example/mcp";
    assert!(matches!(
        refusal("mcp.example", "x", "y"),
        Some(HttpSetupError::Url(_))
    ));
    assert!(matches!(
        refusal("ftp://mcp.example/", "x", "y"),
        Some(HttpSetupError::Scheme(_))
    ));
    for reserved in [
        "Mcp-Session-Id",
        "Accept",
        "MCP-Protocol-Version",
        "Mcp-Param-Q",
    ] {
        let refused = refusal(ok, reserved, "y");
        assert!(
            matches!(refused, Some(HttpSetupError::Reserved(_))),
            "{reserved}"
        );
    }
    assert!(matches!(
        refusal(ok, "bad name", "y"),
        Some(HttpSetupError::HeaderName { .. })
    ));
    let refused = refusal(ok, "x-key", "a\nb");
    assert!(matches!(refused, Some(HttpSetupError::HeaderValue { .. })));
}
