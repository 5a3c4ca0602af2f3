//! The MCP tools: `sessions_list`, `session_history`, `session_send`, each one bounded RPC
//! call to the running gateway. A failure is the tool's error (`isError`), never the
//! protocol's: the client's model reads why.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde_json::json;

use super::gateway::Gateway;
use super::text;

/// `sessions_list`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct ListArgs {
    /// At most this many sessions, the most recently active first (default 50, at most 500).
    #[serde(default)]
    limit: Option<usize>,
}

/// `session_history`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct HistoryArgs {
    /// The session key, as `sessions_list` gives it.
    session: String,
    /// How many of the last messages to show (default 20, at most 200).
    #[serde(default)]
    tail: Option<usize>,
}

/// `session_send`'s arguments.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct SendArgs {
    /// The session key, as `sessions_list` gives it.
    session: String,
    /// The text to post into the session's chat (at most 8000 characters).
    text: String,
}

/// The MCP server: its tools and the gateway they reach.
#[derive(Clone)]
pub struct ChelaMcp {
    gateway: Gateway,
    tool_router: ToolRouter<Self>,
}

/// A tool's answer: `text`, an error when `failed`.
fn answer(text: String, failed: bool) -> Result<CallToolResult, ErrorData> {
    let content = vec![ContentBlock::text(text)];
    Ok(match failed {
        true => CallToolResult::error(content),
        false => CallToolResult::success(content),
    })
}

#[tool_router]
impl ChelaMcp {
    /// The server over `gateway`.
    pub fn new(gateway: Gateway) -> ChelaMcp {
        ChelaMcp {
            gateway,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "List chela's sessions (one per chat and agent), the most recently active first: key, entries, last update."
    )]
    async fn sessions_list(
        &self,
        Parameters(args): Parameters<ListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let limit = args
            .limit
            .unwrap_or(text::DEFAULT_LIMIT)
            .clamp(1, text::MAX_LIMIT);
        match self.gateway.call("sessions.list", json!({})).await {
            Ok(listed) => answer(text::sessions(&listed, limit), false),
            Err(e) => answer(e.to_string(), true),
        }
    }

    #[tool(
        description = "Read the last messages of a chela session's transcript (its chat with the agent), as text."
    )]
    async fn session_history(
        &self,
        Parameters(args): Parameters<HistoryArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = match text::session_key(&args.session) {
            Ok(key) => key,
            Err(e) => return answer(e, true),
        };
        let tail = args.tail.unwrap_or(text::DEFAULT_TAIL).min(text::MAX_TAIL);
        let params = json!({ "key": key, "tail": tail });
        match self.gateway.call("sessions.show", params).await {
            Ok(shown) => answer(text::history(&key, &shown), false),
            Err(e) => answer(e.to_string(), true),
        }
    }

    #[tool(
        description = "Post a text as the bot into a chela session's chat (where that session last answered, e.g. a Telegram chat) and record it in the session's transcript, so its agent sees it later. Nothing runs the agent."
    )]
    async fn session_send(
        &self,
        Parameters(args): Parameters<SendArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = match text::session_key(&args.session) {
            Ok(key) => key,
            Err(e) => return answer(e, true),
        };
        let params = json!({ "key": key, "text": args.text });
        match self.gateway.call("sessions.send", params).await {
            Ok(posted) => answer(text::posted(&posted), false),
            Err(e) => answer(e.to_string(), true),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ChelaMcp {
    fn get_info(&self) -> ServerConfig {
        let chela = Implementation::new("chela", env!("CARGO_PKG_VERSION"));
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(chela)
            .with_instructions(
                "chela is a chat gateway for AI agents. These tools reach its running gateway: \
                 list its sessions, read the last messages of one, post a text into one's chat \
                 (to report to the people there).",
            )
    }
}
