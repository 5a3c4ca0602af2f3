//! ACP: external coding agents (Codex, Claude Code, Gemini, OpenCode, pi) driven over the Agent
//! Client Protocol and bound to chat threads (SPEC 4).
//!
//! - [`client`]: one connection to one agent process, on the official crate.
//! - [`process`]: the agent's process group.
//! - [`updates`]: `session/update` notifications to run events.
//! - [`permission`]: permission modes and choosing options by kind.
//! - [`fs`]: the confined file service offered to agents.

pub mod client;
pub mod fs;
pub mod permission;
pub mod process;
pub mod updates;

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
    /// The agent did not answer `session/cancel` in time.
    #[error("{harness} did not stop when asked; it was shut down")]
    CancelTimeout {
        /// Harness name.
        harness: String,
    },
}
