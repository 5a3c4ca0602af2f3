//! One agent run: model stream -> tool calls -> results -> next call, until the model stops.
//!
//! The run is the only writer of its session's transcript while it lasts. It checks its
//! cancellation token at every model and tool boundary, takes steered messages before each
//! model call, and always leaves the transcript paired: every tool call gets a result.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::hooks::Decision;
use crate::agent::provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ToolSpec};
use crate::agent::tools::{Tool, ToolContext, ToolOutput};
use crate::domain::events::{Lifecycle, RunEvent, ToolEvent};
use crate::domain::message::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCall, Usage, now_ms,
};
use crate::store::Store;

/// Result text given to tool calls skipped because a steered message arrived (SPEC 3).
pub const SKIPPED_FOR_STEER: &str = "Skipped to process an incoming message.";
/// Result text given to tool calls that never ran because the run was stopped.
pub const SKIPPED_FOR_STOP: &str = "Cancelled: the run was stopped before this tool ran.";
/// Result text given to tool calls cut off by a crash or restart.
pub const INTERRUPTED: &str = "Interrupted: the gateway restarted before this tool finished.";
/// Most model calls in one run, so a looping model cannot run forever.
const MAX_MODEL_CALLS: usize = 64;

/// Everything one run needs from its lane.
pub struct RunRequest {
    /// Session key (transcript owner).
    pub session_key: String,
    /// The run's id (`run-<seq>`; empty outside the gateway).
    pub run_id: String,
    /// The user turn that starts the run.
    pub text: String,
    /// Blocks that go with `text` in the user message (the images of its attachments).
    pub media: Vec<ContentBlock>,
    /// Fires on /stop, interrupt or shutdown.
    pub cancel: CancellationToken,
    /// Steered messages arriving while the run works.
    pub steer: mpsc::Receiver<Box<Steer>>,
    /// Downloads the files of steered messages (`None`: their files are left out).
    pub steer_files: Option<std::sync::Arc<dyn crate::agent::media::SteerFiles>>,
    /// Where the run's events go.
    pub events: mpsc::Sender<RunEvent>,
    /// The conversation the run replies to (`None` for a run with no chat, such as one
    /// started through the RPC without a conversation).
    pub reply_to: Option<chela_channel::Conversation>,
}

pub use super::steer::Steer;
pub use crate::domain::run::{RunError, RunStatus};

/// What a run hands back to its lane.
#[derive(Debug)]
pub struct RunOutcome {
    /// How it ended.
    pub status: RunStatus,
    /// Final assistant text of the last model call.
    pub text: String,
    /// Pending seqs of steered messages the run consumed.
    pub steered_seqs: Vec<u64>,
    /// Steered messages the run could not take (it was finishing): they become followups.
    pub leftover: Vec<Steer>,
    /// Tokens used over the run.
    pub usage: Usage,
    /// The prompt tokens of the run's last model call (how full the context window is).
    pub context_tokens: u64,
    /// What its model calls cost in US dollars (`None` when a model's price is not known).
    pub cost_usd: Option<f64>,
}

/// Why the transcript could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the transcript: {0}")]
pub struct TranscriptError(String);

