//! The end-to-end tests, one binary so the library is linked once: each file is a module
//! (`cargo test --all-features --test e2e cli::` runs `cli.rs`). They run the real `chela`
//! binary or the library's gateway over real sockets against the test kit's fakes
//! (`tests/kit`), a throwaway PostgreSQL (`scripts/with-pg.sh`) and headless Chromium; the helpers they share
//! are in `tests/common`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod acp_client;
mod acp_discord;
mod acp_media;
mod acp_spawn_tool;
mod acp_telegram;
mod acp_terminal;
mod agent;
mod agents;
mod browser;
mod chat;
mod chat_cli;
mod chat_tty;
mod cli;
mod cluster;
mod cluster_acp;
mod cluster_discord;
mod cluster_lapse;
mod cluster_nodes;
mod compaction;
mod config;
mod confine;
mod cron;
mod cron_cli;
mod discord_buttons;
mod discord_channels;
mod discord_resilience;
mod discord_restart;
mod discord_shards;
mod discord_slash;
mod docs;
mod doctor;
mod durability;
mod fallbacks;
mod hooks;
mod import;
mod mcp_serve;
mod mcp_tools;
mod media;
mod media_out;
mod memory;
mod message_actions;
mod metrics;
mod model_command;
mod panel;
mod postgres;
mod queue;
mod rpc;
mod sandbox;
mod secrets;
mod session_tools;
mod skills;
mod slack;
mod slack_catch_up;
mod store_rollback;
mod subagent;
mod telegram_buttons;
mod telegram_dm;
mod telegram_groups;
mod telegram_intake;
mod telegram_load;
mod telegram_pairing;
mod telegram_smoke;
mod telegram_storm;
mod telegram_webhook;
mod thinking;
mod tool_policy;
mod voice;
mod web;
mod web_tools;
