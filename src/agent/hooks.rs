//! Hooks: configured commands run before and after each tool call and around each run.
//!
//! Each hook is a program (no shell) started in the agent workspace, in its own process
//! group, without chela's secrets in its environment. It gets one JSON object on stdin, then
//! end-of-file:
//!
//! - `before_tool`: `{"event","session","tool","call_id","arguments"}`
//! - `after_tool`: the same plus `"result"` (text) and `"is_error"` (bool)
//! - `before_run`: `{"event","session","text"}` (the user's text)
//! - `after_run`: `{"event","session","status":"ok"|"aborted"|"error","text","error"?}`
//!
//! A before-hook blocks by exiting with code 2 (the reason is its stderr, else its stdout,
//! trimmed), or by exiting 0 with `{"decision":"block","reason":"..."}` on stdout. Exit 0
//! otherwise allows. Any other exit code, a program that cannot start, a timeout or a kill is
//! a non-blocking failure: it is logged and the call goes on. Hooks run in config order and
//! the first block wins; the after-hooks are awaited (each bounded by its timeout) but their
//! output is ignored. Without hooks nothing is spawned and nothing is serialized.

mod child;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::tools::ToolOutput;
use crate::agent::tools::truncate::head_tail;
use crate::config::{HookConfig, HooksConfig};
use crate::domain::message::ToolCall;
use crate::domain::run::RunStatus;

/// The reason given when a blocking hook says nothing.
pub const DEFAULT_REASON: &str = "blocked by hook";
/// Most chars of a block reason handed on (head and tail kept).
const MAX_REASON_CHARS: usize = 2_000;

/// What the before-hooks decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go on.
    Allow,
    /// Do not: the reason is shown to the model (tool) or in the chat (run).
    Block(String),
}

/// The configured hooks and where they run; cheap to hold when empty.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    config: HooksConfig,
    workspace: PathBuf,
    sandbox: std::sync::Arc<crate::sandbox::ChildSandbox>,
}

impl Hooks {
    /// Hooks from `[hooks]`, run with `workspace` as their working folder, unconfined (see
    /// [`Hooks::confined_by`]).
    pub fn new(config: HooksConfig, workspace: PathBuf) -> Self {
        Hooks {
            config,
            workspace,
            sandbox: Default::default(),
        }
    }

    /// These hooks, started as `sandbox` says.
    pub fn confined_by(mut self, sandbox: crate::sandbox::ChildSandbox) -> Self {
        self.sandbox = std::sync::Arc::new(sandbox);
        self
    }

    /// True when no hook is configured.
    pub fn is_empty(&self) -> bool {
        self.config.lists().iter().all(|(_, list)| list.is_empty())
    }

    /// Runs one tool call through the hooks: the `before_tool` hooks for its tool (a block
    /// makes the result `Blocked by hook: <reason>`, an error, and `run` is not polled), then
    /// `run`, then the `after_tool` hooks with its result.
    pub async fn around_tool(
        &self,
        session: &str,
        call: &ToolCall,
        cancel: &CancellationToken,
        run: impl Future<Output = ToolOutput>,
    ) -> ToolOutput {
        let applies = |h: &&HookConfig| h.applies_to(&call.name);
        let mut before = self.config.before_tool.iter().filter(applies).peekable();
        if before.peek().is_some() {
            let input = json!({
                "event": "before_tool",
                "session": session,
                "tool": call.name,
                "call_id": call.id,
                "arguments": call.arguments,
            });
            if let Decision::Block(reason) = self.decide(before, &input, cancel).await {
                return ToolOutput::error(format!("Blocked by hook: {reason}"));
            }
        }
        let output = run.await;
        let mut after = self.config.after_tool.iter().filter(applies).peekable();
        if after.peek().is_some() {
            let input = json!({
                "event": "after_tool",
                "session": session,
                "tool": call.name,
                "call_id": call.id,
                "arguments": call.arguments,
                "result": output.text,
                "is_error": output.is_error,
            });
            self.notify(after, &input, cancel).await;
        }
        output
    }

    /// Runs the `before_run` hooks for a run of `session` starting with the user's `text`.
    pub async fn before_run(
        &self,
        session: &str,
        text: &str,
        cancel: &CancellationToken,
    ) -> Decision {
        if self.config.before_run.is_empty() {
            return Decision::Allow;
        }
        let input = json!({"event": "before_run", "session": session, "text": text});
        self.decide(self.config.before_run.iter(), &input, cancel)
            .await
    }

