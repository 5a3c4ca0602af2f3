//! Tools that reach other conversations and sessions (SPEC 7): `message` (send to the current
//! conversation or another session's; react, edit, delete, pin, poll: `message_action.rs`),
//! `sessions_list`, `sessions_history`. The gateway does the work behind [`SessionsApi`], so
//! the agent stays platform-blind.

use std::sync::Arc;

use serde_json::{Value, json};

use super::args::ArgError;
use super::message_action::{self, MessageAction};
use super::{Tool, ToolContext, ToolOutput, args, parse_args, truncate};
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::agent::tools::refusal::ToolRefusal;
use crate::domain::events::RunEvent;

/// Most sessions `sessions_list` shows.
const LIST_MAX: u64 = 100;
/// Most messages `sessions_history` shows.
const HISTORY_MAX: u64 = 100;

/// The run that calls a session tool: the gateway decides from it what the call reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The run's session.
    pub session: String,
    /// The run's id (`run-<seq>`; empty outside the gateway).
    pub run_id: String,
    /// The run's own conversation (`None` outside a chat run).
    pub reply_to: Option<chela_channel::Conversation>,
}

impl Caller {
    /// The run calling through `ctx`.
    pub fn of(ctx: &ToolContext) -> Caller {
        Caller {
            session: ctx.session_key.clone(),
            run_id: ctx.run_id.clone(),
            reply_to: ctx.reply_to.clone(),
        }
    }
}

/// What the session tools need from the gateway. Which sessions a call reaches is the
/// gateway's rule: a session the caller may not reach is refused (and not listed).
pub trait SessionsApi: Send + Sync {
    /// Sends `text` from `caller`'s run to `target` (a session key; `None`: the run's own
    /// conversation). Returns a short confirmation.
    fn send(
        &self,
        caller: Caller,
        target: Option<String>,
        text: String,
    ) -> BoxFuture<'static, Result<String, ToolRefusal>>;
    /// Sends files (with `text` as their caption) the way [`SessionsApi::send`] sends text,
    /// at most once per run for the same files, caption and target. Returns a short
    /// confirmation; a path outside the workspace is refused. By default: refused.
    fn send_files(&self, request: FileSend) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let _ = request;
        Box::pin(async {
            Err(ToolRefusal::Refused(
                "sending files is not supported here".into(),
            ))
        })
    }
    /// Carries out `action` from `caller`'s run in `target`'s conversation (a session key;
    /// `None`: the run's own), as [`SessionsApi::send`] reaches it. Editing and deleting take
    /// only messages the agent sent; reacting and pinning any message there. Returns a short
    /// confirmation. By default: refused.
    fn act(
        &self,
        caller: Caller,
        target: Option<String>,
        action: MessageAction,
    ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let _ = (caller, target, action);
        Box::pin(async {
            Err(ToolRefusal::Refused(
                "message actions are not supported here".into(),
            ))
        })
    }
    /// The most recently active sessions `caller` may reach, newest first, one line each.
    fn list(&self, caller: &Caller, limit: usize) -> Result<Vec<String>, ToolRefusal>;
    /// The last `limit` messages of session `key` (refused when `caller` may not reach it),
    /// oldest first, one line each.
    fn history(&self, caller: &Caller, key: &str, limit: usize)
    -> Result<Vec<String>, ToolRefusal>;
}

/// What the `message` tool asks [`SessionsApi::send_files`] to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSend {
    /// The session whose run sends.
    pub from: String,
    /// That run's id (`run-<seq>`): the same send repeated by the run (after a restart) goes
    /// once.
    pub run_id: String,
    /// The run's own conversation.
    pub reply_to: Option<chela_channel::Conversation>,
    /// A session key; `None`: the run's own conversation.
    pub target: Option<String>,
    /// The caption (may be empty).
    pub text: String,
    /// The files, as the model named them (relative to the workspace, or absolute in it).
    pub attachments: Vec<String>,
}

/// The gateway's [`SessionsApi`], given when the agent is built; `None` outside a gateway
/// (the tools then refuse).
pub type SessionsPort = Option<Arc<dyn SessionsApi>>;

