//! Memory in the agent's run: the system prompt's memory section (when the memory tools are
//! allowed) and the silent pre-compaction flush.
//!
//! # Flush
//! Before a model call that will compact the window and summarize older turns, one silent
//! turn asks the model to write what should outlive the summary to `memory/YYYY-MM-DD.md`
//! with its file tools. The turn sees the whole window plus [`flush_prompt`]; it is offered
//! only the file and memory tools its run may use ([`FLUSH_TOOLS`]), it is not kept in the
//! transcript, it sends no run events, and its text (normally [`NO_REPLY`]) is not delivered.
//! It runs at most once per compaction cycle of a session (a cycle ends with the next
//! summary; kept in memory, so a restart may flush once more), only when the prompt still
//! fits the model's window with the flush prompts added, and never when `[memory] flush = false`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::agent::compact::is_summary;
use crate::agent::policy::Allowed;
use crate::domain::message::Message;

/// The answer of a flush turn with nothing to save.
pub const NO_REPLY: &str = "NO_REPLY";
/// The tools a flush turn may use (those of them its run's policy allows).
pub const FLUSH_TOOLS: &[&str] = &["read", "ls", "write", "edit", "memory_search", "memory_get"];
/// Most model calls of one flush turn.
pub(crate) const MAX_FLUSH_CALLS: usize = 8;

/// Appended to the system prompt of a flush turn.
pub const FLUSH_SYSTEM: &str = "Pre-compaction memory flush. The session is close to \
compaction: its older turns will soon be replaced by a summary. Store durable memories now.";

/// The user prompt of a flush turn for the daily note of `today` (`YYYY-MM-DD`).
pub fn flush_prompt(today: &str) -> String {
    format!(
        "Pre-compaction memory flush: older turns of this conversation are about to be \
         summarized. Write anything worth remembering later (decisions, facts, preferences, \
         open todos) to memory/{today}.md in the workspace: append to it if it exists, create \
         it (and memory/) if not; keep MEMORY.md for lasting facts. This turn is silent: the \
         user does not see your answer. If there is nothing to store, answer exactly {NO_REPLY}."
    )
}

/// The system prompt's memory section, dated `today` (`YYYY-MM-DD`).
pub fn prompt_section(today: &str) -> String {
    format!(
        "\n## Memory\nYou wake up fresh each session; your workspace files are your memory. \
         MEMORY.md holds lasting facts (the user, preferences, decisions); daily notes go to \
         memory/YYYY-MM-DD.md (today: memory/{today}.md; append, do not overwrite). Write notes \
         with write or edit when something should be remembered. Before answering about earlier \
         work, decisions, dates, people, preferences or todos, use memory_search, then \
         memory_get for the lines you need.\n"
    )
}

/// `[memory]` as the agent uses it, and which compaction cycle each session flushed in.
#[derive(Debug, Default)]
pub struct MemorySettings {
    /// Run the flush turn before a compaction.
    pub flush: bool,
    /// `[memory]`, for today's date.
    pub config: crate::config::MemoryConfig,
    /// Session key -> the cycle (see [`cycle_of`]) it last flushed in.
    flushed: Mutex<HashMap<String, u64>>,
}

impl MemorySettings {
    /// The settings `[memory]` describes.
    pub fn new(config: &crate::config::MemoryConfig) -> MemorySettings {
        MemorySettings {
            flush: config.flush,
            config: config.clone(),
            flushed: Mutex::default(),
        }
    }

    /// Records a flush of `key` in `cycle`; false when it already flushed in it.
    pub(crate) fn claim(&self, key: &str, cycle: u64) -> bool {
        let mut flushed = self.flushed.lock().unwrap_or_else(PoisonError::into_inner);
        flushed.insert(key.to_owned(), cycle) != Some(cycle)
    }
}

/// The compaction cycle of a window: the time of its summary (0 before the first one).
pub fn cycle_of(messages: &[Message]) -> u64 {
    match messages.first() {
        Some(Message::User(u)) if is_summary(&messages[0]) => u.timestamp.max(1),
        _ => 0,
    }
}

/// The run a flush turn belongs to.
pub(crate) struct FlushRun<'a> {
    /// The session.
    pub key: &'a str,
    /// The run's id.
    pub run_id: &'a str,
    /// What the run may use.
    pub allowed: &'a Allowed,
    /// The session's `/model` choice.
    pub model: Option<&'a str>,
    /// The run's cancel token.
    pub cancel: &'a CancellationToken,
    /// Tokens kept free beyond `agent.compaction_reserve_tokens` (the thinking budget), as
    /// the compaction that follows counts them.
    pub extra_reserve: u64,
}

/// What a flush turn did.
#[derive(Debug, Default)]
pub(crate) struct Flushed {
    /// Names of the tools it called, in order.
    pub tools: Vec<String>,
    /// Its last text (not delivered).
    pub text: String,
}
