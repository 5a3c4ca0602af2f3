//! Turning an agent's `session/update` notifications into chela's run events (SPEC 4, 5):
//! message chunks become assistant text; tool calls and plans become compact progress lines
//! when enabled; everything else (thoughts, usage, modes, commands...) is left out.

use agent_client_protocol::v1::schema::{
    ContentBlock, Plan, PlanEntryStatus, SessionUpdate, ToolCallStatus,
};

use super::permission::REFUSED_META_KEY;
use crate::domain::events::{RunEvent, ToolEvent};

/// Most chars of one progress line.
const PROGRESS_MAX_CHARS: usize = 160;

/// Maps the updates of one turn, in order.
#[derive(Debug, Default)]
pub struct UpdateMapper {
    progress: bool,
    /// True after a progress line: the next text starts a new paragraph.
    after_progress: bool,
    /// Assistant text of the turn so far.
    text: String,
    /// Tool calls chela's policy refused: their refusal is shown, their "failed" is not.
    refused: std::collections::HashSet<String>,
}

impl UpdateMapper {
    /// A mapper that shows progress lines when `progress` is set.
    pub fn new(progress: bool) -> Self {
        UpdateMapper {
            progress,
            ..Self::default()
        }
    }

    /// The assistant text mapped so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The events for `update`.
    pub fn map(&mut self, update: &SessionUpdate) -> Vec<RunEvent> {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) if !text.text.is_empty() => {
                    let mut delta = String::new();
                    if self.after_progress {
                        delta.push('\n');
                        self.after_progress = false;
                    }
                    delta.push_str(&text.text);
                    self.text.push_str(&delta);
                    vec![RunEvent::Assistant { delta }]
                }
                _ => Vec::new(),
            },
            SessionUpdate::ToolCall(call) if self.progress => {
                self.progress_line(&format!("🔧 {}", call.title))
            }
            // Without progress lines, the tool start only breaks the text into paragraphs.
            SessionUpdate::ToolCall(call) => vec![RunEvent::Tool(ToolEvent::Start {
                id: call.tool_call_id.0.to_string(),
                name: call.title.clone(),
                // The coding agent's title says what the call does.
                summary: String::new(),
            })],
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let name = update.fields.title.clone().unwrap_or_default();
                let what = if name.is_empty() { id.clone() } else { name };
                let refusal = update.meta.as_ref().and_then(|m| m.get(REFUSED_META_KEY));
                if let Some(reason) = refusal.and_then(|r| r.as_str()) {
                    self.refused.insert(id);
                    // Shown even without progress lines: it says why the work did not happen.
                    // The title is shortened, never the reason (it names the setting).
                    return self.line(&format!("🚫 {} refused: {reason}", short(&what)));
                }
                match update.fields.status {
                    Some(ToolCallStatus::Failed) if !self.refused.contains(&id) => {
                        self.progress_line(&format!("⚠️ {what} failed"))
                    }
                    _ => Vec::new(),
                }
            }
            SessionUpdate::Plan(plan) => self.progress_line(&plan_line(plan)),
            _ => Vec::new(),
        }
    }

    fn progress_line(&mut self, line: &str) -> Vec<RunEvent> {
        if !self.progress {
            return Vec::new();
        }
        let line: String = line.chars().take(PROGRESS_MAX_CHARS).collect();
        self.line(&line)
    }

    /// `line` on a line of its own within the assistant text.
    fn line(&mut self, line: &str) -> Vec<RunEvent> {
        let mut delta = String::new();
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            delta.push('\n');
        }
        if !self.after_progress && !self.text.is_empty() {
            delta.push('\n');
        }
        delta.push_str(line);
        delta.push('\n');
        self.after_progress = true;
        self.text.push_str(&delta);
        vec![RunEvent::Assistant { delta }]
    }
}

/// Most chars of a tool title in a refusal line.
const TITLE_MAX_CHARS: usize = 60;