fn api(port: &SessionsPort) -> Result<&Arc<dyn SessionsApi>, ToolOutput> {
    port.as_ref()
        .ok_or_else(|| ToolOutput::error("this tool works only inside the gateway"))
}

/// `message`: `{action?, text?, target?, attachments?, message_id?, emoji?, question?,
/// options?, multiple?}`.
pub struct MessageTool {
    /// The gateway's API.
    pub api: SessionsPort,
}

/// What the tool tells the model about itself.
const MESSAGE_DESCRIPTION: &str = "Send a chat message now: to this conversation (no target), \
e.g. a progress note during long work, or to another session by its key (see sessions_list). \
Text sent here is not repeated in your final answer; answer NO_REPLY if there is nothing more \
to say. To send files or images, list their paths (inside the workspace) in `attachments`; \
`text` is then their caption. A send reports the message id(s) it made. Other actions: \
`react` (emoji on a message_id; none: the message you are answering), `edit` (new text of a \
message you sent), `delete` (a message you sent), `pin` (a message_id; none: the message you \
are answering), `poll` (question, 2-10 options, multiple).";

impl Tool for MessageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "message".to_string(),
            description: MESSAGE_DESCRIPTION.to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": message_action::ACTIONS, "description": "What to do (default send)"},
                    "text": {"type": "string", "description": "send: the message; edit: the new text"},
                    "target": {"type": "string", "description": "A session key; omit for this conversation"},
                    "attachments": {"type": "array", "items": {"type": "string"}, "description": "Files to send (paths inside the workspace): .jpg/.png/.webp go as pictures, .ogg/.opus as voice notes, the rest as documents"},
                    "message_id": {"type": "string", "description": "react, edit, delete, pin: the message (edit and delete: one you sent)"},
                    "emoji": {"type": "string", "description": "react: the emoji, e.g. 👍"},
                    "question": {"type": "string", "description": "poll: the question"},
                    "options": {"type": "array", "items": {"type": "string"}, "description": "poll: 2 to 10 answers"},
                    "multiple": {"type": "boolean", "description": "poll: whether several answers may be chosen"}
                }
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let parsed = parse_args(&args, |m| {
                let target = args::optional_str(m, "target")?
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned);
                let asked = match message_action::parse(m)? {
                    Some(action) => Asked::Action(action),
                    None => Asked::Send(send_args(m)?),
                };
                Ok((target, asked))
            });
            let (target, asked) = match parsed {
                Ok(p) => p,
                Err(out) => return out,
            };
            let api = match api(&self.api) {
                Ok(api) => api,
                Err(out) => return out,
            };
            let done = match asked {
                Asked::Action(action) => api.act(Caller::of(ctx), target, action).await,
                Asked::Send((text, attachments)) => send(api, ctx, target, text, attachments).await,
            };
            match done {
                Ok(done) => ToolOutput::ok(done),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// What a `message` call asks for.
enum Asked {
    /// Send text and files (`text`, `attachments`).
    Send((String, Vec<String>)),
    /// Another action.
    Action(MessageAction),
}

/// The text and attachments of a send; one of them must be there.
fn send_args(m: &serde_json::Map<String, Value>) -> Result<(String, Vec<String>), ArgError> {
    let text = args::optional_str(m, "text")?.unwrap_or("").to_owned();
    let attachments = attachments(m)?;
    if text.trim().is_empty() && attachments.is_empty() {
        return Err(ArgError::invalid("argument `text` must not be empty"));
    }
    Ok((text, attachments))
}

/// Sends `text` (and `attachments`) to `target`; text sent into the run's own conversation is
/// told to the run, so its final reply leaves it out.
async fn send(
    api: &Arc<dyn SessionsApi>,
    ctx: &ToolContext,
    target: Option<String>,
    text: String,
    attachments: Vec<String>,
) -> Result<String, ToolRefusal> {
    let own = target.as_ref().is_none_or(|t| *t == ctx.session_key);
    let done = if attachments.is_empty() {
        api.send(Caller::of(ctx), target, text.clone()).await?
    } else {
        api.send_files(FileSend {
            from: ctx.session_key.clone(),
            run_id: ctx.run_id.clone(),
            reply_to: ctx.reply_to.clone(),
            target,
            text: text.clone(),
            attachments,
        })
        .await?
    };
    if own
        && !text.trim().is_empty()
        && let Some(events) = &ctx.events
    {
        // The run's final reply leaves out what was said here already.
        let _ = events.send(RunEvent::Sent { text }).await;
    }
    Ok(done)
}

/// The `attachments` argument: paths, blank ones left out.
fn attachments(m: &serde_json::Map<String, Value>) -> Result<Vec<String>, ArgError> {
    match m.get("attachments") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(|s| s.trim().to_owned())
                    .ok_or_else(|| ArgError::invalid("argument `attachments` must list paths"))
            })
            .filter(|p| p.as_ref().map_or(true, |p| !p.is_empty()))
            .collect(),
        Some(Value::String(one)) if !one.trim().is_empty() => Ok(vec![one.trim().to_owned()]),
        Some(_) => Err(ArgError::invalid(
            "argument `attachments` must be an array of paths",
        )),
    }
}

