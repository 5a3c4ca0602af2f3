//! `sessions_spawn`: hands a task to another session (SPEC 4).
//!
//! - `runtime: "subagent"`: chela's own agent does the task in an isolated child session
//!   (`agent:<id>:subagent:<uuid>`); the tool returns at once and the child's result comes
//!   back to this session later as a system message. A sub-agent cannot spawn again.
//! - `runtime: "acp"`: an external coding agent does it: once, returning its answer
//!   (`mode: "run"`), or in a new thread bound to it (`thread: true`, `mode: "session"`).
//!
//! Without `runtime`, `agent` (a coding-agent name) means `acp`, else `subagent`. The work
//! itself is the gateway's, behind [`Spawner`], so the agent stays platform-blind.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::args::ArgError;
use super::{Tool, ToolContext, ToolOutput, args, parse_args, truncate};
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::agent::tools::refusal::ToolRefusal;

/// Who does the spawned work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// chela's own agent, in an isolated child session.
    Subagent,
    /// An external coding agent over ACP.
    Acp,
}

/// Why a sub-agent session may not spawn: nesting depth is 1.
pub const NESTED_REFUSAL: &str = "sessions_spawn is refused here: this is a subagent session, \
     and subagents cannot start further subagents or coding agents. Do the task yourself and \
     answer with the result.";

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
    /// The id of the run that asked (`run-<seq>`; empty outside the gateway): whether it acts
    /// for an owner decides whether it may start a coding agent.
    pub run_id: String,
    /// The conversation the asking run replies to (`None` outside a chat run).
    pub parent_target: Option<chela_channel::Conversation>,
    /// Who does it.
    pub runtime: Runtime,
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
    ) -> BoxFuture<'static, Result<String, ToolRefusal>>;
}

/// The gateway's [`Spawner`], given when the agent is built; `None` outside a gateway.
pub type SpawnerPort = Option<Arc<dyn Spawner>>;

/// The `sessions_spawn` tool.
pub struct SessionsSpawnTool {
    /// The spawner; empty outside a gateway (the tool then refuses).
    pub spawner: SpawnerPort,
}

impl Tool for SessionsSpawnTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "sessions_spawn".to_string(),
            description: "Hand a task to another agent. runtime \"subagent\" (the default \
                          without `agent`): a copy of you works on it in its own session with \
                          the same workspace; this call returns at once and its result comes \
                          back to you later as a [System message]. runtime \"acp\": an \
                          external coding agent (Codex, Claude Code, ...); mode \"run\" waits \
                          for its answer; thread true with mode \"session\" opens a chat \
                          thread bound to it where the user can keep talking to it."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What the agent should do, with all the context it needs"},
                    "runtime": {"type": "string", "enum": ["subagent", "acp"], "description": "subagent: chela's own agent in a child session, result later as a system message; acp: an external coding agent. Default: acp when `agent` is given, else subagent"},
                    "agent": {"type": "string", "description": "acp only: coding agent name (codex, claude, ...); default: the configured one"},
                    "thread": {"type": "boolean", "description": "Open a chat thread bound to the agent"},
                    "mode": {"type": "string", "enum": ["run", "session"], "description": "run: answer once; session: keep a thread open (needs thread: true)"},
                    "cwd": {"type": "string", "description": "acp only: working folder (relative to the workspace, or ~/...)"},
                    "label": {"type": "string", "description": "Short name (the subagent's name, or the thread title)"},
                    "stream_to": {"type": "string", "enum": ["parent"], "description": "acp only: parent shows the agent's output live in this conversation"}
                },
                "required": ["task"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if is_subagent_session(&ctx.session_key) {
                return ToolOutput::error(NESTED_REFUSAL);
            }
            let request = match parse_args(&args, |m| parse(m, &ctx.session_key)) {
                Ok(request) => SpawnRequest {
                    run_id: ctx.run_id.clone(),
                    parent_target: ctx.reply_to.clone(),
                    ..request
                },
                Err(out) => return out,
            };
            let Some(spawner) = self.spawner.as_ref() else {
                return ToolOutput::error("sessions_spawn works only inside the gateway");
            };
            match spawner.spawn(request, ctx.cancel.clone()).await {
                Ok(text) => ToolOutput::ok(truncate::head_tail(&text, ctx.max_output_chars)),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// Whether `key` is a sub-agent session (`agent:<id>:subagent:<uuid>`).
pub fn is_subagent_session(key: &str) -> bool {
    use crate::domain::session_key::{KeyBase, SessionKey};
    SessionKey::parse(key).is_ok_and(|k| matches!(k.base, KeyBase::Subagent { .. }))
}

fn parse(m: &serde_json::Map<String, Value>, parent: &str) -> Result<SpawnRequest, ArgError> {
    let runtime = match args::optional_str(m, "runtime")? {
        Some("subagent") => Runtime::Subagent,
        Some("acp") => Runtime::Acp,
        None if m.get("agent").is_some_and(|a| !a.is_null()) => Runtime::Acp,
        None => Runtime::Subagent,
        Some(other) => {
            return Err(ArgError::invalid(format!(
                "runtime {other:?} is not available; use \"subagent\" (chela's own agent) or \
                 \"acp\" (an external coding agent)"
            )));
        }
    };
    let task = args::required_str(m, "task")?.trim().to_owned();
    if task.is_empty() {
        return Err(ArgError::invalid("argument `task` must not be empty"));
    }
    let thread = match m.get("thread") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ArgError::invalid("argument `thread` must be true or false")),
    };
    let mode = match args::optional_str(m, "mode")? {
        None | Some("run") => SpawnMode::Run,
        Some("session") => SpawnMode::Session,
        Some(other) => {
            return Err(ArgError::invalid(format!(
                "argument `mode` must be run or session, not {other:?}"
            )));
        }
    };
    if mode == SpawnMode::Session && !thread {
        return Err(ArgError::invalid("mode \"session\" needs thread: true"));
    }
    let stream_to_parent = match args::optional_str(m, "stream_to")? {
        None => false,
        Some("parent") => true,
        Some(other) => {
            return Err(ArgError::invalid(format!(
                "argument `stream_to` must be \"parent\", not {other:?}"
            )));
        }
    };
    let text = |key: &str| -> Result<Option<String>, ArgError> {
        Ok(args::optional_str(m, key)?
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned))
    };
    if runtime == Runtime::Subagent {
        subagent_only(m, thread, mode, stream_to_parent)?;
    }
    Ok(SpawnRequest {
        parent_session: parent.to_owned(),
        run_id: String::new(),
        parent_target: None,
        runtime,
        task,
        agent: text("agent")?,
        thread,
        mode,
        cwd: text("cwd")?,
        label: text("label")?,
        stream_to_parent,
    })
}

