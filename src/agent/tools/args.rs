//! Reading tool arguments out of the model's JSON object, with messages the model can act on.

use serde_json::{Map, Value};

/// The arguments object; `null` counts as empty so argument-less calls work.
pub(crate) fn object(args: &Value) -> Result<Map<String, Value>, String> {
    match args {
        Value::Object(map) => Ok(map.clone()),
        Value::Null => Ok(Map::new()),
        other => Err(format!(
            "arguments must be a JSON object, got {}",
            kind(other)
        )),
    }
}

/// A required string argument.
pub(crate) fn required_str<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(format!("missing required string argument `{key}`")),
        Some(other) => Err(format!(
            "argument `{key}` must be a string, got {}",
            kind(other)
        )),
    }
}

/// An optional string argument.
pub(crate) fn optional_str<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "argument `{key}` must be a string, got {}",
            kind(other)
        )),
    }
}

/// An optional non-negative integer argument.
pub(crate) fn optional_u64(args: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) => Ok(Some(v)),
            None => Err(format!(
                "argument `{key}` must be a non-negative integer, got {n}"
            )),
        },
        Some(other) => Err(format!(
            "argument `{key}` must be an integer, got {}",
            kind(other)
        )),
    }
}

/// An optional number argument.
pub(crate) fn optional_f64(args: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("argument `{key}` must be a number, got {n}")),
        Some(other) => Err(format!(
            "argument `{key}` must be a number, got {}",
            kind(other)
        )),
    }
}

/// An optional boolean argument.
pub(crate) fn optional_bool(args: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(format!(
            "argument `{key}` must be true or false, got {}",
            kind(other)
        )),
    }
}

/// The JSON type name of a value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