/// The agent: provider, tools, prompt and store, shared by every run.
pub struct Agent {
    /// The model backend.
    pub provider: Arc<dyn Provider>,
    /// Tools offered to the model.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Their specs, built at the first call that needs them (`tools` does not change).
    pub specs: crate::agent::tool_specs::SpecCache,
    /// The MCP servers whose tools it offers too (`None`: no `[mcp.servers]`).
    pub mcp: Option<crate::agent::tools::mcp::McpTools>,
    /// System prompt without the tool list (built once from identity, skills, bootstrap
    /// files and runtime facts); each call appends the tools its run may use.
    pub system_prompt: String,
    /// Which tools a session's runs may use.
    pub policy: crate::agent::policy::ToolPolicy,
    /// Who answers exec approvals asked in the chat (the gateway's; `None` outside one).
    pub approver: crate::agent::approval::ApproverPort,
    /// The agent id (`[agent] id`).
    pub id: String,
    /// The store holding transcripts.
    pub store: Store,
    /// Base tool context (workspace, limits); each run gets its own cancel token.
    pub tool_context: ToolContext,
    /// Whole-run timeout.
    pub run_timeout: Duration,
    /// Output token cap per model call.
    pub max_tokens: u32,
    /// What model calls cost (`[pricing]` and the built-in prices).
    pub pricing: Arc<crate::agent::pricing::Pricing>,
    /// How much the model reasons unless a session says (`[model] thinking`).
    pub thinking: crate::config::Thinking,
    /// Whether calls ask the provider to cache their stable prefix (`[model] prompt_cache`).
    pub prompt_cache: bool,
    /// Whether pictures go to the model as images (`[model] vision`).
    pub vision: crate::config::Vision,
    /// Fires when the gateway shuts down. A run cancelled by shutdown (not by /stop) keeps
    /// no partial answer: its turn runs again at the next start.
    pub shutdown: CancellationToken,
    /// The model's context budget; the window is compacted before a call that would not fit.
    pub compaction: crate::agent::compact::CompactionSettings,
    /// Commands run before and after each tool call and around each run.
    pub hooks: crate::agent::hooks::Hooks,
    /// `[memory]`: the prompt's memory section and the flush before a compaction.
    pub memory: crate::agent::memory::MemorySettings,
    /// Names of the loaded skills (`/NAME` of one is a message for the model, not an
    /// unknown command).
    pub skill_names: Vec<String>,
}

struct Turn<'a> {
    agent: &'a Agent,
    key: String,
    /// The run's id, for the tools.
    run_id: String,
    /// Downloads steered messages' files.
    steer_files: Option<std::sync::Arc<dyn crate::agent::media::SteerFiles>>,
    cancel: CancellationToken,
    events: mpsc::Sender<RunEvent>,
    messages: Vec<Message>,
    steered_seqs: Vec<u64>,
    stash: Vec<Steer>,
    usage: Usage,
    /// The prompt tokens of the last model call: how full the context window is.
    context_tokens: u64,
    /// What the run's model calls cost (`None` once one of them had no known price).
    cost_usd: Option<f64>,
    /// The tools this run may use.
    allowed: crate::agent::policy::Allowed,
    /// The tools this run offers (the agent's own and its MCP servers').
    tools: Vec<Arc<dyn Tool>>,
    /// Their specs, in the same order.
    specs: Vec<Arc<ToolSpec>>,
    /// The session's `/model` choice, if any.
    model: Option<String>,
    /// How much the model reasons: the session's `/think`, else `[model] thinking`.
    thinking: crate::config::Thinking,
    /// Whether the reasoning goes out as events (`/reasoning on`).
    show_reasoning: bool,
    /// A compaction of this run failed or found nothing to do: do not try again.
    compaction_gave_up: bool,
    /// The conversation the run replies to.
    reply_to: Option<chela_channel::Conversation>,
}

impl Agent {
    /// The tools a run offers: the agent's own, then its MCP servers' (waiting, at most
    /// until the start-up bound, for servers still starting).
    pub async fn tools_for_run(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools = self.tools.clone();
        if let Some(mcp) = &self.mcp {
            tools.extend(mcp.tools().await);
        }
        tools
    }

    /// The specs of a run's `tools` ([`Agent::tools_for_run`]): the agent's own, kept, then
    /// its MCP servers'.
    fn specs_of_run(&self, tools: &[Arc<dyn Tool>]) -> Vec<Arc<ToolSpec>> {
        let own = self.specs.specs(&self.tools);
        let mcp = tools.get(own.len()..).unwrap_or_default();
        (own.iter().cloned())
            .chain(mcp.iter().map(|t| Arc::new(t.spec())))
            .collect()
    }

