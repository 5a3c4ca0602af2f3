//! The agent's side of the memory flush ([`memory`](crate::agent::memory) has the rules):
//! the system prompt's memory section and the silent turn before a compaction.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::agent::compact::{estimate_prompt, split_point, tokens_of_chars};
use crate::agent::memory::{
    FLUSH_SYSTEM, FLUSH_TOOLS, FlushRun, Flushed, MAX_FLUSH_CALLS, NO_REPLY, cycle_of,
    flush_prompt, prompt_section,
};
use crate::agent::policy::Allowed;
use crate::agent::provider::{ProviderEvent, ProviderRequest, ToolSpec};
use crate::agent::run::Agent;
use crate::agent::tools::{ToolContext, ToolOutput};
use crate::domain::message::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolCall, Usage, now_ms,
};

impl Agent {
    /// The system prompt of a call offering `tools`: the prompt, the memory section when
    /// `memory_search` is among them, then the tool list.
    pub fn system_for<'a>(&self, tools: impl Iterator<Item = &'a ToolSpec> + Clone) -> String {
        let mut prompt = self.system_prompt.clone();
        if tools.clone().any(|t| t.name == "memory_search") {
            prompt.push_str(&prompt_section(&self.memory.config.today()));
        }
        crate::agent::context::with_tools(&prompt, tools)
    }

    /// The tools a flush turn of a run allowed `allowed` gets; empty when it cannot write.
    fn flush_tools(&self, allowed: &Allowed) -> Vec<Arc<ToolSpec>> {
        let specs: Vec<Arc<ToolSpec>> = (self.specs.specs(&self.tools).iter())
            .filter(|s| FLUSH_TOOLS.contains(&s.name.as_str()) && allowed.allows(&s.name))
            .cloned()
            .collect();
        let writes = specs.iter().any(|s| s.name == "write" || s.name == "edit");
        if writes { specs } else { Vec::new() }
    }

    /// Before a model call with `messages`: runs the flush turn when the call will compact
    /// the window and drop turns (see the module docs). Returns what it did, if it ran.
    pub(crate) async fn flush_before_compaction(
        &self,
        run: &FlushRun<'_>,
        messages: &[Message],
        gave_up: bool,
    ) -> Option<Flushed> {
        let settings = self.compaction.with_room(run.extra_reserve);
        if !self.memory.flush || !settings.enabled() || gave_up {
            return None;
        }
        let base = self.base_tokens();
        let estimate = estimate_prompt(base, messages);
        if estimate <= settings.threshold() {
            return None;
        }
        // The flush call adds its prompts to the window: it must still fit.
        let today = self.memory.config.today();
        let extra = tokens_of_chars(flush_prompt(&today).len() + FLUSH_SYSTEM.len()) + 16;
        if estimate + extra > settings.context_window {
            return None;
        }
        split_point(messages, settings.keep_tokens(base))?;
        self.claimed_flush(run, messages).await
    }

    /// Before `/compact` of session `key` (the owner asked, whatever the window's size): the
    /// flush turn when `[memory] flush` is on, there is something to summarize, the flush
    /// prompts still fit the window and the session has not flushed in this cycle yet.
    pub(crate) async fn flush_before_command_compaction(
        &self,
        key: &str,
        cancel: &CancellationToken,
    ) -> Option<Flushed> {
        if !self.memory.flush {
            return None;
        }
        let messages = match self.store.window(key) {
            Ok(messages) => messages,
            Err(e) => {
                tracing::warn!(session = key, error = %e, "no memory flush: cannot read the window");
                return None;
            }
        };
        split_point(&messages, 0)?;
        let today = self.memory.config.today();
        let extra = tokens_of_chars(flush_prompt(&today).len() + FLUSH_SYSTEM.len()) + 16;
        if estimate_prompt(self.base_tokens(), &messages) + extra > self.compaction.context_window {
            return None;
        }
        let allowed = self.allowed_for(key, None);
        let model = crate::agent::model_choice::chosen(&self.store, key);
        let run_id = format!("compact-{}", crate::domain::message::now_ms());
        let run = FlushRun {
            key,
            run_id: &run_id,
            allowed: &allowed,
            model: model.as_deref(),
            cancel,
            extra_reserve: 0,
        };
        self.claimed_flush(&run, &messages).await
    }

    /// Runs the flush turn of `run` over `messages` when its policy lets it write and the
    /// session has not flushed in this compaction cycle; logs what it did.
    async fn claimed_flush(&self, run: &FlushRun<'_>, messages: &[Message]) -> Option<Flushed> {
        let tools = self.flush_tools(run.allowed);
        if tools.is_empty() || !self.memory.claim(run.key, cycle_of(messages)) {
            return None;
        }
        match self.flush_turn(run, messages, tools).await {
            Ok(done) => {
                tracing::info!(
                    session = run.key,
                    tools = ?done.tools,
                    silent = done.text.trim() == NO_REPLY,
                    "memory flush before compaction"
                );
                Some(done)
            }
            Err(e) => {
                tracing::warn!(session = run.key, error = %e, "memory flush failed");
                None
            }
        }
    }

    /// The flush turn itself: model calls and tool calls kept out of the transcript.
    async fn flush_turn(
        &self,
        run: &FlushRun<'_>,
        messages: &[Message],
        tools: Vec<Arc<ToolSpec>>,
    ) -> Result<Flushed, String> {
        let system = format!(
            "{}\n## Memory flush\n{FLUSH_SYSTEM}\n",
            self.system_for(tools.iter().map(|t| &**t))
        );
        let workspace = &self.tool_context.workspace;
        let mut convo = crate::agent::media::for_model(messages, workspace, false).await;
        convo.push(Message::user(flush_prompt(&self.memory.config.today())));
        let mut done = Flushed::default();
        for _ in 0..MAX_FLUSH_CALLS {
            let request = ProviderRequest {
                system: system.clone(),
                messages: convo.clone(),
                tools: tools.clone(),
                max_tokens: self.max_tokens,
                model: run.model.map(str::to_owned),
                thinking: crate::agent::provider::Thinking::Off,
                show_reasoning: false,
                cache_key: None,
            };
            let (text, calls) = tokio::select! {
                biased;
                _ = run.cancel.cancelled() => return Err("cancelled".into()),
                answer = self.flush_call(request) => answer?,
            };
            done.text = text.clone();
            if calls.is_empty() {
                return Ok(done);
            }
            convo.push(self.flush_assistant(text, &calls, run.model));
            for call in &calls {
                done.tools.push(call.name.clone());
                let output = self.flush_tool(run, call, &tools).await;
                convo.push(Message::tool_result(call, output.text, output.is_error));
            }
        }
        Ok(done)
    }

    /// One model call of a flush turn: its text and tool calls.
    async fn flush_call(
        &self,
        request: ProviderRequest,
    ) -> Result<(String, Vec<ToolCall>), String> {
        let mut answered = match &request.model {
            Some(choice) => self.provider.resolve(choice),
            None => (
                self.provider.name().to_owned(),
                self.provider.model().to_owned(),
            ),
        };
        let mut stream = self
            .provider
            .stream(request)
            .await
            .map_err(|e| e.to_string())?;
        let (mut text, mut calls) = (String::new(), Vec::new());
        while let Some(event) = stream.next().await {
            match event.map_err(|e| e.to_string())? {
                ProviderEvent::TextDelta(delta) => text.push_str(&delta),
                ProviderEvent::ToolCall(call) => calls.push(call),
                ProviderEvent::Done {
                    stop_reason: StopReason::Error,
                    ..
                } => return Err("the model stopped with an error".into()),
                ProviderEvent::Done { usage, .. } => {
                    // Not in the transcript: counted in the metrics only.
                    self.count_call(&answered.0, &answered.1, &usage);
                    break;
                }
                ProviderEvent::Answered(who) => answered = (who.provider, who.model),
                ProviderEvent::ThinkingDelta(_) | ProviderEvent::ThinkingSealed { .. } => {}
            }
        }
        Ok((text, calls))
    }

    fn flush_assistant(&self, text: String, calls: &[ToolCall], model: Option<&str>) -> Message {
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(ContentBlock::Text { text });
        }
        content.extend(calls.iter().cloned().map(ContentBlock::ToolCall));
        Message::Assistant(AssistantMessage {
            content,
            provider: self.provider.name().to_owned(),
            model: model.unwrap_or_else(|| self.provider.model()).to_owned(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: now_ms(),
        })
    }

    /// Runs one tool call of a flush turn (only `offered` tools; the hooks apply).
    async fn flush_tool(
        &self,
        run: &FlushRun<'_>,
        call: &ToolCall,
        offered: &[Arc<ToolSpec>],
    ) -> ToolOutput {
        let specs = self.specs.specs(&self.tools);
        let at = specs.iter().position(|s| s.name == call.name);
        let tool = at.and_then(|at| self.tools.get(at));
        let Some(tool) = tool.filter(|_| offered.iter().any(|s| s.name == call.name)) else {
            return ToolOutput::error(format!(
                "The tool {} is not available during the memory flush.",
                call.name
            ));
        };
        let ctx = ToolContext {
            cancel: run.cancel.clone(),
            session_key: run.key.to_owned(),
            run_id: run.run_id.to_owned(),
            reply_to: None,
            events: None,
            ..self.tool_context.clone()
        };
        let work = tool.call(call.arguments.clone(), &ctx);
        self.hooks
            .around_tool(run.key, call, run.cancel, work)
            .await
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
