//! Conformance against third-party code, one binary: the Telegram and Discord emulators
//! from npm (`telegram.rs`, `discord.rs`), real ACP coding agents (`acp.rs`), the reference MCP filesystem server (`mcp.rs`) and pi's own
//! session loader (`pi.rs`), each pinned by the lockfile of its folder here
//! (`scripts/test.sh` installs them). `cargo test --all-features --test conformance telegram::` runs
//! one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod acp;
mod discord;
mod mcp;
mod pi;
mod telegram;