    /// Runs one turn to the end. Never panics; failures come back as [`RunStatus::Error`].
    pub async fn run(&self, mut req: RunRequest) -> RunOutcome {
        let timed_out = CancellationToken::new();
        let cancel = req.cancel.child_token();
        let timer = {
            let (cancel, timed_out, limit) = (cancel.clone(), timed_out.clone(), self.run_timeout);
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                timed_out.cancel();
                cancel.cancel();
            })
        };
        let _ = req.events.send(RunEvent::Lifecycle(Lifecycle::Start)).await;
        let tools = self.tools_for_run().await;
        let specs = self.specs_of_run(&tools);
        let mut turn = Turn {
            agent: self,
            key: req.session_key.clone(),
            run_id: req.run_id.clone(),
            cancel,
            events: req.events.clone(),
            messages: Vec::new(),
            steered_seqs: Vec::new(),
            stash: Vec::new(),
            usage: Usage::default(),
            context_tokens: 0,
            cost_usd: Some(0.0),
            allowed: self.allowed_for(&req.session_key, req.reply_to.as_ref()),
            tools,
            specs,
            model: crate::agent::model_choice::chosen(&self.store, &req.session_key),
            thinking: crate::agent::model_choice::thinking(&self.store, &req.session_key)
                .unwrap_or(self.thinking),
            show_reasoning: crate::agent::model_choice::reasoning_shown(
                &self.store,
                &req.session_key,
            ),
            compaction_gave_up: false,
            reply_to: req.reply_to.take(),
            steer_files: req.steer_files.take(),
        };
        let media = std::mem::take(&mut req.media);
        let result = turn.drive(&req.text, media, &mut req.steer).await;
        timer.abort();
        req.steer.close();
        let mut leftover = std::mem::take(&mut turn.stash);
        while let Ok(steer) = req.steer.try_recv() {
            leftover.push(*steer);
        }
        let (status, text) = match result {
            Ok((text, false)) => (RunStatus::Ok, text),
            Ok((text, true)) if timed_out.is_cancelled() => (
                RunStatus::Error(RunError::TimedOut(self.run_timeout.as_secs())),
                text,
            ),
            Ok((text, true)) => (RunStatus::Aborted, text),
            Err(error) => (RunStatus::Error(error), String::new()),
        };
        let event = match &status {
            RunStatus::Error(error) => Lifecycle::Error {
                message: error.to_string(),
            },
            RunStatus::Ok => Lifecycle::End {
                text: text.clone(),
                aborted: false,
            },
            RunStatus::Aborted => Lifecycle::End {
                text: text.clone(),
                aborted: true,
            },
        };
        let _ = req.events.send(RunEvent::Lifecycle(event)).await;
        // After the reply (the chat does not wait), before the lane's next turn.
        self.hooks
            .after_run(&req.session_key, &status, &text, &self.shutdown)
            .await;
        RunOutcome {
            status,
            text,
            steered_seqs: turn.steered_seqs,
            leftover,
            usage: turn.usage,
            context_tokens: turn.context_tokens,
            cost_usd: turn.cost_usd.filter(|_| turn.usage != Usage::default()),
        }
    }
}

impl Agent {
    /// The tools a run of session `key` answering in `reply_to` may use: its conversation's
    /// policy; for a sub-agent its parent's, without `sessions_spawn` (sub-agents do not nest)
    /// and `cron`; for an isolated scheduled job (`agent:<a>:cron:<id>`) the policy of the
    /// chat it answers in, without `cron` (a job does not make jobs), and none without a chat.
    /// A store failure leaves a sub-agent no tools rather than the wrong ones.
    pub fn allowed_for(
        &self,
        key: &str,
        reply_to: Option<&chela_channel::Conversation>,
    ) -> crate::agent::policy::Allowed {
        use crate::agent::policy::Scope;
        use crate::domain::session_key::{KeyBase, SessionKey};
        if SessionKey::parse(key).is_ok_and(|k| matches!(k.base, KeyBase::Cron { .. })) {
            let Some(to) = reply_to else {
                return crate::agent::policy::Allowed::none();
            };
            let mut allowed = self.policy.resolve(&Scope::of_conversation(to));
            allowed.remove("cron");
            return allowed;
        }
        let parent = match self.store.subagent_parent(key) {
            Ok(parent) => parent,
            Err(e) => {
                tracing::error!(error = %e, session = key, "cannot read the sub-agent link");
                return crate::agent::policy::Allowed::none();
            }
        };
        match parent {
            Some(parent) => {
                let mut allowed = self.policy.resolve(&Scope::of(&parent));
                allowed.remove("sessions_spawn");
                // Nor do they schedule turns: a job would fire into a chat-less session.
                allowed.remove("cron");
                allowed
            }
            None => self.policy.resolve(&Scope::of(key)),
        }
    }
}

