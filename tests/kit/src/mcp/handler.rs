//! [`McpHandler`]: the MCP protocol of the fake server, shared by the stdio and HTTP
//! transports. It takes one parsed JSON-RPC message at a time and says what to answer.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::call::{Called, call};
use super::jsonrpc::{self, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND};
use super::tools;

/// What the transport is to do after one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Send this JSON-RPC response.
    Answer(Value),
    /// Send nothing: a notification, a client's response, or a call cancelled.
    Silent,
    /// The `crash` tool: exit with status 3 without answering.
    Crash,
}

/// Something the server saw; its `Display` is the `--log` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpEvent {
    /// A request or notification with this method (`<method>`).
    Received(String),
    /// A `tools/call` of this tool (`call <tool>`).
    Call(String),
    /// A `notifications/cancelled` for this request id (`cancelled <id>`).
    Cancelled(String),
}

impl fmt::Display for McpEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpEvent::Received(method) => write!(f, "{method}"),
            McpEvent::Call(tool) => write!(f, "call {tool}"),
            McpEvent::Cancelled(id) => write!(f, "cancelled {id}"),
        }
    }
}

/// Called with every [`McpEvent`], in arrival order.
pub type Observer = Arc<dyn Fn(&McpEvent) + Send + Sync>;

/// How an [`McpHandler`] behaves.
#[derive(Clone, Default)]
pub struct HandlerOptions {
    /// Offer the `crash` tool (stdio only).
    pub crash_tool: bool,
    /// Wait this long before answering `initialize`.
    pub slow_start: Duration,
    /// Told of every event.
    pub observer: Option<Observer>,
}

/// The protocol handler; clones share their state.
#[derive(Clone)]
pub struct McpHandler {
    inner: Arc<Inner>,
}

struct Inner {
    options: HandlerOptions,
    /// Token of each `tools/call` under way, by the request id's JSON text.
    running: Mutex<HashMap<String, CancellationToken>>,
    cancelled: Mutex<Vec<String>>,
}

/// What is left to do for a message after the bookkeeping done on arrival.
enum Work {
    Nothing,
    Answer(Value),
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Call {
        id: Value,
        name: String,
        args: jsonrpc::Args,
        cancel: CancellationToken,
    },
}

impl McpHandler {
    /// A handler with no call under way.
    pub fn new(options: HandlerOptions) -> McpHandler {
        let inner = Inner {
            options,
            running: Mutex::new(HashMap::new()),
            cancelled: Mutex::new(Vec::new()),
        };
        McpHandler {
            inner: Arc::new(inner),
        }
    }

    /// Takes one message. Events and cancellations are handled now, in arrival order; the
    /// future does the rest (a `sleep` sleeps there), so transports run futures concurrently.
    pub fn handle(&self, message: Value) -> impl Future<Output = Reply> + Send + 'static {
        let work = self.arrive(message);
        let this = self.clone();
        async move { this.finish(work).await }
    }

    /// The ids of every `notifications/cancelled` received, in order.
    pub fn cancelled(&self) -> Vec<String> {
        lock(&self.inner.cancelled).clone()
    }

    /// Ends every call under way without an answer (for shutdown).
    pub fn cancel_all(&self) {
        for token in lock(&self.inner.running).values() {
            token.cancel();
        }
    }

    fn emit(&self, event: McpEvent) {
        if let Some(observer) = &self.inner.options.observer {
            observer(&event);
        }
    }

    fn arrive(&self, message: Value) -> Work {
        match Incoming::classify(message) {
            Incoming::Request { id, method, params } => {
                self.emit(McpEvent::Received(method.clone()));
                if method == "tools/call" {
                    return self.begin_call(id, &params);
                }
                Work::Request { id, method, params }
            }
            Incoming::Notification { method, params } => {
                self.emit(McpEvent::Received(method.clone()));
                if method == "notifications/cancelled" {
                    self.cancel(&params);
                }
                Work::Nothing
            }
            Incoming::Response => Work::Nothing,
            Incoming::Invalid { id } => {
                Work::Answer(jsonrpc::error(&id, INVALID_REQUEST, "Invalid Request"))
            }
        }
    }

    fn begin_call(&self, id: Value, params: &Value) -> Work {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            let error = jsonrpc::error(&id, INVALID_PARAMS, "tools/call needs a tool `name`");
            return Work::Answer(error);
        };
        self.emit(McpEvent::Call(name.to_owned()));
        let args = params
            .get("arguments")
            .map(jsonrpc::object)
            .unwrap_or_default();
        let cancel = CancellationToken::new();
        lock(&self.inner.running).insert(id.to_string(), cancel.clone());
        Work::Call {
            id,
            name: name.to_owned(),
            args,
            cancel,
        }
    }

    fn cancel(&self, params: &Value) {
        let id = params.get("requestId").cloned().unwrap_or(Value::Null);
        self.emit(McpEvent::Cancelled(jsonrpc::id_text(&id)));
        lock(&self.inner.cancelled).push(jsonrpc::id_text(&id));
        if let Some(token) = lock(&self.inner.running).get(&id.to_string()) {
            token.cancel();
        }
    }

    async fn finish(&self, work: Work) -> Reply {
        match work {
            Work::Nothing => Reply::Silent,
            Work::Answer(answer) => Reply::Answer(answer),
            Work::Request { id, method, params } => self.request(&id, &method, &params).await,
            Work::Call {
                id,
                name,
                args,
                cancel,
            } => {
                let crash_tool = self.inner.options.crash_tool;
                let called = call(&name, &args, crash_tool, &cancel).await;
                lock(&self.inner.running).remove(&id.to_string());
                match called {
                    Called::Result(result) => Reply::Answer(jsonrpc::result(&id, result)),
                    Called::Crash => Reply::Crash,
                    Called::Cancelled => Reply::Silent,
                }
            }
        }
    }

    async fn request(&self, id: &Value, method: &str, params: &Value) -> Reply {
        let result = match method {
            "initialize" => {
                tokio::time::sleep(self.inner.options.slow_start).await;
                tools::initialize(params)
            }
            "ping" => json!({}),
            "tools/list" => tools::list(self.inner.options.crash_tool),
            _ => {
                let message = format!("Method not found: {method}");
                return Reply::Answer(jsonrpc::error(id, METHOD_NOT_FOUND, &message));
            }
        };
        Reply::Answer(jsonrpc::result(id, result))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