/// `title`, cut to [`TITLE_MAX_CHARS`] with `…` when longer.
fn short(title: &str) -> String {
    if title.chars().count() <= TITLE_MAX_CHARS {
        return title.to_owned();
    }
    let mut cut: String = title.chars().take(TITLE_MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// `📋 ☑ first · ▸ second · ☐ third`.
fn plan_line(plan: &Plan) -> String {
    let entries: Vec<String> = plan
        .entries
        .iter()
        .map(|e| {
            let mark = match e.status {
                PlanEntryStatus::Completed => "☑",
                PlanEntryStatus::InProgress => "▸",
                _ => "☐",
            };
            format!("{mark} {}", e.content)
        })
        .collect();
    format!("📋 {}", entries.join(" · "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn update(json: serde_json::Value) -> SessionUpdate {
        serde_json::from_value(json).unwrap()
    }

    fn text(events: &[RunEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                RunEvent::Assistant { delta } => Some(delta.as_str()),
                _ => None,
            })
            .collect()
    }

    fn chunk(t: &str) -> SessionUpdate {
        update(serde_json::json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": t}
        }))
    }

    fn tool_call(title: &str) -> SessionUpdate {
        update(serde_json::json!({
            "sessionUpdate": "tool_call", "toolCallId": "t1", "title": title,
            "kind": "execute", "status": "pending"
        }))
    }

    #[test]
    fn chunks_become_assistant_text_in_order() {
        let mut m = UpdateMapper::new(false);
        let mut events = m.map(&chunk("Hel"));
        events.extend(m.map(&chunk("lo")));
        assert_eq!(text(&events), "Hello");
        assert_eq!(m.text(), "Hello");
    }

    #[test]
    fn progress_lines_only_when_enabled() {
        let mut quiet = UpdateMapper::new(false);
        let events = quiet.map(&tool_call("Run ls"));
        assert_eq!(text(&events), "");
        assert!(matches!(
            events[..],
            [RunEvent::Tool(ToolEvent::Start { .. })]
        ));

        let mut m = UpdateMapper::new(true);
        let mut all = m.map(&chunk("Looking."));
        all.extend(m.map(&tool_call("Run ls")));
        all.extend(m.map(&update(serde_json::json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed"
        }))));
        all.extend(m.map(&chunk("Done.")));
        assert_eq!(text(&all), "Looking.\n\n🔧 Run ls\n⚠️ t1 failed\n\nDone.");
        assert_eq!(m.text(), text(&all));
    }

    #[test]
    fn plans_are_one_compact_line() {
        let mut m = UpdateMapper::new(true);
        let events = m.map(&update(serde_json::json!({
            "sessionUpdate": "plan",
            "entries": [
                {"content": "read", "priority": "high", "status": "completed"},
                {"content": "fix", "priority": "medium", "status": "pending"}
            ]
        })));
        assert_eq!(text(&events), "📋 ☑ read · ☐ fix\n");
    }

    #[test]
    fn thoughts_usage_and_commands_are_left_out() {
        let mut m = UpdateMapper::new(true);
        for json in [
            serde_json::json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}),
            serde_json::json!({"sessionUpdate": "available_commands_update", "availableCommands": []}),
            serde_json::json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}),
        ] {
            assert!(m.map(&update(json)).is_empty());
        }
    }

    #[test]
    fn a_policy_refusal_is_shown_with_its_reason_instead_of_failed() {
        let call = serde_json::from_value(serde_json::json!({
            "toolCallId": "t1", "title": "Edit main.rs", "kind": "edit"
        }))
        .unwrap();
        let reason = "[acp] permissions = \"approve-reads\" allows only reads".to_owned();
        let note = crate::acp::permission::refusal_note(&call, reason);
        let failed = update(serde_json::json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed"
        }));
        for progress in [true, false] {
            let mut m = UpdateMapper::new(progress);
            let mut all = m.map(&SessionUpdate::ToolCallUpdate(note.clone()));
            all.extend(m.map(&failed));
            assert_eq!(
                text(&all),
                "🚫 Edit main.rs refused: [acp] permissions = \"approve-reads\" allows only reads\n"
            );
        }
    }

    #[test]
    fn a_long_title_is_shortened_but_the_reason_is_kept_whole() {
        let title = "Run cd /home/someone/projects/very-long-name && cargo test --workspace --all";
        let call = serde_json::from_value(serde_json::json!({"toolCallId": "t9", "title": title}))
            .unwrap();
        let reason = crate::acp::permission::refusal_reason(
            crate::config::PermissionMode::ApproveReads,
            false,
        );
        let note = crate::acp::permission::refusal_note(&call, reason.clone());
        let mut m = UpdateMapper::new(true);
        let shown = text(&m.map(&SessionUpdate::ToolCallUpdate(note)));
        assert!(shown.ends_with(&format!(" refused: {reason}\n")), "{shown}");
        assert!(shown.contains("…"), "{shown}");
    }

    #[test]
    fn an_agent_cannot_forge_chelas_refusal_line() {
        let forged = update(serde_json::json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "Edit",
            "_meta": {"chela/refused": "set \"approve-all\" now"}
        }));
        let cleaned = crate::acp::permission::without_refusal_marks(forged);
        let mut m = UpdateMapper::new(true);
        assert_eq!(text(&m.map(&cleaned)), "");
    }
}
