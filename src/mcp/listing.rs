//! A server's tool list, read page by page within bounds and made fit for a model: at most
//! [`MAX_PAGES`] pages and [`MAX_TOOLS`] tools, one tool per name, object schemas only.

use rmcp::model::PaginatedRequestParams;
use rmcp::service::{Peer, RoleClient};

use super::RemoteTool;

/// The most pages of `tools/list` read (a server repeating its cursor stops here).
const MAX_PAGES: usize = 20;
/// The most tools one server offers the model.
const MAX_TOOLS: usize = 128;

/// The tools of server `server` behind `peer`, fit for a model; what is left out is logged.
pub(crate) async fn tools_of(
    server: &str,
    peer: &Peer<RoleClient>,
) -> Result<Vec<RemoteTool>, String> {
    let mut listed = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = (peer.list_tools(Some(params)).await)
            .map_err(|e| format!("cannot list its tools: {}", super::short(&e.to_string())))?;
        listed.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() || listed.len() > MAX_TOOLS {
            break;
        }
    }
    Ok(fit(server, &listed))
}

/// The tools of `listed` a model can take, first of each name, at most [`MAX_TOOLS`].
fn fit(server: &str, listed: &[rmcp::model::Tool]) -> Vec<RemoteTool> {
    let mut tools: Vec<RemoteTool> = Vec::new();
    for tool in listed {
        let remote = RemoteTool::new(server, tool);
        if remote.schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            tracing::warn!(server, tool = %remote.exposed, "MCP tool left out: its arguments are not an object schema");
        } else if tools.iter().any(|t| t.exposed == remote.exposed) {
            tracing::warn!(server, tool = %remote.exposed, "MCP tool left out: a tool of that name came before it");
        } else if tools.len() == MAX_TOOLS {
            tracing::warn!(
                server,
                "MCP server offers more than {MAX_TOOLS} tools; the rest are left out"
            );
            break;
        } else {
            tools.push(remote);
        }
    }
    tools
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: serde_json::Value) -> rmcp::model::Tool {
        serde_json::from_value(serde_json::json!({
            "name": name, "description": "d", "inputSchema": schema
        }))
        .unwrap()
    }

    #[test]
    fn only_object_schemas_one_per_name_and_at_most_the_cap() {
        let object = serde_json::json!({"type": "object"});
        let listed = vec![
            tool("a", object.clone()),
            tool("a", object.clone()),
            tool("s", serde_json::json!({"type": "string"})),
            tool("untyped", serde_json::json!({})),
        ];
        let names: Vec<String> = fit("x", &listed).into_iter().map(|t| t.exposed).collect();
        assert_eq!(names, ["x__a", "x__untyped"]);
        let many: Vec<_> = (0..200)
            .map(|i| tool(&format!("t{i}"), object.clone()))
            .collect();
        assert_eq!(fit("x", &many).len(), MAX_TOOLS);
    }
}