impl Turn<'_> {
    /// Returns the final text and whether the run was cut short, or a short error.
    async fn drive(
        &mut self,
        text: &str,
        media: Vec<ContentBlock>,
        steer: &mut mpsc::Receiver<Box<Steer>>,
    ) -> Result<(String, bool), RunError> {
        let cwd = self.agent.tool_context.workspace.display().to_string();
        self.agent
            .store
            .ensure_session(&self.key, &cwd)
            .map_err(short)?;
        self.messages = self.agent.store.window(&self.key).map_err(short)?;
        self.repair_unpaired_calls()?;
        if !resumes(&self.messages, text) {
            self.push(crate::agent::media::user_message(text, media))?;
        }
        let hooks = &self.agent.hooks;
        if let Decision::Block(reason) = hooks.before_run(&self.key, text, &self.cancel).await {
            return Err(RunError::BlockedByHook(reason));
        }
        let mut last_text = String::new();
        for _ in 0..MAX_MODEL_CALLS {
            if self.cancel.is_cancelled() {
                return Ok((last_text, true));
            }
            while let Ok(s) = steer.try_recv() {
                self.stash.push(*s);
            }
            for s in std::mem::take(&mut self.stash) {
                match (&self.steer_files, s.files.is_empty()) {
                    (Some(files), false) => {
                        let (text, media) = files.prepare(&s).await;
                        self.push(crate::agent::media::user_message(&text, media))?;
                    }
                    _ => self.push_user(&s.text)?,
                }
                self.steered_seqs.extend(s.seqs);
            }
            // Thinking takes room of its own in the answer.
            let reserve = crate::agent::provider::thinking_budget(self.thinking).unwrap_or(0);
            let flush = crate::agent::memory::FlushRun {
                key: &self.key,
                run_id: &self.run_id,
                allowed: &self.allowed,
                model: self.model.as_deref(),
                cancel: &self.cancel,
                extra_reserve: u64::from(reserve),
            };
            let gave_up = self.compaction_gave_up;
            self.agent
                .flush_before_compaction(&flush, &self.messages, gave_up)
                .await;
            self.agent
                .compact_before_call(
                    &self.key,
                    u64::from(reserve),
                    &mut self.messages,
                    &self.cancel,
                    &self.events,
                    &mut self.compaction_gave_up,
                )
                .await?;
            let (assistant, aborted) = self.model_call().await?;
            if aborted && self.agent.shutdown.is_cancelled() {
                return Ok((last_text, true));
            }
            last_text = crate::domain::message::text_of(&assistant.content);
            let calls: Vec<ToolCall> = assistant
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(c) => Some(c.clone()),
                    _ => None,
                })
                .collect();
            let failed = assistant.stop_reason == StopReason::Error;
            let error = assistant.error_message.clone();
            self.push(Message::Assistant(assistant))?;
            if failed {
                self.close_calls(&calls, SKIPPED_FOR_STOP)?;
                return Err(RunError::Model(
                    error.unwrap_or_else(|| "the model call failed".into()),
                ));
            }
            if aborted {
                self.close_calls(&calls, SKIPPED_FOR_STOP)?;
                return Ok((last_text, true));
            }
            if calls.is_empty() {
                return Ok((last_text, false));
            }
            self.run_tools(&calls, steer).await?;
            if self.cancel.is_cancelled() {
                return Ok((last_text, true));
            }
        }
        Err(RunError::ToolRounds(MAX_MODEL_CALLS))
    }

    /// One streaming model call; returns the assistant message and whether it was cut short.
    async fn model_call(&mut self) -> Result<(AssistantMessage, bool), RunError> {
        let provider = &self.agent.provider;
        let tools: Vec<Arc<ToolSpec>> = (self.specs.iter())
            .filter(|spec| self.allowed.offers(&spec.name))
            .cloned()
            .collect();
        let (provider_name, model) = match self.model.as_deref() {
            Some(choice) => provider.resolve(choice),
            None => (provider.name().to_owned(), provider.model().to_owned()),
        };
        let messages = crate::agent::media::for_model(
            &self.messages,
            &self.agent.tool_context.workspace,
            self.agent.vision.accepts(&model),
        )
        .await;
        let request = ProviderRequest {
            system: self.agent.system_for(tools.iter().map(|t| &**t)),
            messages,
            tools,
            max_tokens: self.agent.max_tokens,
            model: self.model.clone(),
            thinking: self.thinking,
            show_reasoning: self.show_reasoning,
            cache_key: self
                .agent
                .prompt_cache
                .then(|| crate::agent::context::cache_key(&self.agent.id, &self.key)),
        };
        let mut message = AssistantMessage {
            content: Vec::new(),
            provider: provider_name,
            model,
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: now_ms(),
        };
        let called = std::time::Instant::now();
        let started = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            r = provider.stream(request) => Some(r),
        };
        let mut stream = match started {
            None => {
                message.stop_reason = StopReason::Aborted;
                return Ok((message, true));
            }
            Some(Err(e)) => return Ok((failed(message, &e), false)),
            Some(Ok(stream)) => stream,
        };
        let (mut text, mut thinking) = (String::new(), Reasoning::default());
        let mut calls = Vec::new();
        let mut aborted = false;
        loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => { aborted = true; break; }
                next = stream.next() => next,
            };
            match next {
                Some(Ok(ProviderEvent::Answered(answered))) => {
                    self.answered(&mut message, answered)
                }
                Some(Ok(ProviderEvent::TextDelta(delta))) => {
                    text.push_str(&delta);
                    let _ = self.events.send(RunEvent::Assistant { delta }).await;
                }
                Some(Ok(ProviderEvent::ThinkingDelta(delta))) => {
                    thinking.text.push_str(&delta);
                    if self.show_reasoning {
                        let _ = self.events.send(RunEvent::Reasoning { delta }).await;
                    }
                }
                Some(Ok(ProviderEvent::ThinkingSealed {
                    signature,
                    redacted,
                })) => thinking.seal(signature, redacted),
                Some(Ok(ProviderEvent::ToolCall(call))) => calls.push(call),
                Some(Ok(ProviderEvent::Done { stop_reason, usage })) => {
                    message.stop_reason = stop_reason;
                    message.usage = usage;
                    break;
                }
                Some(Err(e)) => {
                    message = failed(message, &e);
                    break;
                }
                None => break,
            }
        }
        if !aborted {
            crate::metrics::global().model_call(called.elapsed().as_secs_f64());
        }
        add_usage(&mut self.usage, &message.usage);
        self.count_cost(&message);
        let prompt = &message.usage;
        if prompt.input + prompt.cache_read + prompt.cache_write > 0 {
            self.context_tokens = prompt.input + prompt.cache_read + prompt.cache_write;
        }
        if aborted {
            message.stop_reason = StopReason::Aborted;
        } else if !calls.is_empty() && message.stop_reason == StopReason::Stop {
            message.stop_reason = StopReason::ToolUse;
        }
        message.content.extend(thinking.blocks());
        if !text.is_empty() {
            message.content.push(ContentBlock::Text { text });
        }
        message
            .content
            .extend(calls.into_iter().map(ContentBlock::ToolCall));
        Ok((message, aborted))
    }

    /// Runs a batch of tool calls in order; a steered message skips the rest of the batch.
    async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        steer: &mut mpsc::Receiver<Box<Steer>>,
    ) -> Result<(), RunError> {
        for (i, call) in calls.iter().enumerate() {
            if self.cancel.is_cancelled() {
                return self.close_calls(&calls[i..], SKIPPED_FOR_STOP);
            }
            while let Ok(s) = steer.try_recv() {
                self.stash.push(*s);
            }
            if !self.stash.is_empty() {
                return self.close_calls(&calls[i..], SKIPPED_FOR_STEER);
            }
            let _ = self
                .events
                .send(RunEvent::Tool(ToolEvent::Start {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    summary: crate::domain::events::call_summary(&call.arguments),
                }))
                .await;
            // Policy first (a refused call reaches no hook), then the hooks around the call;
            // an exec approval is asked inside, after the before-hooks let it through.
            let output = match self.refusal(call) {
                Some(refusal) => refusal,
                None => {
                    let hooks = &self.agent.hooks;
                    hooks
                        .around_tool(&self.key, call, &self.cancel, self.call_tool(call))
                        .await
                }
            };
            let _ = self
                .events
                .send(RunEvent::Tool(ToolEvent::End {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    is_error: output.is_error,
                }))
                .await;
            self.push(Message::tool_result_with_images(
                call,
                output.text,
                output.is_error,
                &output.images,
            ))?;
        }
        Ok(())
    }

    /// Why `call` may not run here at all: an unknown tool, or one the policy leaves out.
    fn refusal(&self, call: &ToolCall) -> Option<ToolOutput> {
        if !self.specs.iter().any(|s| s.name == call.name) {
            return Some(ToolOutput::error(format!("unknown tool: {}", call.name)));
        }
        let name = crate::agent::policy::call_name(&call.name, &call.arguments);
        (!self.allowed.allows(&name)).then(|| {
            ToolOutput::error(format!(
                "The tool {name} is not allowed in this conversation (tool policy)."
            ))
        })
    }

    async fn call_tool(&self, call: &ToolCall) -> ToolOutput {
        let at = self.specs.iter().position(|s| s.name == call.name);
        let Some(tool) = at.and_then(|at| self.tools.get(at)) else {
            return ToolOutput::error(format!("unknown tool: {}", call.name));
        };
        if let Err(refusal) = self.approve_mcp(call).await {
            return refusal;
        }
        // Without the sandbox it asked for (the kernel lacks Landlock), exec needs approval.
        let ask = self.allowed.exec_approvals == crate::config::ExecApprovals::Ask
            || self.agent.tool_context.exec.needs_approval();
        if call.name == "exec"
            && ask
            && let Err(refusal) = crate::agent::approval::approve_exec(
                &self.agent.approver,
                &self.agent.store,
                &self.agent.id,
                &self.key,
                self.reply_to.as_ref(),
                &call.arguments,
                &self.cancel,
            )
            .await
        {
            return refusal;
        }
        let ctx = ToolContext {
            cancel: self.cancel.clone(),
            session_key: self.key.clone(),
            run_id: self.run_id.clone(),
            reply_to: self.reply_to.clone(),
            events: Some(self.events.clone()),
            ..self.agent.tool_context.clone()
        };
        tool.call(call.arguments.clone(), &ctx).await
    }

    /// Gets an owner's approval for a call of a tool of an MCP server whose calls need it
    /// (`approvals = "ask"`); `Ok` for every other call.
    async fn approve_mcp(&self, call: &ToolCall) -> Result<(), ToolOutput> {
        let (Some(mcp), Some(server)) = (&self.agent.mcp, crate::mcp::names::server_of(&call.name))
        else {
            return Ok(());
        };
        if mcp.hub.approvals(server) != crate::config::ExecApprovals::Ask {
            return Ok(());
        }
        let what = format!("{} {}", call.name, call.arguments);
        crate::agent::approval::approve(
            &crate::agent::approval::Asking {
                kind: crate::agent::approval::Asked::McpCall,
                approver: &self.agent.approver,
                store: &self.agent.store,
                agent: &self.agent.id,
                session_key: &self.key,
                reply_to: self.reply_to.as_ref(),
                cancel: &self.cancel,
            },
            &what,
        )
        .await
    }

    /// Gives every call in `calls` a synthetic result so the transcript stays paired.
    fn close_calls(&mut self, calls: &[ToolCall], text: &str) -> Result<(), RunError> {
        for call in calls {
            self.push(Message::tool_result(call, text, true))?;
            let _ = self.events.try_send(RunEvent::Tool(ToolEvent::End {
                id: call.id.clone(),
                name: call.name.clone(),
                is_error: true,
            }));
        }
        Ok(())
    }

    /// Gives tool calls left without a result (the process died mid-tool) a synthetic one,
    /// so the transcript is paired again before the model sees it.
    fn repair_unpaired_calls(&mut self) -> Result<(), RunError> {
        let answered: std::collections::HashSet<&str> = self
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult(r) => Some(r.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let unpaired: Vec<ToolCall> = self
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => Some(a.content.iter()),
                _ => None,
            })
            .flatten()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) if !answered.contains(c.id.as_str()) => Some(c.clone()),
                _ => None,
            })
            .collect();
        for call in &unpaired {
            self.push(Message::tool_result(call, INTERRUPTED, true))?;
        }
        Ok(())
    }

    fn push_user(&mut self, text: &str) -> Result<(), RunError> {
        self.push(Message::user(text))
    }

    fn push(&mut self, message: Message) -> Result<(), RunError> {
        self.agent
            .store
            .append_message(&self.key, &message)
            .map_err(short)?;
        self.messages.push(message);
        Ok(())
    }
}

