//! Reading tool arguments out of the model's JSON object, with messages the model can act on.

use serde_json::{Map, Value};

/// A tool call's arguments that cannot be used; the text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgError {
    /// The arguments are not a JSON object.
    #[error("arguments must be a JSON object, got {got}")]
    NotAnObject {
        /// The JSON type given instead.
        got: &'static str,
    },
    /// A required argument is missing (or `null`).
    #[error("missing required string argument `{key}`")]
    Missing {
        /// The argument's name.
        key: String,
    },
    /// An argument has the wrong JSON type or is out of its type's range.
    #[error("argument `{key}` must be {expected}, got {got}")]
    WrongType {
        /// The argument's name.
        key: String,
        /// What it must be ("a string", "an integer"…).
        expected: &'static str,
        /// What was given (a JSON type name or the number).
        got: String,
    },
    /// The arguments break a rule of the tool; the text says which and what to do.
    #[error("{0}")]
    Invalid(String),
}

impl ArgError {
    /// `key` must be `expected` but is `got`.
    fn wrong(key: &str, expected: &'static str, got: impl ToString) -> Self {
        ArgError::WrongType {
            key: key.to_owned(),
            expected,
            got: got.to_string(),
        }
    }

    /// A tool-specific rule the arguments break.
    pub(crate) fn invalid(text: impl Into<String>) -> Self {
        ArgError::Invalid(text.into())
    }
}

/// The arguments object; `null` counts as empty so argument-less calls work.
pub(crate) fn object(args: &Value) -> Result<Map<String, Value>, ArgError> {
    match args {
        Value::Object(map) => Ok(map.clone()),
        Value::Null => Ok(Map::new()),
        other => Err(ArgError::NotAnObject { got: kind(other) }),
    }
}

/// A required string argument.
pub(crate) fn required_str<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, ArgError> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(ArgError::Missing {
            key: key.to_owned(),
        }),
        Some(other) => Err(ArgError::wrong(key, "a string", kind(other))),
    }
}

/// An optional string argument.
pub(crate) fn optional_str<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, ArgError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ArgError::wrong(key, "a string", kind(other))),
    }
}

/// An optional non-negative integer argument.
pub(crate) fn optional_u64(args: &Map<String, Value>, key: &str) -> Result<Option<u64>, ArgError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) => Ok(Some(v)),
            None => Err(ArgError::wrong(key, "a non-negative integer", n)),
        },
        Some(other) => Err(ArgError::wrong(key, "an integer", kind(other))),
    }
}

/// An optional number argument.
pub(crate) fn optional_f64(args: &Map<String, Value>, key: &str) -> Result<Option<f64>, ArgError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| ArgError::wrong(key, "a number", n)),
        Some(other) => Err(ArgError::wrong(key, "a number", kind(other))),
    }
}

/// An optional boolean argument.
pub(crate) fn optional_bool(
    args: &Map<String, Value>,
    key: &str,
) -> Result<Option<bool>, ArgError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ArgError::wrong(key, "true or false", kind(other))),
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
