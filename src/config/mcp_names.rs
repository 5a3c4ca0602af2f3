//! The names MCP servers and their tools go by in the config: a server's name, and the
//! entries of the tool policy's lists that name MCP tools.

/// Whether `name` may name a server: `[a-z0-9][a-z0-9-]*`, at most 32 characters (tool
/// names are `NAME__tool`, so `_` is kept out).
pub fn is_server_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 32
}

/// The MCP server an `allow` or `deny` entry is about, for entries that name MCP tools:
/// `mcp:*` (every server: `"*"`), `mcp:NAME` (every tool of server NAME) or `NAME__tool`
/// (one tool, as the model sees it: letters, digits, `_` and `-`, 64 characters in all);
/// `None` for any other entry.
pub fn mcp_entry_server(entry: &str) -> Option<&str> {
    if let Some(server) = entry.strip_prefix("mcp:") {
        return (server == "*" || is_server_name(server)).then_some(server);
    }
    let (server, tool) = entry.split_once("__")?;
    let model_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let tool_ok = !tool.is_empty() && tool.chars().all(model_name) && entry.len() <= 64;
    (is_server_name(server) && tool_ok).then_some(server)
}
