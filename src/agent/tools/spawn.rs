//! `sessions_spawn`: hands a task to another session (SPEC 4). With `runtime: "acp"` an
//! external coding agent does it: once, returning its answer (`mode: "run"`), or in a new
//! thread bound to it (`thread: true`, `mode: "session"`). The work itself is the gateway's,
//! behind [`Spawner`], so the agent stays platform-blind.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Tool, ToolContext, ToolOutput, args, parse_args, truncate};
use crate::agent::provider::{BoxFuture, ToolSpec};

/// How long the spawned work lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnMode {
    /// Do the task and hand back the answer.
    Run,
    /// Keep a session open in a thread for follow-up messages.
    Session,
}

/// One `sessions_spawn` call, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// The session whose run asked.
    pub parent_session: String,
    /// What to do.
    pub task: String,
    /// Harness name; `None`: the default coding agent.
    pub agent: Option<String>,
    /// Open a thread bound to the agent.
    pub thread: bool,
    /// Run once or keep a session.
    pub mode: SpawnMode,
    /// Working folder.
    pub cwd: Option<String>,
    /// Label (thread title).
    pub label: Option<String>,
    /// Also stream the agent's output into the parent's conversation.
    pub stream_to_parent: bool,
}

/// Does the spawning (the gateway implements it).
pub trait Spawner: Send + Sync {
    /// Runs `request`; the text is the tool result, an error is a refusal the model sees.
    fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<String, String>>;
}

/// Where the gateway plugs its [`Spawner`] in, once it exists.
pub type SpawnerSlot = Arc<OnceLock<Arc<dyn Spawner>>>;

/// The `sessions_spawn` tool.
pub struct SessionsSpawnTool {
    /// The spawner; empty outside a gateway (the tool then refuses).
    pub spawner: SpawnerSlot,
}

impl Tool for SessionsSpawnTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "sessions_spawn".to_string(),
            description: "Hand a task to an external coding agent (Codex, Claude Code, ...) over \
                          ACP. mode \"run\" waits for its answer; thread true with mode \
                          \"session\" opens a chat thread bound to it where the user can keep \
                          talking to it."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What the agent should do, with all the context it needs"},
                    "runtime": {"type": "string", "enum": ["acp"], "description": "acp: an external coding agent"},
                    "agent": {"type": "string", "description": "Coding agent name (codex, claude, ...); default: the configured one"},
                    "thread": {"type": "boolean", "description": "Open a chat thread bound to the agent"},
                    "mode": {"type": "string", "enum": ["run", "session"], "description": "run: answer once; session: keep a thread open (needs thread: true)"},
                    "cwd": {"type": "string", "description": "Working folder (relative to the workspace, or ~/...)"},
                    "label": {"type": "string", "description": "Short name (the thread title)"},
                    "stream_to": {"type": "string", "enum": ["parent"], "description": "parent: show the agent's output live in this conversation"}
                },
                "required": ["task", "runtime"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let request = match parse_args(&args, |m| parse(m, &ctx.session_key)) {
                Ok(request) => request,
                Err(out) => return out,
            };
            let Some(spawner) = self.spawner.get() else {
                return ToolOutput::error("sessions_spawn works only inside the gateway");
            };
            match spawner.spawn(request, ctx.cancel.clone()).await {
                Ok(text) => ToolOutput::ok(truncate::head_tail(&text, ctx.max_output_chars)),
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

fn parse(m: &serde_json::Map<String, Value>, parent: &str) -> Result<SpawnRequest, String> {
    let runtime = args::required_str(m, "runtime")?;
    if runtime != "acp" {
        return Err(format!(
            "runtime {runtime:?} is not available; use \"acp\" (an external coding agent)"
        ));
    }
    let task = args::required_str(m, "task")?.trim().to_owned();
    if task.is_empty() {
        return Err("argument `task` must not be empty".to_owned());
    }
    let thread = match m.get("thread") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("argument `thread` must be true or false".to_owned()),
    };
    let mode = match args::optional_str(m, "mode")? {
        None | Some("run") => SpawnMode::Run,
        Some("session") => SpawnMode::Session,
        Some(other) => {
            return Err(format!(
                "argument `mode` must be run or session, not {other:?}"
            ));
        }
    };
    if mode == SpawnMode::Session && !thread {
        return Err("mode \"session\" needs thread: true".to_owned());
    }
    let stream_to_parent = match args::optional_str(m, "stream_to")? {
        None => false,
        Some("parent") => true,
        Some(other) => {
            return Err(format!(
                "argument `stream_to` must be \"parent\", not {other:?}"
            ));
        }
    };
    let text = |key: &str| -> Result<Option<String>, String> {
        Ok(args::optional_str(m, key)?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned))
    };
    Ok(SpawnRequest {
        parent_session: parent.to_owned(),
        task,
        agent: text("agent")?,
        thread,
        mode,
        cwd: text("cwd")?,
        label: text("label")?,
        stream_to_parent,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parsed(v: Value) -> Result<SpawnRequest, String> {
        parse(v.as_object().unwrap(), "agent:main:main")
    }

    #[test]
    fn arguments_are_checked() {
        let r = parsed(
            json!({"task": " fix it ", "runtime": "acp", "agent": "claude",
            "thread": true, "mode": "session", "label": "fix", "stream_to": "parent"}),
        )
        .unwrap();
        assert_eq!(r.task, "fix it");
        assert_eq!(r.agent.as_deref(), Some("claude"));
        assert!(r.thread && r.stream_to_parent);
        assert_eq!(r.mode, SpawnMode::Session);
        assert_eq!(r.parent_session, "agent:main:main");
        assert!(
            parsed(json!({"task": "x", "runtime": "subagent"}))
                .unwrap_err()
                .contains("not available")
        );
        assert!(
            parsed(json!({"task": "x", "runtime": "acp", "mode": "session"}))
                .unwrap_err()
                .contains("thread: true")
        );
        assert!(parsed(json!({"task": "", "runtime": "acp"})).is_err());
        assert!(parsed(json!({"runtime": "acp"})).is_err());
    }

    #[tokio::test]
    async fn without_a_gateway_the_tool_refuses() {
        let tool = SessionsSpawnTool {
            spawner: Arc::default(),
        };
        let ctx = super::super::test_support::ctx(&std::env::temp_dir());
        let out = tool
            .call(json!({"task": "x", "runtime": "acp"}), &ctx)
            .await;
        assert!(out.is_error);
        assert!(out.text.contains("only inside the gateway"));
    }
}
