//! What links sessions to others: coding-agent bindings, sub-agent links, reply targets.

use std::path::PathBuf;

use chela_channel::Conversation;
use serde::{Deserialize, Serialize};

use super::{PendingTurn, StoreFuture};
use crate::store::error::StoreError;

/// One conversation bound to a coding agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Session key of the bound conversation.
    pub session_key: String,
    /// Where the conversation lives (replies go there).
    pub conversation: Conversation,
    /// Harness name (`codex`, `claude`, a custom entry...).
    pub harness: String,
    /// The agent's working folder.
    pub cwd: PathBuf,
    /// The agent's session id, once `session/new` answered.
    pub acp_session_id: Option<String>,
    /// A label for `/acp status`.
    pub label: Option<String>,
    /// Who spawned it (`channel:user id`).
    pub owner: String,
    /// Creation time, ms since the epoch.
    pub created_ms: u64,
    /// Last turn or command, ms since the epoch (idle bindings expire).
    pub last_active_ms: u64,
    /// Idle seconds before this binding expires (`/session idle`); `None`: the config's.
    #[serde(default)]
    pub idle_s: Option<u64>,
}

/// Where a sub-agent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubagentState {
    /// Queued or running; its result has not reached the parent yet.
    Running,
    /// `/stop` in the parent stopped it: its end is not reported to the parent.
    Stopped,
    /// Ended; its result was handed to the parent (or dropped after a stop).
    Done,
}

/// A sub-agent session and the session that spawned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentLink {
    /// The parent's session key.
    pub parent: String,
    /// The label given at spawn, if any.
    pub label: Option<String>,
    /// Where the parent was replying when it spawned the child (its follow-up goes there).
    pub parent_target: Option<Conversation>,
    /// When it was spawned, ms since the epoch.
    pub created_ms: u64,
    /// Where it stands.
    pub state: SubagentState,
}

/// Links between a session and something else, keyed by session key: thread bindings to a
/// coding-agent session (SPEC 4; they survive restarts so the next message resumes the
/// agent's session), sub-agent links (child -> [`SubagentLink`]), and reply targets (where
/// each session last replied, for the `message` tool).
///
/// Spawning and finishing a sub-agent also write the pending queue (and dedupe), atomically
/// with the link, so a crash at any point hands the child's result to the parent exactly once.
pub trait BindingStore {
    /// The binding of session `key`, if it is bound.
    fn get_binding(&self, key: &str) -> Result<Option<Binding>, StoreError>;

    /// Saves `binding` under its session key (replacing any). Durable.
    fn put_binding<'a>(&'a self, binding: &'a Binding) -> StoreFuture<'a, ()>;

    /// Removes the binding of session `key`; returns it if there was one. Durable.
    fn remove_binding<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Binding>>;

    /// Every binding, in key order.
    fn list_bindings(&self) -> Result<Vec<Binding>, StoreError>;

    /// Records `link` for session `child` and queues the child's first turn, atomically;
    /// returns the turn's pending seq. Durable.
    fn spawn_subagent<'a>(
        &'a self,
        child: &'a str,
        link: &'a SubagentLink,
        first: &'a PendingTurn,
    ) -> StoreFuture<'a, u64>;

    /// The link of sub-agent session `child`, if it is one.
    fn subagent(&self, child: &str) -> Result<Option<SubagentLink>, StoreError>;

    /// The parent session of sub-agent session `child`; `None` when `child` is not a
    /// sub-agent. Tool policy uses the parent's rules for a sub-agent.
    fn subagent_parent(&self, child: &str) -> Result<Option<String>, StoreError> {
        Ok(self.subagent(child)?.map(|link| link.parent))
    }

    /// Every sub-agent `parent` spawned, oldest (by `created_ms`) first.
    fn subagents_of(&self, parent: &str) -> Result<Vec<(String, SubagentLink)>, StoreError>;

    /// Marks a running sub-agent as stopped by its parent, atomically (compare and set);
    /// false when it was not running. Buffered.
    fn stop_subagent(&self, child: &str) -> Result<bool, StoreError>;

    /// Settles sub-agent `child` once: marks it done, removes its pending `seqs` and, when
    /// given and the child was running (not stopped), queues the parent's follow-up turn
    /// under `dedupe_key` (unless that key was seen); all atomically. Returns the follow-up's
    /// pending seq; `None` when nothing was queued (no follow-up, stopped, a duplicate, or
    /// settled before). Fails with [`StoreError::UnknownSession`] for a child with no link.
    /// Durable.
    fn finish_subagent<'a>(
        &'a self,
        child: &'a str,
        seqs: &'a [u64],
        follow_up: Option<(&'a str, &'a PendingTurn)>,
    ) -> StoreFuture<'a, Option<u64>>;

    /// Remembers that session `key` replies into `to`. Buffered (it is a hint).
    fn set_target(&self, key: &str, to: &Conversation) -> Result<(), StoreError>;

    /// Where session `key` last replied, if it ever did.
    fn target(&self, key: &str) -> Result<Option<Conversation>, StoreError>;
}
