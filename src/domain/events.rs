//! The typed event stream of a run. Replies, transcripts and the RPC all consume these; the
//! agent loop and ACP turns both produce them.

use serde::{Deserialize, Serialize};

use crate::domain::run::RunRecord;

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stream", rename_all = "lowercase")]
pub enum RunEvent {
    /// Start, end or failure of the run.
    Lifecycle(Lifecycle),
    /// A piece of assistant text, in order.
    Assistant {
        /// The new text.
        delta: String,
    },
    /// A piece of the model's reasoning, sent only for a session that shows it
    /// (`/reasoning on`).
    Reasoning {
        /// The new reasoning text.
        delta: String,
    },
    /// Progress of a tool call.
    Tool(ToolEvent),
    /// The session's model window was compacted before the next model call.
    Compaction(Compacted),
    /// The run's `message` tool sent `text` into the run's own conversation; the final
    /// reply leaves it out.
    Sent {
        /// What was sent.
        text: String,
    },
    /// The run has settled (its final recorded, its pending turns cleared): the last event
    /// of every run on the bus.
    Finished(Box<RunRecord>),
}

/// Run lifecycle phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "lowercase")]
pub enum Lifecycle {
    /// The run started.
    Start,
    /// The run finished; `text` is the final answer (may be empty).
    End {
        /// Final assistant text of the last model call.
        text: String,
        /// True when the run was stopped before it finished.
        aborted: bool,
    },
    /// The run failed; `message` is short and safe to show in chat.
    Error {
        /// What went wrong, for the user.
        message: String,
    },
}

/// Tool call progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "lowercase")]
pub enum ToolEvent {
    /// A tool call began.
    Start {
        /// Tool call id.
        id: String,
        /// Tool name.
        name: String,
        /// A short excerpt of the call (`ls -la src` for an exec; see [`call_summary`]).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        summary: String,
    },
    /// A tool call ended.
    End {
        /// Tool call id.
        id: String,
        /// Tool name.
        name: String,
        /// True when it failed, was refused or was skipped.
        is_error: bool,
    },
}

/// Most characters of a tool call's excerpt.
const SUMMARY_CHARS: usize = 72;

/// The arguments that say best what a call does, in this order.
const TELLING: [&str; 9] = [
    "command",
    "cmd",
    "path",
    "file_path",
    "url",
    "query",
    "pattern",
    "prompt",
    "task",
];

/// A short excerpt of a tool call's `arguments`: the telling argument (the command of an
/// exec, the path of a file tool, the query of a search), else the arguments as compact
/// JSON; its first line, cut at 72 characters.
pub fn call_summary(arguments: &serde_json::Value) -> String {
    let telling = TELLING
        .iter()
        .find_map(|key| arguments.get(key).and_then(serde_json::Value::as_str));
    let text = match telling {
        Some(text) => text.to_owned(),
        None if arguments.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => arguments.to_string(),
    };
    let text = text.trim();
    let first = text.lines().next().unwrap_or("").trim();
    // No control character (an escape sequence would reach a terminal showing the line).
    let mut cut: String = first
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(SUMMARY_CHARS)
        .collect();
    if first.chars().count() > SUMMARY_CHARS || text.lines().nth(1).is_some() {
        cut.push('…');
    }
    cut
}

/// A compaction of a session's model window (SPEC 7): one `compaction` entry was appended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compacted {
    /// The `compaction` entry's id.
    pub entry_id: String,
    /// The first entry kept verbatim after the summary.
    pub first_kept_entry_id: String,
    /// Messages of the window replaced by the summary (an earlier summary counts as one).
    pub summarized: usize,
    /// Estimated prompt tokens before (also the entry's `tokensBefore`).
    pub tokens_before: u64,
    /// Estimated prompt tokens after.
    pub tokens_after: u64,
}

/// One event of one run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LiveEvent {
    /// The run (`run-<seq>`).
    pub run_id: String,
    /// Its session.
    pub session_key: String,
    /// The event's number within the run, from 1: a gap means a subscriber missed events.
    pub seq: u64,
    /// The event.
    pub event: RunEvent,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_is_summed_up_by_its_telling_argument() {
        assert_eq!(
            call_summary(&json!({"command": "ls -la src"})),
            "ls -la src"
        );
        assert_eq!(
            call_summary(&json!({"path": "notes.md", "content": "x"})),
            "notes.md"
        );
        assert_eq!(call_summary(&json!({})), "");
        assert_eq!(call_summary(&json!({"n": 3})), r#"{"n":3}"#);
        // The first line only, cut at 72 characters, with a mark that there is more.
        assert_eq!(
            call_summary(&json!({"command": "echo a\necho b"})),
            "echo a…"
        );
        let long = "x".repeat(100);
        let cut = call_summary(&json!({ "command": long }));
        assert_eq!(cut.chars().count(), 73);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_tool_start_without_a_summary_reads_as_before() {
        let old: ToolEvent =
            serde_json::from_value(json!({"phase": "start", "id": "1", "name": "exec"})).unwrap();
        assert_eq!(
            old,
            ToolEvent::Start {
                id: "1".into(),
                name: "exec".into(),
                summary: String::new()
            }
        );
    }
}
