//! chela: a chat-platform gateway for AI agents.
//!
//! Module map:
//! - [`config`]: `config.toml` -> typed [`config::Config`]; `${ENV}` substitution; errors name the key.
//! - [`inbound`]: session keys, the command fast path and routing of normalized messages.
//! - [`agent`]: the run: message model, provider streaming, tools, the typed event stream.
//! - [`store`]: the sled store: typed trees, transcripts, JSONL export/import.

pub mod agent;
pub mod config;
pub mod inbound;
pub mod store;
