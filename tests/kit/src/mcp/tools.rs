//! The tools the fake MCP server offers, as `tools/list` shows them.

use serde_json::{Value, json};

/// The fake server's name in `serverInfo`.
pub const SERVER_NAME: &str = "fake-mcp";
/// The fake server's version in `serverInfo`.
pub const SERVER_VERSION: &str = "1.0.0";
/// The protocol versions the fake server speaks; the last one is its answer to any other.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
/// The `image` tool's picture: the base64 of the 8-byte PNG signature.
pub const IMAGE_BASE64: &str = "iVBORw0KGgo=";
/// The largest `big` answer, in characters (a larger request is clamped to it).
pub const BIG_MAX: usize = 64 * 1024 * 1024;

/// One offered tool: name, description and parameters (name, JSON type; all required).
struct Spec {
    name: &'static str,
    description: &'static str,
    params: &'static [(&'static str, &'static str)],
}

const SPECS: [Spec; 9] = [
    Spec {
        name: "echo",
        description: "Answers `echo: <text>`",
        params: &[("text", "string")],
    },
    Spec {
        name: "add",
        description: "Adds two numbers",
        params: &[("a", "number"), ("b", "number")],
    },
    Spec {
        name: "env",
        description: "The value of an environment variable of the server, or `(unset)`",
        params: &[("name", "string")],
    },
    Spec {
        name: "read",
        description: "The contents of a file",
        params: &[("path", "string")],
    },
    Spec {
        name: "sleep",
        description: "Sleeps `ms` milliseconds, then answers `slept <ms> ms`",
        params: &[("ms", "integer")],
    },
    Spec {
        name: "fail",
        description: "Always fails with `it failed`",
        params: &[],
    },
    Spec {
        name: "big",
        description: "Answers `chars` characters `x`",
        params: &[("chars", "integer")],
    },
    Spec {
        name: "image",
        description: "Answers a text and a small PNG image",
        params: &[],
    },
    Spec {
        name: "crash",
        description: "Makes the server exit with status 3 without answering",
        params: &[],
    },
];

/// Whether `name` is offered (`crash` only when `crash_tool`).
pub fn offered(name: &str, crash_tool: bool) -> bool {
    SPECS.iter().any(|spec| spec.name == name) && (crash_tool || name != "crash")
}

/// The `tools/list` result: `{"tools": [..]}` (`crash` only when `crash_tool`).
pub fn list(crash_tool: bool) -> Value {
    let tools: Vec<Value> = SPECS
        .iter()
        .filter(|spec| offered(spec.name, crash_tool))
        .map(describe)
        .collect();
    json!({ "tools": tools })
}

fn describe(spec: &Spec) -> Value {
    let properties: serde_json::Map<String, Value> = spec
        .params
        .iter()
        .map(|(name, kind)| ((*name).to_owned(), json!({ "type": kind })))
        .collect();
    let required: Vec<&str> = spec.params.iter().map(|(name, _)| *name).collect();
    let mut tool = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    });
    if spec.name == "add" {
        tool["outputSchema"] = json!({
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
        });
    }
    tool
}

/// The `initialize` result: the client's version when spoken, else the newest.
pub fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|known| Some(**known) == asked)
        .unwrap_or(&PROTOCOL_VERSIONS[2]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_is_listed_only_when_asked() {
        let names = |crash| -> Vec<String> {
            list(crash)["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        };
        assert!(names(true).contains(&"crash".to_owned()));
        assert!(!names(false).contains(&"crash".to_owned()));
        assert_eq!(names(false).len(), 8);
    }

    #[test]
    fn schemas_name_their_required_params() {
        let tools = list(false);
        let add = &tools["tools"][1];
        assert_eq!(add["name"], "add");
        assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
        assert_eq!(add["inputSchema"]["properties"]["a"]["type"], "number");
        let fail = &tools["tools"][5];
        assert_eq!(
            fail["inputSchema"],
            json!({"type": "object", "properties": {}, "required": []})
        );
    }

    #[test]
    fn initialize_echoes_known_versions_only() {
        let asked = |v: &str| initialize(&json!({"protocolVersion": v}))["protocolVersion"].clone();
        assert_eq!(asked("2025-06-18"), "2025-06-18");
        assert_eq!(asked("2024-11-05"), "2025-11-25");
        assert_eq!(initialize(&Value::Null)["serverInfo"]["name"], "fake-mcp");
    }
}
