//! The wire format: JSON text frames in the JSON-RPC 2.0 style.
//!
//! A request is `{"id":ID,"method":NAME,"params":{...}}` (`params` optional, `"jsonrpc"`
//! allowed and ignored); the answer is `{"id":ID,"result":...}` or
//! `{"id":ID,"error":{"code":N,"message":TEXT}}`. Pushed notifications have no id:
//! `{"event":NAME,...}`. A frame that is not a request is answered with `"id":null`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// JSON-RPC's code for a frame that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for an unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's code for bad parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for a failure inside the gateway.
pub const INTERNAL_ERROR: i64 = -32603;
/// The gateway is shutting down or too busy to take this request.
pub const UNAVAILABLE: i64 = -32000;
/// The message was not accepted (a duplicate, or a command its sender may not run).
pub const NOT_ACCEPTED: i64 = -32001;
/// The method needs the operator's token (see `Role`), and the connection has the client one.
pub const FORBIDDEN: i64 = -32002;
/// `agent.wait` saw the message pending, then missed how its run ended (the wait's event feed
/// lagged, or the message was dropped).
pub const LOST_TRACK: i64 = -32003;

/// One request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The caller's id, echoed in the answer (a number or a string).
    pub id: Value,
    /// The method name.
    pub method: String,
    /// Its parameters (an object; absent means `{}`).
    #[serde(default)]
    pub params: Value,
    /// `"2.0"` when a JSON-RPC client sends it; ignored.
    #[serde(default, rename = "jsonrpc")]
    pub _jsonrpc: Option<String>,
}

/// An error answered on the connection (the connection stays open).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct Fault {
    /// One of the codes above.
    pub code: i64,
    /// What went wrong, safe to show.
    pub message: String,
}

impl Fault {
    /// A fault with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
        }
    }

    /// Bad or missing parameters.
    pub fn params(message: impl Into<String>) -> Fault {
        Fault::new(INVALID_PARAMS, message)
    }

    /// A failure inside the gateway.
    pub fn internal(message: impl Into<String>) -> Fault {
        Fault::new(INTERNAL_ERROR, message)
    }
}

/// Parses one text frame; on failure, the fault to answer with `"id":null` (or the id, when
/// the frame had one).
pub fn parse(text: &str) -> Result<Request, (Value, Fault)> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        (
            Value::Null,
            Fault::new(PARSE_ERROR, format!("not JSON: {e}")),
        )
    })?;
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let request: Request = serde_json::from_value(value).map_err(|e| {
        (
            id.clone(),
            Fault::new(
                INVALID_REQUEST,
                format!(
                    "not a request ({e}); expected {{\"id\":..,\"method\":..,\"params\":{{..}}}}"
                ),
            ),
        )
    })?;
    if !(request.id.is_number() || request.id.is_string()) {
        return Err((
            Value::Null,
            Fault::new(INVALID_REQUEST, "id must be a number or a string"),
        ));
    }
    if !(request.params.is_null() || request.params.is_object()) {
        return Err((id, Fault::params("params must be an object")));
    }
    Ok(request)
}

/// Decodes a request's params into `T` (absent params are `{}`).
pub fn params<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, Fault> {
    let value = match params {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => params.clone(),
        // By-position params would slip past checks that read fields by name.
        _ => return Err(Fault::params("params must be an object (by name)")),
    };
    serde_json::from_value(value).map_err(|e| Fault::params(e.to_string()))
}

/// The answer frame to request `id`.
pub fn answer(id: Value, outcome: Result<Value, Fault>) -> String {
    let frame = match outcome {
        Ok(result) => serde_json::json!({ "id": id, "result": result }),
        Err(fault) => serde_json::json!({ "id": id, "error": fault }),
    };
    frame.to_string()
}

/// A notification frame: `{"event":name, ...fields of payload}`.
pub fn event(name: &str, payload: Value) -> String {
    let mut frame = serde_json::Map::new();
    frame.insert("event".into(), Value::String(name.into()));
    if let Value::Object(fields) = payload {
        frame.extend(fields);
    }
    Value::Object(frame).to_string()
}

/// The params of a method that takes none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoParams {}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_by_position_are_refused() {
        #[derive(serde::Deserialize, Debug)]
        struct P {
            #[allow(dead_code)]
            message: String,
        }
        let fault = params::<P>(&json!(["/reset"])).unwrap_err();
        assert_eq!(fault.code, INVALID_PARAMS);
        assert!(params::<P>(&json!({"message": "hi"})).is_ok());
    }

    #[test]
    fn a_request_parses_with_or_without_params() {
        let r = parse(r#"{"id":1,"method":"status"}"#).unwrap();
        assert_eq!((r.id, r.method.as_str()), (json!(1), "status"));
        assert!(r.params.is_null());
        let r = parse(r#"{"jsonrpc":"2.0","id":"a","method":"agent","params":{"message":"hi"}}"#)
            .unwrap();
        assert_eq!(r.params, json!({"message": "hi"}));
    }

    #[test]
    fn bad_frames_get_the_json_rpc_codes() {
        assert_eq!(parse("nope").unwrap_err().1.code, PARSE_ERROR);
        let (id, fault) = parse(r#"{"id":3}"#).unwrap_err();
        assert_eq!((id, fault.code), (json!(3), INVALID_REQUEST));
        assert_eq!(
            parse(r#"{"id":null,"method":"x"}"#).unwrap_err().1.code,
            INVALID_REQUEST
        );
        let (id, fault) = parse(r#"{"id":4,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!((id, fault.code), (json!(4), INVALID_PARAMS));
    }

    #[test]
    fn answers_and_events_have_the_documented_shape() {
        let ok: Value = serde_json::from_str(&answer(json!(1), Ok(json!({"a": 1})))).unwrap();
        assert_eq!(ok, json!({"id": 1, "result": {"a": 1}}));
        let err: Value =
            serde_json::from_str(&answer(json!("x"), Err(Fault::params("bad")))).unwrap();
        assert_eq!(
            err,
            json!({"id": "x", "error": {"code": INVALID_PARAMS, "message": "bad"}})
        );
        let ev: Value = serde_json::from_str(&event("run", json!({"runId": "run-1"}))).unwrap();
        assert_eq!(ev, json!({"event": "run", "runId": "run-1"}));
    }

    #[test]
    fn params_default_to_an_empty_object() {
        #[derive(Debug, Deserialize)]
        struct P {
            #[serde(default)]
            n: u32,
        }
        assert_eq!(params::<P>(&Value::Null).unwrap().n, 0);
        assert_eq!(params::<P>(&json!({"n": 2})).unwrap().n, 2);
        assert_eq!(
            params::<P>(&json!({"n": "x"})).unwrap_err().code,
            INVALID_PARAMS
        );
    }
}
