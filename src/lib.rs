//! chela: a chat-platform gateway for AI agents.
//!
//! Module map, in layers: each module uses only the ones listed below it (checked by
//! `tests/layers.rs`; `ARCHITECTURE.md` draws the picture).
//! - [`gateway`]: the composition root: builds the store, agents, lanes, channels and the
//!   stages below, implements their ports, recovers, shuts down.
//! - [`rpc`]: the gateway API over WebSocket, through the narrow port [`rpc::api::GatewayApi`].
//! - [`reach`]: the agent's tools that act past their own session (other sessions,
//!   sub-agents and coding agents spawned, jobs), under one reach rule.
//! - [`commands`]: the command fast path, through the narrow port [`commands::CommandContext`].
//! - [`runner`]: one turn: the agent or a coding agent, its files, its reply, settling.
//! - [`cron`]: scheduled jobs: the scheduler, the rules of jobs, the heartbeat; runs queue
//!   through intake's port ([`cron::Fire`]).
//! - [`intake`]: carries out the router's decisions: admission, group context, commands, the
//!   durable queue ([`intake::Router`] is every channel's sink).
//! - [`delivery`]: the outbox worker (finals per chat, in order, retried), outgoing files, the
//!   reply journal.
//! - [`cluster`]: where a session runs ([`cluster::Placement`]: one node, or the partitions a
//!   node of several leases), calls between nodes, the event relay, leased intakes.
//! - [`inbound`]: admission, command parsing and routing as a decision ([`inbound::route::route`]).
//! - [`reply`]: run events -> chat: preview edits, splitting, pacing, typing, finals.
//! - [`lane`]: one FIFO lane per session, the global run limit, the four queue modes.
//! - [`acp`]: coding agents over ACP: the client, bindings and their processes.
//! - [`agent`]: the run: context, provider streaming, tools, skills, hooks, compaction.
//! - [`mcp`]: the MCP client: `[mcp.servers]` kept running, their tools offered to the agent.
//! - [`sandbox`]: what the agent's processes reach: scrubbed env, process groups, Landlock.
//! - [`store`]: the store behind ports: redb (the default), sled (selectable) or PostgreSQL;
//!   transcripts, pending queue, outbox, JSONL export/import.
//! - [`config`]: `config.toml` -> typed [`config::Config`]; `${ENV}` substitution; errors name the key.
//! - [`domain`]: the shared types at the bottom: session keys, messages, run events and records.
//! - [`metrics`]: the process's counters, histograms and scrape-time gauges (`/metrics`).
//!
//! The behaviour these modules implement is specified in `docs/spec.md` (cited as "SPEC n.m").

pub mod acp;
pub mod agent;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod cron;
pub mod delivery;
pub mod domain;
pub mod gateway;
pub mod inbound;
pub mod intake;
pub mod lane;
pub mod mcp;
pub mod metrics;
pub mod questions;
pub mod reach;
pub mod reply;
pub mod rpc;
pub mod runner;
pub mod sandbox;
pub mod store;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod test_channel;
