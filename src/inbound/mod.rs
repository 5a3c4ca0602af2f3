//! Inbound: session keys, commands, routing.

pub mod commands;
pub mod route;
pub mod session_key;
