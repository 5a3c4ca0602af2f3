//! What a run is, seen from outside it: how it ended ([`RunStatus`]), the record published
//! when it finishes ([`RunRecord`]), its id ([`run_id_for`]) and its live events ([`LiveEvent`]).

use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", content = "error", rename_all = "lowercase")]
pub enum RunStatus {
    /// The model finished.
    Ok,
    /// Stopped by /stop, interrupt or shutdown.
    Aborted,
    /// Failed.
    Error(RunError),
}

/// Why a run failed. Its text is short and safe to show in the chat (SPEC 8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum RunError {
    /// The model call failed after the provider's own retries.
    #[error("{0}")]
    Model(String),
    /// A `before_run` hook refused the turn.
    #[error("blocked by hook: {0}")]
    BlockedByHook(String),
    /// The model went on calling tools past the limit of rounds.
    #[error("the model kept calling tools ({0} rounds); stopped")]
    ToolRounds(usize),
    /// The run hit `agent.run_timeout` (seconds).
    #[error("the run timed out after {0} s")]
    TimedOut(u64),
    /// The prompt no longer fits the model's window and could not be compacted.
    #[error(
        "this conversation no longer fits the model's context window and could not be \
         compacted; send /new to start a fresh one"
    )]
    ContextTooLong,
    /// The transcript could not be read or written.
    #[error("storage error: {0}")]
    Storage(String),
    /// The coding agent failed, is gone, or the session is no longer bound to one.
    #[error("{0}")]
    CodingAgent(String),
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

/// How a finished run is announced (to `chela agent` and the RPC's `agent.wait`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Run id (`run-<first seq>`, see [`run_id_for`]).
    pub run_id: String,
    /// The durable pending entries this run answered: its turn's and those steered into it.
    pub seqs: Vec<u64>,
    /// Session key.
    pub session_key: String,
    /// How it ended.
    pub status: RunStatus,
    /// Final text of the last model call.
    pub text: String,
    /// Start, ms since the epoch.
    pub started_ms: u64,
    /// End, ms since the epoch.
    pub ended_ms: u64,
    /// Tokens the run used, over all its model calls (zeros when unknown; not written then).
    #[serde(default, skip_serializing_if = "no_tokens")]
    pub usage: crate::domain::message::Usage,
    /// The prompt tokens of its last model call: how full the context window was.
    #[serde(default, skip_serializing_if = "no_context")]
    pub context_tokens: u64,
    /// What its model calls cost in US dollars, when every model's price was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

fn no_tokens(usage: &crate::domain::message::Usage) -> bool {
    *usage == crate::domain::message::Usage::default()
}

fn no_context(tokens: &u64) -> bool {
    *tokens == 0
}

impl RunRecord {
    /// A finished record of run `run_id` of session `session_key` that answered `seqs`, for
    /// tests.
    #[cfg(test)]
    pub(crate) fn for_test(run_id: &str, session_key: &str, seqs: &[u64]) -> RunRecord {
        RunRecord {
            run_id: run_id.to_owned(),
            seqs: seqs.to_vec(),
            session_key: session_key.to_owned(),
            status: RunStatus::Ok,
            text: "the answer".to_owned(),
            started_ms: 1,
            ended_ms: 2,
            usage: Default::default(),
            context_tokens: 0,
            cost_usd: None,
        }
    }
}

/// The id of the run answering the durable turns `seqs`: `run-<first seq>`, so the id is known
/// as soon as the message is accepted (the RPC's `agent` answers with it); a turn without a
/// durable entry gets a random id.
pub fn run_id_for(seqs: &[u64]) -> String {
    match seqs.first() {
        Some(seq) => format!("run-{seq}"),
        None => format!("run-{}", uuid::Uuid::new_v4().simple()),
    }
}

/// The durable seq a run id of [`run_id_for`] names, if it names one.
pub fn seq_of_run_id(run_id: &str) -> Option<u64> {
    run_id.strip_prefix("run-")?.parse().ok()
}
