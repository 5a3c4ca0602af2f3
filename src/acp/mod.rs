//! ACP: external coding agents (Codex, Claude Code, Gemini, OpenCode, pi) driven over the Agent
//! Client Protocol and bound to chat threads (SPEC 4).
//!
//! - [`manager`]: bindings and their warm agent processes; runs bound turns.
//! - [`coding_agent`]: the [`CodingAgent`] trait the rest of chela uses.
//! - [`client`]: one connection to one agent process, on the official crate.
//! - [`command`]: parsing `/acp` and `/session`.
//! - [`harness`]: the registry of coding agents and whether each is installed.
//! - [`process`]: the agent's process group.
//! - [`updates`]: `session/update` notifications to run events.
//! - [`permission`]: permission modes and choosing options by kind.
//! - [`media`]: pictures of chat messages as image blocks, or as files in the agent's folder.
//! - [`fs`]: the confined file service offered to agents.
//! - [`terminal`]: the PTY-backed terminal service offered to agents.

pub mod client;
pub mod coding_agent;
pub mod command;
pub mod fs;
pub mod harness;
pub mod manager;
pub mod mcp_servers;
pub mod media;
pub mod permission;
pub mod process;
pub mod terminal;
pub mod updates;

pub use coding_agent::CodingAgent;
pub use manager::{AcpManager, SpawnSpec};

/// Why an ACP operation failed. Messages are short and safe to show in chat.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AcpError {
    /// No harness has this name.
    #[error("no coding agent named {0:?} (see `chela acp agents`)")]
    UnknownHarness(String),
    /// The agent process could not be started.
    #[error("cannot start {harness}: {reason}")]
    Spawn {
        /// Harness name.
        harness: String,
        /// What went wrong.
        reason: String,
    },
    /// The agent process ended unexpectedly.
    #[error("{harness} exited unexpectedly ({exit})")]
    Crashed {
        /// Harness name.
        harness: String,
        /// How it ended.
        exit: String,
    },
    /// The agent answered with an error or broke the protocol.
    #[error("{harness} failed: {reason}")]
    Protocol {
        /// Harness name.
        harness: String,
        /// The agent's error.
        reason: String,
    },
    /// The agent does not offer something chela needs.
    #[error("{harness} does not support {what}")]
    Unsupported {
        /// Harness name.
        harness: String,
        /// The missing method.
        what: &'static str,
    },
    /// The conversation is not bound to a coding agent.
    #[error("this conversation is not bound to a coding agent")]
    NotBound(String),
    /// The store failed.
    #[error("cannot save the binding: {0}")]
    Store(String),
    /// The agent did not answer `session/cancel` in time.
    #[error("{harness} did not stop when asked; it was shut down")]
    CancelTimeout {
        /// Harness name.
        harness: String,
    },
}
