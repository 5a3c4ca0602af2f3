//! The tools of MCP servers (`crate::mcp`) as agent tools: `SERVER__tool`, its schema, its
//! result capped like every tool's output.

use std::sync::Arc;

use serde_json::Value;

use super::{Tool, ToolContext, ToolOutput};
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::mcp::{Hub, RemoteTool};

/// The MCP servers one agent uses: the gateway's hub and the agent's choice of servers
/// (`[agent] mcp`, `[[agents]] mcp`; `None`: every server).
#[derive(Clone)]
pub struct McpTools {
    /// The gateway's servers.
    pub hub: Arc<Hub>,
    /// The servers this agent uses.
    pub selection: Option<Vec<String>>,
}

impl McpTools {
    /// The tools a run offers: once the servers' first starts ended (or the start-up bound
    /// passed), the tools of the chosen servers.
    pub async fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.hub.settled(self.selection.as_deref()).await;
        (self.hub.tools(self.selection.as_deref()).into_iter())
            .map(|remote| {
                Arc::new(McpTool {
                    hub: self.hub.clone(),
                    remote,
                }) as Arc<dyn Tool>
            })
            .collect()
    }
}

impl McpTools {
    /// The specs of the chosen servers' tools listed so far (without waiting).
    pub fn specs(&self) -> Vec<ToolSpec> {
        (self.hub.tools(self.selection.as_deref()).into_iter())
            .map(|remote| {
                McpTool {
                    hub: self.hub.clone(),
                    remote,
                }
                .spec()
            })
            .collect()
    }
}

/// One tool of an MCP server.
pub struct McpTool {
    hub: Arc<Hub>,
    remote: RemoteTool,
}

impl McpTool {
    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.remote.server
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.remote.exposed.clone(),
            description: format!(
                "{} (from the MCP server {})",
                self.remote.description.trim(),
                self.remote.server
            ),
            parameters: self.remote.schema.clone(),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match self.hub.call(&self.remote, args, &ctx.cancel).await {
                Ok(reply) => ToolOutput {
                    text: super::truncate::head_tail(&reply.text, ctx.max_output_chars),
                    is_error: reply.is_error,
                    images: Vec::new(),
                },
                Err(e) => ToolOutput::error(super::truncate::head_tail(
                    &e.to_string(),
                    ctx.max_output_chars,
                )),
            }
        })
    }
}
