//! Inbound: session keys, commands, routing.

pub mod session_key;
