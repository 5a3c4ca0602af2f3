//! Agent tools behind the [`Tool`] trait: name, JSON schema, `call(args, ctx)`.
//!
//! - [`read`], [`ls`], [`write`], [`edit`]: file tools confined to the workspace by [`paths`].
//! - [`exec`]: `sh -c` in its own process group, killed as a group on timeout or cancel; on a
//!   PTY, or in the background.
//! - [`process`]: the background processes `exec` started: poll, log, input, kill.
//! - [`sessions`]: `message`, `sessions_list`, `sessions_history` (the gateway does them).
//! - [`cron`]: `cron`, scheduled turns of the session (the gateway keeps and fires them).
//! - [`spawn`]: `sessions_spawn`, handing a task to a coding agent (the gateway does it).
//! - [`web`]: `web_fetch` and `web_search`, over `[tools.web]`.
//! - `browser` (feature `browser`): headless Chromium, over `[tools.browser]`.
//! - [`mcp`]: the tools of MCP servers (`SERVER__tool`), through [`crate::mcp`].
//! - [`memory`]: `memory_search` and `memory_get` over `MEMORY.md` and `memory/*.md`.
//! - [`truncate`]: head-and-tail shortening of output with the total size stated.

mod ansi;
mod args;
pub mod beneath;
#[cfg(feature = "browser")]
pub mod browser;
mod capture;
pub mod confined;
pub mod cron;
pub mod edit;
pub mod exec;
mod group;
mod job;
pub mod ls;
pub mod mcp;
pub mod memory;
pub mod message_action;
pub mod paths;
pub mod process;
pub mod read;
pub mod refusal;
pub mod sessions;
pub mod spawn;
pub mod truncate;
pub mod web;
pub mod write;

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
    /// The session whose run calls the tool (empty outside a run).
    pub session_key: String,
    /// The id of the calling run (`run-<seq>`; empty outside the gateway).
    pub run_id: String,
    /// How `exec` starts commands: environment and sandbox (default: unconfined).
    pub exec: Arc<crate::sandbox::ExecSandbox>,
    /// The conversation the calling run replies to (`None` outside a chat run).
    pub reply_to: Option<chela_channel::Conversation>,
    /// The calling run's event stream: a tool tells there what it did apart from its
    /// result (the `message` tool: [`crate::domain::events::RunEvent::Sent`]).
    pub events: Option<tokio::sync::mpsc::Sender<crate::domain::events::RunEvent>>,
}

/// The result of one tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text for the model.
    pub text: String,
    /// True when the call failed or was refused.
    pub is_error: bool,
    /// Images for a vision model (PNG or JPEG files, relative to the workspace): shown with
    /// the result, as a user's pictures are.
    pub images: Vec<String>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// A failed or refused call.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
            images: Vec::new(),
        }
    }

    /// The same result with the image at `path` (relative to the workspace) shown with it.
    pub fn with_image(mut self, path: impl Into<String>) -> Self {
        self.images.push(path.into());
        self
    }
}

/// A tool the agent can call.
pub trait Tool: Send + Sync {
    /// Name, description and argument schema.
    fn spec(&self) -> ToolSpec;
    /// Runs one call. Errors are results (`is_error`), never panics.
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;
}

/// The tools chela's own agent gets by default. `exec` and `process` share one
/// [`process::ProcessRegistry`]: background processes live as long as these tools.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    let processes = Arc::new(process::ProcessRegistry::new());
    vec![
        Arc::new(read::ReadTool),
        Arc::new(ls::LsTool),
        Arc::new(write::WriteTool),
        Arc::new(edit::EditTool),
        Arc::new(exec::ExecTool::new(Arc::clone(&processes))),
        Arc::new(process::ProcessTool::new(processes)),
    ]
}

/// Parses a call's arguments object with `parse`; argument errors become refusals.
fn parse_args<T>(
    args: &Value,
    parse: impl FnOnce(&serde_json::Map<String, Value>) -> Result<T, args::ArgError>,
) -> Result<T, ToolOutput> {
    args::object(args)
        .and_then(|map| parse(&map))
        .map_err(|e| ToolOutput::error(e.to_string()))
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// A context on `dir` with a small output cap and a short exec timeout.
    pub(crate) fn ctx(dir: &std::path::Path) -> ToolContext {
        ToolContext {
            workspace: dir.to_path_buf(),
            cancel: CancellationToken::new(),
            exec_timeout: Duration::from_secs(30),
            max_output_chars: 10_000,
            session_key: String::new(),
            run_id: String::new(),
            exec: Default::default(),
            reply_to: None,
            events: None,
        }
    }

    /// A workspace file `x`, resolved and then swapped for a link to a secret outside: the
    /// race of a job swapping it between the check and the open, made deterministic.
    /// Returns the workspace, the folder outside, the secret's path and `x` as resolved.
    #[allow(clippy::unwrap_used)] // tests fail loudly by design
    pub(crate) fn swapped_for_link_out() -> (
        tempfile::TempDir,
        tempfile::TempDir,
        std::path::PathBuf,
        std::path::PathBuf,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("config.toml");
        std::fs::write(&secret, "token = 'SECRET'").unwrap();
        std::fs::write(dir.path().join("x"), "plain").unwrap();
        let path = paths::resolve_in_workspace(dir.path(), "x").unwrap();
        std::fs::remove_file(dir.path().join("x")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("x")).unwrap();
        (dir, outside, secret, path)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn builtin_tools_have_unique_names_and_object_schemas() {
        let specs: Vec<ToolSpec> = builtin_tools().iter().map(|t| t.spec()).collect();
        let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["edit", "exec", "ls", "process", "read", "write"]);
        for spec in &specs {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(!spec.description.is_empty());
        }
    }
}
