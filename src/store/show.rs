//! A readable view of a transcript for `chela sessions show`.

use std::fmt::Write as _;

use super::entry::{Entry, EntryKind};
use crate::domain::message::{ContentBlock, Message, text_of};

/// The most chars of a tool result, compaction summary or tool arguments shown.
const SHOWN_CHARS: usize = 200;

/// Renders a transcript (header first) as text: `role: text` lines, tool calls as
/// `  -> name(args)`, tool results as `  <- name: text` (at most 200 chars), resets as
/// `--- reset (reason) ---`, compactions and model changes as similar rules.
pub(super) fn render(entries: &[Entry]) -> String {
    let mut out = String::new();
    for entry in entries {
        render_entry(&mut out, entry);
    }
    out
}

/// Appends the rendering of one entry to `out` (a header as `# session ...`).
pub fn render_entry(out: &mut String, entry: &Entry) {
    // Writing to a String cannot fail.
    let item = match entry {
        Entry::Session(h) => {
            let _ = writeln!(out, "# session {} ({}, cwd {})", h.id, h.timestamp, h.cwd);
            return;
        }
        Entry::Item(item) => item,
    };
    match &item.kind {
        EntryKind::Message(Message::User(u)) => {
            let _ = writeln!(out, "user: {}", text_of(&u.content));
        }
        EntryKind::Message(Message::Assistant(a)) => {
            let text = text_of(&a.content);
            if !text.is_empty() {
                let _ = writeln!(out, "assistant: {text}");
            }
            for block in &a.content {
                if let ContentBlock::ToolCall(call) = block {
                    let args = truncate(&call.arguments.to_string());
                    let _ = writeln!(out, "  -> {}({args})", call.name);
                }
            }
            if let Some(error) = &a.error_message {
                let _ = writeln!(out, "assistant error: {error}");
            }
        }
        EntryKind::Message(Message::ToolResult(r)) => {
            let marker = if r.is_error { " (error)" } else { "" };
            let text = truncate(&text_of(&r.content));
            let _ = writeln!(out, "  <- {}{marker}: {text}", r.tool_name);
        }
        EntryKind::ModelChange { provider, model_id } => {
            let _ = writeln!(out, "--- model {provider}/{model_id} ---");
        }
        EntryKind::Compaction {
            summary,
            tokens_before,
            ..
        } => {
            let _ = writeln!(
                out,
                "--- compaction ({tokens_before} tokens before): {} ---",
                truncate(summary)
            );
        }
        EntryKind::Reset { reason } => {
            let _ = writeln!(out, "--- reset ({reason}) ---");
        }
    }
}

/// The first [`SHOWN_CHARS`] chars of `text`, with `…` when cut.
fn truncate(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::message::{AssistantMessage, StopReason, ToolCall, Usage};
    use crate::store::Store;

    #[test]
    fn render_shows_roles_tool_calls_truncated_results_and_resets() {
        let store = Store::temporary().unwrap();
        store.ensure_session("k", "/w").unwrap();
        let call = ToolCall {
            id: "c".into(),
            name: "ls".into(),
            arguments: json!({"path": "."}),
        };
        let kinds = [
            EntryKind::Message(Message::user("list it")),
            EntryKind::Message(Message::Assistant(AssistantMessage {
                content: vec![
                    ContentBlock::text("sure"),
                    ContentBlock::ToolCall(call.clone()),
                ],
                provider: "p".into(),
                model: "m".into(),
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                timestamp: 1,
            })),
            EntryKind::Message(Message::tool_result(&call, "é".repeat(300), false)),
            EntryKind::Reset {
                reason: "/new".into(),
            },
        ];
        for kind in kinds {
            store.append("k", kind).unwrap();
        }
        let text = store.render_text("k").unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("# session "), "{text}");
        assert_eq!(lines[1], "user: list it");
        assert_eq!(lines[2], "assistant: sure");
        assert_eq!(lines[3], r#"  -> ls({"path":"."})"#);
        assert_eq!(lines[4], format!("  <- ls: {}…", "é".repeat(200)));
        assert_eq!(lines[5], "--- reset (/new) ---");
    }
}
