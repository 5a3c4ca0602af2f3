//! chela: a chat-platform gateway for AI agents.
//!
//! Module map:
//! - [`config`]: `config.toml` -> typed [`config::Config`]; `${ENV}` substitution; errors name the key.
//! - [`gateway`]: the composition root: store, agent, lanes, router, channels, recovery, shutdown.
//! - [`inbound`]: session keys, command parsing and routing of normalized messages.
//! - [`lane`]: one FIFO lane per session, the global run limit, the four queue modes.
//! - [`agent`]: the run: message model, context, provider streaming, tools, typed events.
//! - [`reply`]: run events -> chat: preview edits, splitting, pacing, typing, finals.
//! - [`rpc`]: the gateway API over WebSocket (agent, agent.wait, abort, sessions, status, events).
//! - [`sandbox`]: what the agent's processes reach: scrubbed env, process groups, Landlock.
//! - [`store`]: the sled store: typed trees, transcripts, pending queue, outbox, JSONL export/import.

pub mod acp;
pub mod agent;
pub mod config;
pub mod gateway;
pub mod inbound;
pub mod lane;
pub mod reply;
pub mod rpc;
pub mod sandbox;
pub mod store;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod test_channel;
