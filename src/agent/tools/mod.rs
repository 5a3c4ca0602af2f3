//! Agent tools behind the [`Tool`] trait: name, JSON schema, `call(args, ctx)`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::{BoxFuture, ToolSpec};

/// What a tool call may use: where it works, when to stop.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The agent's workspace; file tools stay inside it and exec starts in it.
    pub workspace: PathBuf,
    /// Fires when the run is stopped; a tool must end promptly (and kill what it started).
    pub cancel: CancellationToken,
    /// Default timeout of one exec call.
    pub exec_timeout: Duration,
    /// Most chars of tool output handed back to the model (head and tail kept).
    pub max_output_chars: usize,
}

/// The result of one tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text for the model.
    pub text: String,
    /// True when the call failed or was refused.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
        }
    }

    /// A failed or refused call.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// A tool the agent can call.
pub trait Tool: Send + Sync {
    /// Name, description and argument schema.
    fn spec(&self) -> ToolSpec;
    /// Runs one call. Errors are results (`is_error`), never panics.
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

/// The tools chela's own agent gets by default.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    Vec::new()
}