    /// Runs the `after_run` hooks for a run of `session` that ended with `status` and `text`.
    pub async fn after_run(
        &self,
        session: &str,
        status: &RunStatus,
        text: &str,
        cancel: &CancellationToken,
    ) {
        if self.config.after_run.is_empty() {
            return;
        }
        let (status, error) = match status {
            RunStatus::Ok => ("ok", None),
            RunStatus::Aborted => ("aborted", None),
            RunStatus::Error(error) => ("error", Some(error.to_string())),
        };
        let mut input = json!({
            "event": "after_run",
            "session": session,
            "status": status,
            "text": text,
        });
        if let (Some(error), Some(map)) = (error, input.as_object_mut()) {
            map.insert("error".to_owned(), Value::from(error));
        }
        self.notify(self.config.after_run.iter(), &input, cancel)
            .await;
    }

    /// Runs `hooks` in order until one blocks.
    async fn decide<'h>(
        &self,
        hooks: impl Iterator<Item = &'h HookConfig>,
        input: &Value,
        cancel: &CancellationToken,
    ) -> Decision {
        let bytes = input.to_string().into_bytes();
        for hook in hooks {
            if let Some(finished) = self.run_one(hook, input, &bytes, cancel).await
                && let Decision::Block(reason) = decision(hook, input, &finished)
            {
                return Decision::Block(reason);
            }
        }
        Decision::Allow
    }

    /// Runs every one of `hooks`, in order, ignoring what they print.
    async fn notify<'h>(
        &self,
        hooks: impl Iterator<Item = &'h HookConfig>,
        input: &Value,
        cancel: &CancellationToken,
    ) {
        let bytes = input.to_string().into_bytes();
        for hook in hooks {
            if let Some(finished) = self.run_one(hook, input, &bytes, cancel).await
                && !finished.status.success()
            {
                warn(hook, input, &format!("exited with {}", finished.status));
            }
        }
    }

    /// Runs one hook; `None` (logged) when it did not run to its end. Nothing is started
    /// once `cancel` fired.
    async fn run_one(
        &self,
        hook: &HookConfig,
        input: &Value,
        bytes: &[u8],
        cancel: &CancellationToken,
    ) -> Option<child::Finished> {
        if cancel.is_cancelled() {
            return None;
        }
        let timeout = Duration::from_secs(hook.timeout_s);
        match child::run(
            &self.sandbox,
            &hook.command,
            &hook.pass_env,
            &self.workspace,
            bytes,
            timeout,
            cancel,
        )
        .await
        {
            Ok(finished) => Some(finished),
            Err(child::HookError::Cancelled) => None,
            Err(e) => {
                warn(hook, input, &e.to_string());
                None
            }
        }
    }
}

/// What a finished before-hook decided: exit 2 blocks, exit 0 with a JSON block decision on
/// stdout blocks, exit 0 otherwise allows; anything else is a logged non-blocking failure.
fn decision(hook: &HookConfig, input: &Value, finished: &child::Finished) -> Decision {
    match finished.status.code() {
        Some(2) => {
            let stderr = finished.stderr.trim();
            let text = if stderr.is_empty() {
                finished.stdout.trim()
            } else {
                stderr
            };
            Decision::Block(reason(text))
        }
        Some(0) => match serde_json::from_str::<Value>(finished.stdout.trim()) {
            Ok(out) if out["decision"] == "block" => {
                Decision::Block(reason(out["reason"].as_str().unwrap_or_default().trim()))
            }
            _ => Decision::Allow,
        },
        _ => {
            warn(
                hook,
                input,
                &format!("exited with {} (only 0 and 2 decide)", finished.status),
            );
            Decision::Allow
        }
    }
}

/// A block reason: `text`, or [`DEFAULT_REASON`] when empty, shortened.
fn reason(text: &str) -> String {
    if text.is_empty() {
        DEFAULT_REASON.to_owned()
    } else {
        head_tail(text, MAX_REASON_CHARS)
    }
}

/// Logs a hook that failed without deciding; the call or run goes on.
fn warn(hook: &HookConfig, input: &Value, error: &str) {
    tracing::warn!(
        hook = ?hook.command,
        event = input["event"].as_str().unwrap_or_default(),
        error,
        "hook failed; going on as if it allowed"
    );
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