/// True when the window ends with this same turn left unanswered by a run that died (a
/// restart re-runs it): the user message is already there and is not appended again. An
/// answer that was cut short (stopped, shut down) counts as an answer: the turn is asked
/// again, so the model's context ends with the question, not with a partial reply.
fn resumes(messages: &[Message], text: &str) -> bool {
    let Some(last_user) = messages.iter().rposition(|m| matches!(m, Message::User(_))) else {
        return false;
    };
    let Message::User(user) = &messages[last_user] else {
        return false;
    };
    let answered = messages[last_user..]
        .iter()
        .any(|m| matches!(m, Message::Assistant(a) if a.stop_reason != StopReason::ToolUse));
    !answered && crate::domain::message::text_of(&user.content) == text
}

/// A call's reasoning as it streams: the blocks sealed so far and the open text.
#[derive(Default)]
struct Reasoning {
    sealed: Vec<ContentBlock>,
    text: String,
}

impl Reasoning {
    /// Ends the open text as a block with `signature` (or adds a redacted block).
    fn seal(&mut self, signature: String, redacted: bool) {
        let thinking = match redacted {
            true => "[Reasoning redacted]".to_owned(),
            false => std::mem::take(&mut self.text),
        };
        self.sealed.push(ContentBlock::Thinking {
            thinking,
            signature: Some(signature),
            redacted,
        });
    }