/// `sessions_list`: `{limit?}`.
pub struct SessionsListTool {
    /// The gateway's API.
    pub api: SessionsPort,
}

impl Tool for SessionsListTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "sessions_list".to_string(),
            description: "List the chat sessions this run may reach (key, last activity, size), newest first.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "minimum": 1, "maximum": LIST_MAX, "description": "Most sessions (default 20)"}
                }
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let limit = match parse_args(&args, |m| args::optional_u64(m, "limit")) {
                Ok(limit) => limit.unwrap_or(20).clamp(1, LIST_MAX) as usize,
                Err(out) => return out,
            };
            let api = match api(&self.api) {
                Ok(api) => api,
                Err(out) => return out,
            };
            match api.list(&Caller::of(ctx), limit) {
                Ok(lines) if lines.is_empty() => ToolOutput::ok("no sessions"),
                Ok(lines) => {
                    ToolOutput::ok(truncate::head_tail(&lines.join("\n"), ctx.max_output_chars))
                }
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// `sessions_history`: `{key, limit?}`.
pub struct SessionsHistoryTool {
    /// The gateway's API.
    pub api: SessionsPort,
}

impl Tool for SessionsHistoryTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "sessions_history".to_string(),
            description: "Read the last messages of a session (from sessions_list), oldest first."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "The session key"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX, "description": "Most messages (default 20)"}
                },
                "required": ["key"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let parsed = parse_args(&args, |m| {
                let key = args::required_str(m, "key")?.trim().to_owned();
                let limit = args::optional_u64(m, "limit")?.unwrap_or(20);
                Ok((key, limit.clamp(1, HISTORY_MAX) as usize))
            });
            let (key, limit) = match parsed {
                Ok(p) => p,
                Err(out) => return out,
            };
            let api = match api(&self.api) {
                Ok(api) => api,
                Err(out) => return out,
            };
            match api.history(&Caller::of(ctx), &key, limit) {
                Ok(lines) if lines.is_empty() => ToolOutput::ok(format!("{key}: no messages")),
                Ok(lines) => {
                    ToolOutput::ok(truncate::head_tail(&lines.join("\n"), ctx.max_output_chars))
                }
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// The three tools over one port.
pub fn tools(api: &SessionsPort) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MessageTool { api: api.clone() }),
        Arc::new(SessionsListTool { api: api.clone() }),
        Arc::new(SessionsHistoryTool { api: api.clone() }),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fake {
        sent: Mutex<Vec<(String, Option<String>, String)>>,
        acted: Mutex<Vec<(Option<String>, MessageAction)>>,
    }

    impl SessionsApi for Fake {
        fn send(
            &self,
            caller: Caller,
            target: Option<String>,
            text: String,
        ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
            self.sent
                .lock()
                .unwrap()
                .push((caller.session, target, text));
            Box::pin(async { Ok("sent".to_owned()) })
        }

        fn act(
            &self,
            _caller: Caller,
            target: Option<String>,
            action: MessageAction,
        ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
            self.acted.lock().unwrap().push((target, action));
            Box::pin(async { Ok("done".to_owned()) })
        }

        fn list(&self, _caller: &Caller, limit: usize) -> Result<Vec<String>, ToolRefusal> {
            Ok((0..limit).map(|i| format!("s{i}")).collect())
        }

        fn history(
            &self,
            _caller: &Caller,
            key: &str,
            _limit: usize,
        ) -> Result<Vec<String>, ToolRefusal> {
            Err(format!("no session {key}").into())
        }
    }

    #[tokio::test]
    async fn tools_check_arguments_and_call_the_gateway() {
        let fake = Arc::new(Fake::default());
        let mut ctx = super::super::test_support::ctx(&std::env::temp_dir());
        ctx.session_key = "agent:main:main".into();
        let out = tools(&None)[0].call(json!({"text": "hi"}), &ctx).await;
        assert!(out.is_error && out.text.contains("only inside the gateway"));
        let port: SessionsPort = Some(fake.clone());
        let tools = tools(&port);
        assert!(tools[0].call(json!({"text": " "}), &ctx).await.is_error);
        let out = tools[0]
            .call(json!({"text": "hi", "target": "agent:main:other"}), &ctx)
            .await;
        assert_eq!(out.text, "sent");
        assert_eq!(
            fake.sent.lock().unwrap()[0],
            (
                "agent:main:main".to_owned(),
                Some("agent:main:other".to_owned()),
                "hi".to_owned()
            )
        );
        let out = tools[1].call(json!({"limit": 2}), &ctx).await;
        assert_eq!(out.text, "s0\ns1");
        let out = tools[2].call(json!({"key": "x"}), &ctx).await;
        assert!(out.is_error && out.text.contains("no session x"));
    }

    #[tokio::test]
    async fn actions_go_to_the_gateway_and_are_not_told_as_sent_text() {
        let fake = Arc::new(Fake::default());
        let port: SessionsPort = Some(fake.clone());
        let tools = tools(&port);
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let mut ctx = super::super::test_support::ctx(&std::env::temp_dir());
        ctx.events = Some(tx);
        let edit = json!({"action": "edit", "message_id": 5, "text": "new", "target": "k"});
        assert_eq!(tools[0].call(edit, &ctx).await.text, "done");
        let bad = tools[0]
            .call(json!({"action": "edit", "text": "x"}), &ctx)
            .await;
        assert!(
            bad.is_error && bad.text.contains("message_id"),
            "{}",
            bad.text
        );
        drop(ctx);
        assert!(rx.recv().await.is_none(), "an edit is no sent text");
        assert!(fake.sent.lock().unwrap().is_empty());
        let acted = fake.acted.lock().unwrap().clone();
        let want = MessageAction::Edit {
            message_id: "5".into(),
            text: "new".into(),
        };
        assert_eq!(acted, [(Some("k".to_owned()), want)]);
    }

    #[tokio::test]
    async fn a_message_into_the_runs_own_conversation_is_told_to_the_run() {
        let port: SessionsPort = Some(Arc::new(Fake::default()));
        let tools = tools(&port);
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let mut ctx = super::super::test_support::ctx(&std::env::temp_dir());
        ctx.session_key = "agent:main:main".into();
        ctx.events = Some(tx);
        tools[0].call(json!({"text": "one"}), &ctx).await;
        tools[0]
            .call(json!({"text": "two", "target": "agent:main:main"}), &ctx)
            .await;
        tools[0]
            .call(
                json!({"text": "elsewhere", "target": "agent:main:other"}),
                &ctx,
            )
            .await;
        drop(ctx);
        let mut told = Vec::new();
        while let Some(event) = rx.recv().await {
            told.push(event);
        }
        assert_eq!(
            told,
            vec![
                RunEvent::Sent { text: "one".into() },
                RunEvent::Sent { text: "two".into() }
            ]
        );
    }
}
