//! The agent run: context, model streaming, tools, events.

pub mod events;
pub mod message;
pub mod provider;
pub mod tools;
