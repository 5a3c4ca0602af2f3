//! JSON-RPC 2.0 as MCP uses it: one message is a request (`id` and `method`), a notification
//! (`method` without `id`) or a response (`id` with `result` or `error`); batches are not
//! part of MCP since 2025-06-18.

use serde_json::{Map, Value, json};

/// Method not found.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// Invalid request: not a JSON-RPC 2.0 message.
pub const INVALID_REQUEST: i64 = -32600;
/// Parse error: not JSON.
pub const PARSE_ERROR: i64 = -32700;

/// One incoming message, sorted by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it wants an answer with the same `id`.
    Request {
        /// The request id (a number or a string).
        id: Value,
        /// The method name.
        method: String,
        /// The params (`Value::Null` when absent).
        params: Value,
    },
    /// A notification: no answer.
    Notification {
        /// The method name.
        method: String,
        /// The params (`Value::Null` when absent).
        params: Value,
    },
    /// A response to a request the server sent (the fakes send none): ignored.
    Response,
    /// Not a JSON-RPC message: answered with [`INVALID_REQUEST`] (id `null` when unknown).
    Invalid {
        /// The id, if one could be read.
        id: Value,
    },
}

impl Incoming {
    /// Sorts a parsed JSON value into a message kind.
    pub fn classify(message: Value) -> Incoming {
        let Value::Object(mut object) = message else {
            return Incoming::Invalid { id: Value::Null };
        };
        let id = object.remove("id");
        let valid_id = matches!(id, Some(Value::Number(_) | Value::String(_)));
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Incoming::Invalid {
                id: id.filter(|_| valid_id).unwrap_or(Value::Null),
            };
        }
        let params = object.remove("params").unwrap_or(Value::Null);
        match (object.remove("method"), id) {
            (Some(Value::String(method)), None) => Incoming::Notification { method, params },
            (Some(Value::String(method)), Some(id)) if valid_id => {
                Incoming::Request { id, method, params }
            }
            (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
                Incoming::Response
            }
            (_, id) => Incoming::Invalid {
                id: id.filter(|_| valid_id).unwrap_or(Value::Null),
            },
        }
    }
}

/// A client's request `method` with `params` and id `id` (for tests driving the fake).
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A client's `tools/call` of `tool` with `arguments` and id `id`.
pub fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// An id as log lines and lists show it: a string bare, a number as written.
pub fn id_text(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The arguments of a call: a JSON object.
pub type Args = Map<String, Value>;

/// The object `params` (an empty one when absent or not an object).
pub fn object(params: &Value) -> Args {
    params.as_object().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_each_kind() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        assert_eq!(
            Incoming::classify(request),
            Incoming::Request {
                id: json!(1),
                method: "ping".into(),
                params: Value::Null
            }
        );
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(matches!(
            Incoming::classify(note),
            Incoming::Notification { .. }
        ));
        let response = json!({"jsonrpc": "2.0", "id": "s1", "result": {}});
        assert_eq!(Incoming::classify(response), Incoming::Response);
        let no_version = json!({"id": 7, "method": "ping"});
        assert_eq!(
            Incoming::classify(no_version),
            Incoming::Invalid { id: json!(7) }
        );
        assert_eq!(
            Incoming::classify(json!([1])),
            Incoming::Invalid { id: Value::Null }
        );
        let bad_id = json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"});
        assert_eq!(
            Incoming::classify(bad_id),
            Incoming::Invalid { id: Value::Null }
        );
    }

    #[test]
    fn id_text_leaves_strings_bare() {
        assert_eq!(id_text(&json!("abc")), "abc");
        assert_eq!(id_text(&json!(12)), "12");
    }
}
