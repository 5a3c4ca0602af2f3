//! `cron`: the agent schedules turns of its own session (reminders, periodic checks): add a
//! job (a cron expression in a time zone, a one-shot time, an interval), list, remove, run one
//! now. The gateway keeps the jobs and fires them behind [`CronApi`].

use std::sync::Arc;

use serde_json::{Value, json};

use super::args::{self, ArgError};
use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::agent::tools::refusal::ToolRefusal;

/// What a new job asks for, as the model gave it (checked by the gateway).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CronSpec {
    /// Its id; `None`: the gateway makes one.
    pub id: Option<String>,
    /// A five-field cron expression.
    pub cron: Option<String>,
    /// The cron expression's IANA time zone.
    pub tz: Option<String>,
    /// A one-shot time: RFC 3339 or `in 20m`.
    pub at: Option<String>,
    /// An interval: `30m`.
    pub every: Option<String>,
    /// What the turn asks when it fires.
    pub message: String,
    /// Another session's key to run in (owners only); `None`: the calling session.
    pub target: Option<String>,
    /// `run_once` | `skip`: a run missed while the gateway was down.
    pub missed: Option<String>,
    /// Run in a session of the job's own (its answers still go to this chat).
    pub isolated: bool,
}

/// One `cron` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CronAction {
    /// Schedule a job.
    Add(CronSpec),
    /// The jobs this session may see.
    List,
    /// Remove job `id`.
    Remove(String),
    /// Run job `id` now (its schedule is unchanged).
    Run(String),
}

/// Who calls, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronCall {
    /// The calling session.
    pub from: String,
    /// The calling run (`run-<seq>`): the gateway learns from its turn who asked.
    pub run_id: String,
    /// The calling run's conversation (where a job's answers go).
    pub reply_to: Option<chela_channel::Conversation>,
    /// What to do.
    pub action: CronAction,
}

/// What the `cron` tool needs from the gateway.
pub trait CronApi: Send + Sync {
    /// Does `call`; returns the text for the model.
    fn call(&self, call: CronCall) -> BoxFuture<'static, Result<String, ToolRefusal>>;
}

/// The gateway's [`CronApi`]; `None` outside a gateway (the tool then refuses).
pub type CronPort = Option<Arc<dyn CronApi>>;

/// `cron`: `{action, ...}`.
pub struct CronTool {
    /// The gateway's API.
    pub api: CronPort,
}

impl Tool for CronTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "cron".to_string(),
            description: "Schedule turns of this chat. add: `message` plus `cron` (5 fields, \
                          with `tz`), `at` (RFC 3339 or `in 20m`) or `every` (`30m`); list; \
                          remove/run with `id`. `isolated`: the job runs in a session of its own \
                          (no chat history) and posts its answer here."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["add", "list", "remove", "run"]},
                    "id": {"type": "string"},
                    "message": {"type": "string"},
                    "cron": {"type": "string"},
                    "tz": {"type": "string"},
                    "at": {"type": "string"},
                    "every": {"type": "string"},
                    "missed": {"type": "string", "enum": ["run_once", "skip"]},
                    "isolated": {"type": "boolean"},
                    "target": {"type": "string", "description": "another session's key (owners only)"}
                },
                "required": ["action"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let action = match parse_args(&args, action) {
                Ok(action) => action,
                Err(out) => return out,
            };
            let Some(api) = self.api.as_ref() else {
                return ToolOutput::error("this tool works only inside the gateway");
            };
            let call = CronCall {
                from: ctx.session_key.clone(),
                run_id: ctx.run_id.clone(),
                reply_to: ctx.reply_to.clone(),
                action,
            };
            match api.call(call).await {
                Ok(text) => ToolOutput::ok(text),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// An optional string argument, trimmed, blank as absent.
fn text(m: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, ArgError> {
    Ok(args::optional_str(m, key)?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned))
}

/// The call's action from its arguments.
fn action(m: &serde_json::Map<String, Value>) -> Result<CronAction, ArgError> {
    let id = text(m, "id")?;
    let need_id =
        |id: Option<String>| id.ok_or_else(|| ArgError::invalid("argument `id` is required"));
    match args::required_str(m, "action")?.trim() {
        "list" => Ok(CronAction::List),
        "remove" => Ok(CronAction::Remove(need_id(id)?)),
        "run" => Ok(CronAction::Run(need_id(id)?)),
        "add" => {
            let message = text(m, "message")?
                .ok_or_else(|| ArgError::invalid("argument `message` is required"))?;
            Ok(CronAction::Add(CronSpec {
                id,
                cron: text(m, "cron")?,
                tz: text(m, "tz")?,
                at: text(m, "at")?,
                every: text(m, "every")?,
                message,
                target: text(m, "target")?,
                missed: text(m, "missed")?,
                isolated: args::optional_bool(m, "isolated")?.unwrap_or(false),
            }))
        }
        other => Err(ArgError::invalid(format!(
            "unknown action `{other}` (add, list, remove, run)"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<CronAction, String> {
        parse_args(&v, action).map_err(|o| o.text)
    }

    #[test]
    fn actions_parse_and_bad_ones_are_refused() {
        assert_eq!(parse(json!({"action": "list"})), Ok(CronAction::List));
        assert_eq!(
            parse(json!({"action": "remove", "id": " j1 "})),
            Ok(CronAction::Remove("j1".into()))
        );
        let add = parse(json!({"action": "add", "message": "stretch", "every": "30m"})).unwrap();
        let CronAction::Add(spec) = add else {
            panic!("not an add")
        };
        assert_eq!(spec.every.as_deref(), Some("30m"));
        assert_eq!(spec.message, "stretch");
        assert!(parse(json!({"action": "add", "every": "30m"})).is_err());
        assert!(parse(json!({"action": "run"})).is_err());
        assert!(parse(json!({"action": "explode"})).is_err());
    }

    #[tokio::test]
    async fn outside_a_gateway_it_refuses() {
        let tool = CronTool { api: None };
        let dir = std::env::temp_dir();
        let out = tool
            .call(
                json!({"action": "list"}),
                &super::super::test_support::ctx(&dir),
            )
            .await;
        assert!(out.is_error);
    }
}
