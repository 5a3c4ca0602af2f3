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
