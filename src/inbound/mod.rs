//! Inbound: session keys, commands, routing.

pub mod admission;
pub mod attachments;
pub mod commands;
pub mod route;