/// Refuses the arguments that only mean something for a coding agent.
fn subagent_only(
    m: &serde_json::Map<String, Value>,
    thread: bool,
    mode: SpawnMode,
    stream_to_parent: bool,
) -> Result<(), ArgError> {
    let given = |key: &str| m.get(key).is_some_and(|v| !v.is_null());
    if given("cwd") {
        return Err(ArgError::invalid(
            "`cwd` does not apply to runtime \"subagent\": a subagent works in chela's \
                    own workspace. Leave `cwd` out, or use runtime \"acp\" for a coding agent \
                    in another folder.",
        ));
    }
    if given("agent") {
        return Err(ArgError::invalid(
            "`agent` names a coding agent: use runtime \"acp\" with it, or leave it \
                    out for a subagent.",
        ));
    }
    if thread || mode == SpawnMode::Session || stream_to_parent {
        return Err(ArgError::invalid(
            "`thread`, `mode: \"session\"` and `stream_to` apply to runtime \"acp\" \
                    only: a subagent runs once and its result comes back as a system message.",
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parsed(v: Value) -> Result<SpawnRequest, String> {
        parse(v.as_object().unwrap(), "agent:main:main").map_err(|e| e.to_string())
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
        assert_eq!(r.runtime, Runtime::Acp);
        assert!(
            parsed(json!({"task": "x", "runtime": "other"}))
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

    #[test]
    fn without_a_runtime_an_agent_name_means_acp_else_subagent() {
        let r = parsed(json!({"task": "x", "agent": "codex"})).unwrap();
        assert_eq!(r.runtime, Runtime::Acp);
        let r = parsed(json!({"task": "x", "label": " sum "})).unwrap();
        assert_eq!(r.runtime, Runtime::Subagent);
        assert_eq!(r.label.as_deref(), Some("sum"));
        let r = parsed(json!({"task": "x", "runtime": "subagent"})).unwrap();
        assert_eq!(r.runtime, Runtime::Subagent);
    }

    #[test]
    fn a_subagent_refuses_coding_agent_arguments() {
        let err = |v: Value| parsed(v).unwrap_err();
        assert!(
            err(json!({"task": "x", "runtime": "subagent", "cwd": "/tmp"}))
                .contains("own workspace")
        );
        assert!(
            err(json!({"task": "x", "runtime": "subagent", "agent": "codex"}))
                .contains("coding agent")
        );
        assert!(err(json!({"task": "x", "runtime": "subagent", "thread": true})).contains("acp"));
        assert!(err(json!({"task": "x", "stream_to": "parent"})).contains("acp"));
    }

    #[tokio::test]
    async fn a_subagent_session_may_not_spawn() {
        let tool = SessionsSpawnTool { spawner: None };
        let mut ctx = super::super::test_support::ctx(&std::env::temp_dir());
        ctx.session_key = "agent:main:subagent:0f3a".into();
        let out = tool.call(json!({"task": "x"}), &ctx).await;
        assert!(out.is_error);
        assert!(
            out.text.contains("cannot start further subagents"),
            "{}",
            out.text
        );
        assert!(!is_subagent_session("agent:main:main"));
    }

    #[tokio::test]
    async fn without_a_gateway_the_tool_refuses() {
        let tool = SessionsSpawnTool { spawner: None };
        let ctx = super::super::test_support::ctx(&std::env::temp_dir());
        let out = tool
            .call(json!({"task": "x", "runtime": "acp"}), &ctx)
            .await;
        assert!(out.is_error);
        assert!(out.text.contains("only inside the gateway"));
    }
}
