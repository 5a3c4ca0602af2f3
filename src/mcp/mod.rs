//! MCP (Model Context Protocol) client: the servers of `[mcp.servers.NAME]`, started (stdio,
//! in a sandbox like the hooks') or reached (streamable HTTP), kept running, and their tools
//! offered to the agent as `NAME__tool` (the agent's side is `agent::tools::mcp`).
//!
//! - [`hub`]: every configured server of a gateway, its state, its tools, calls.
//! - `server.rs`: one server kept running (restarted with backoff), its calls.
//! - `connect.rs`: starting or reaching one server and the handshake.
//! - [`http`]: rmcp's streamable HTTP client transport over chela's own reqwest.
//! - `listing.rs`: a server's tool list, bounded and fit for a model.
//! - [`names`]: the tool names the model sees.
//! - `reply.rs`: a call's result as text for the model.

mod connect;
pub mod http;
pub mod hub;
mod listing;
pub mod names;
mod reply;
mod server;

pub use connect::ConnectError;
pub use hub::{Hub, ServerStatus, probe};
pub use reply::McpReply;
pub use server::{CallError, ServerState};

/// One tool of a server, as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// The server it belongs to.
    pub server: String,
    /// Its name on the server.
    pub name: String,
    /// The name the model sees (`server__name`, see [`names::exposed`]).
    pub exposed: String,
    /// What it does (its description, else its title, else its name).
    pub description: String,
    /// Its arguments' JSON schema (an object schema).
    pub schema: serde_json::Value,
}

/// The most characters of a tool's description kept (on one line: it goes into the system
/// prompt's tool list too).
const MAX_DESCRIPTION: usize = 1_000;

/// The most characters of a server's error kept (in logs, tool results, `chela status`).
const MAX_ERROR: usize = 300;

/// `text` on one line, cut to [`MAX_ERROR`] characters.
pub(crate) fn short(text: &str) -> String {
    one_line(text, MAX_ERROR)
}

/// `text` with its whitespace runs made one space, cut to `max` characters (`…` when cut).
fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

impl RemoteTool {
    /// Tool `tool` of server `server`.
    pub fn new(server: &str, tool: &rmcp::model::Tool) -> RemoteTool {
        let mut schema = (*tool.input_schema).clone();
        // The draft marker means nothing to the model APIs, and some refuse unknown keys.
        schema.remove("$schema");
        if !schema.contains_key("type") && !schema.contains_key("$ref") {
            schema.insert("type".into(), "object".into());
        }
        let description = (tool.description.as_deref().map(str::to_owned))
            .or_else(|| tool.title.clone())
            .unwrap_or_else(|| tool.name.to_string());
        let description = one_line(&description, MAX_DESCRIPTION);
        RemoteTool {
            server: server.to_owned(),
            name: tool.name.to_string(),
            exposed: names::exposed(server, &tool.name),
            description,
            schema: serde_json::Value::Object(schema),
        }
    }
}
