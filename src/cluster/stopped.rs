//! What stopping a session did, wherever it runs.

use crate::lane::{LaneError, StopReport};

/// What stopping a session did.
#[derive(Debug)]
pub enum Stopped {
    /// This node runs the session (or runs every session): what the stop did here, and how
    /// many sub-agents it stopped.
    Here(Result<StopReport, LaneError>, usize),
    /// Node `.0` runs it: what it did there (`None`: it did not confirm in time).
    There(String, Option<Result<(StopReport, usize), LaneError>>),
    /// No node holds the session now: nothing of it runs (its queued turns, if any, run
    /// once a node takes it).
    Nowhere,
    /// Which node runs the session could not be read (the database could not be
    /// reached): nothing was stopped.
    Unknown,
    /// The stop could not be handed to node `.0`, which runs the session: nothing was
    /// stopped. `.1`: the node refused it as busy; else the call could not be sent (the
    /// database could not be reached).
    NotHanded(String, bool),
}
