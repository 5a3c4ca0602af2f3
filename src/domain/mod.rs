//! The domain types every layer shares, at the bottom of the crate: they import nothing
//! of chela's own above them.
//!
//! - [`session_key`]: the session key grammar (SPEC 1.2): builder, parser, storage names.
//! - [`message`]: the conversation model (transcript schema v4) and the clock (`now_ms`).
//! - [`events`]: the typed event stream of a run (the run bus's payload).
//! - [`run`]: how a run ended, its finished record, its id and its live events.
//! - [`deadline`]: deadlines that saturate instead of overflowing the clock.
//! - [`schedule`]: when scheduled jobs run: cron in a time zone, one-shot times, intervals.
//! - [`text`]: excerpts of user input for answers, blank-message detection.

pub mod deadline;
pub mod events;
pub mod message;
pub mod run;
pub mod schedule;
pub mod session_key;
pub mod text;
