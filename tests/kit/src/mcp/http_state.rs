//! What the fake HTTP MCP server's routes share: the handler, sessions, the requests seen.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::handler::McpHandler;

/// One HTTP request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpHttpRequest {
    /// `POST`, `GET` or `DELETE`.
    pub http_method: String,
    /// The JSON-RPC method of a POSTed request or notification.
    pub method: Option<String>,
    /// The request headers (lower-case names; values that are not text are left out).
    pub headers: HashMap<String, String>,
}

/// What the routes share.
pub(crate) struct HttpShared {
    pub(crate) handler: McpHandler,
    pub(crate) sessions: Mutex<HashSet<String>>,
    pub(crate) requests: Mutex<Vec<McpHttpRequest>>,
    pub(crate) calls: Arc<Mutex<Vec<String>>>,
    pub(crate) down: AtomicBool,
    pub(crate) event_ids: AtomicU64,
}

/// Locks a mutex, ignoring poisoning (the data are plain records).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
