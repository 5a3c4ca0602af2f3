//! A request body whose tools are written straight from the shared specs.
//!
//! The rest of a body is a JSON object built for each call; the tools, most of a request's
//! bytes, are small structs borrowing the agent's `Arc<ToolSpec>`s, serialized as the body
//! is written. So a call copies no schema into a `serde_json::Value` tree (and frees none).

use std::sync::Arc;

use serde::ser::{Error, Serialize, SerializeMap, Serializer};
use serde_json::Value;

use super::ToolSpec;

/// A model call's body: `fields` (a JSON object), then `"tools"` when there are any.
#[derive(Debug)]
pub struct Body<T> {
    /// Every field but the tools.
    pub fields: Value,
    /// The tools, in the wire format's shape.
    pub tools: Vec<T>,
}

impl<'a, T> Body<T> {
    /// A body of `fields` whose tools are `specs` in the wire format's `shape`.
    pub fn of(fields: Value, specs: &'a [Arc<ToolSpec>], shape: fn(&'a ToolSpec) -> T) -> Self {
        let tools = specs.iter().map(|spec| shape(spec)).collect();
        Body { fields, tools }
    }
}

impl<T: Serialize> Serialize for Body<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(fields) = &self.fields else {
            return Err(S::Error::custom(
                "a request body's fields must be a JSON object",
            ));
        };
        if fields.contains_key("tools") {
            return Err(S::Error::custom(
                "a request body's tools go in its tools, not its fields",
            ));
        }
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in fields {
            map.serialize_entry(key, value)?;
        }
        if !self.tools.is_empty() {
            map.serialize_entry("tools", &self.tools)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_come_after_the_fields_and_only_when_there_are_any() {
        let with = Body {
            fields: json!({ "model": "m", "stream": true }),
            tools: vec![json!({ "name": "a" })],
        };
        assert_eq!(
            serde_json::to_string(&with).unwrap(),
            r#"{"model":"m","stream":true,"tools":[{"name":"a"}]}"#
        );
        let without = Body::<Value> {
            fields: json!({ "model": "m" }),
            tools: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&without).unwrap(),
            json!({ "model": "m" })
        );
    }

    #[test]
    fn fields_that_are_no_object_or_hold_tools_are_refused() {
        let list = Body::<Value> {
            fields: json!([1]),
            tools: Vec::new(),
        };
        assert!(serde_json::to_vec(&list).is_err());
        let twice = Body {
            fields: json!({ "tools": [] }),
            tools: vec![json!({ "name": "a" })],
        };
        assert!(serde_json::to_vec(&twice).is_err());
    }
}