    /// The blocks, the open text last (unsigned).
    fn blocks(mut self) -> Vec<ContentBlock> {
        if !self.text.is_empty() {
            self.sealed.push(ContentBlock::thinking(self.text));
        }
        self.sealed
    }
}

fn failed(mut message: AssistantMessage, error: &ProviderError) -> AssistantMessage {
    tracing::warn!(error = %error, "model call failed");
    message.stop_reason = StopReason::Error;
    message.error_message = Some(format!("model error: {error}"));
    message
}

impl Turn<'_> {
    /// Notes which model answers the call of `message`, and when it is a fallback, why the
    /// others were skipped (for `/status`).
    fn answered(&self, message: &mut AssistantMessage, answered: crate::agent::provider::Answered) {
        message.provider = answered.provider;
        message.model = answered.model;
        if !answered.skipped.is_empty() {
            let fallback = crate::agent::model_choice::Fallback {
                answered: format!("{}/{}", message.provider, message.model),
                skipped: answered.skipped,
                at_ms: now_ms(),
            };
            crate::agent::model_choice::note_fallback(&self.agent.store, &self.key, &fallback);
        }
    }

    /// Adds what `message`'s call cost to the run's cost (and the metrics).
    fn count_cost(&mut self, message: &AssistantMessage) {
        let cost = self
            .agent
            .count_call(&message.provider, &message.model, &message.usage);
        self.cost_usd = self.cost_usd.zip(cost).map(|(sum, cost)| sum + cost);
    }
}

impl Agent {
    /// Counts a model call of `model` of `provider` that used `usage` in the metrics (a call
    /// that used nothing, e.g. failed at once, is left out); what it cost, when known.
    pub(crate) fn count_call(&self, provider: &str, model: &str, usage: &Usage) -> Option<f64> {
        let cost = self.pricing.cost(provider, model, usage);
        if *usage == Usage::default() {
            return cost;
        }
        let tokens = [
            ("input", usage.input),
            ("output", usage.output),
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
        ];
        let label = self.pricing.label(model);
        crate::metrics::global().model_tokens(provider, label, &tokens, cost);
        cost
    }
}

fn add_usage(total: &mut Usage, add: &Usage) {
    total.input += add.input;
    total.output += add.output;
    total.cache_read += add.cache_read;
    total.cache_write += add.cache_write;
    total.total_tokens += add.total_tokens;
}

fn short(e: impl std::fmt::Display) -> RunError {
    tracing::error!(error = %e, "store failure during a run");
    RunError::Storage(e.to_string())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
