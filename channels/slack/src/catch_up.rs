//! The catch-up after each (re)connection: Slack does not keep Socket Mode events for an app
//! that is not connected, so each channel and thread chela took a message from (it has a
//! cursor, see [`Intake::cursor_name`]) is read through `conversations.history` /
//! `conversations.replies` from its cursor on, and what is newer goes through the same intake
//! as live events (dedupe drops what was taken already), oldest first. Live events wait for
//! it, at most until [`HOLD`] after it started (Slack wants an acknowledgement within 3 s),
//! so a conversation's older messages mostly go first.
//!
//! Bounded: at most [`MAX_CHATS`] channels and threads, the most recently active first
//! (thread cursors older than [`WINDOW`] are no longer read); up to [`MAX_PAGES`] pages of
//! [`PER_PAGE`] messages each (past that a warning says what was left); nothing older than
//! [`WINDOW`]; each Web API call [`crate::api::CALL_TIMEOUT`], a rate limit waited out a few
//! times; the whole pass [`DEADLINE`]. At the first message of a chat the sink refuses, that
//! chat is read no further and its cursor stays below the message (see [`crate::hold`]), so
//! the next catch-up reads it again. A reconnect while a catch-up runs makes it run once
//! more when done. A DM nobody wrote before cannot be found (chela keeps no list of a bot's
//! DMs).

mod plan;
mod read;
mod reads;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::intake::Intake;
use crate::state::State;

pub use plan::{Chat, Plan};
pub use read::Tally;

/// How far back the catch-up reads.
pub const WINDOW: Duration = crate::hold::HOLD_MAX;
/// Messages asked for per page.
pub const PER_PAGE: u16 = 100;
/// Pages read per channel or thread at most.
pub const MAX_PAGES: usize = 10;
/// Channels and threads read at most (from their cursors).
pub const MAX_CHATS: usize = 500;
/// How long live events wait for a catch-up at most, counted from its start.
pub const HOLD: Duration = Duration::from_secs(2);
/// How long one catch-up pass may take; what it did not read waits for the next one.
pub const DEADLINE: Duration = Duration::from_secs(5 * 60);

/// Starts a catch-up in the background, unless one runs (that one then runs once more).
pub fn start(intake: &Intake) {
    if !intake.state.catch_up().begin() {
        tracing::debug!("a Slack catch-up runs; it goes again once done");
        return;
    }
    let end = EndCatchUp::new(intake.state.clone());
    let intake = intake.clone();
    tokio::spawn(run(intake, end));
}

/// Runs passes until no reconnect asked for another, each bounded by [`DEADLINE`].
async fn run(intake: Intake, mut end: EndCatchUp) {
    loop {
        if tokio::time::timeout(DEADLINE, pass(&intake)).await.is_err() {
            tracing::warn!(
                deadline_s = DEADLINE.as_secs(),
                "the Slack catch-up ran out of time; the next one reads what it did not"
            );
        }
        if !end.again() {
            return;
        }
    }
}

/// One pass: every chat with a cursor, read and taken.
pub async fn pass(intake: &Intake) -> Tally {
    let prefix = intake.cursor_prefix();
    let cursors = intake.sink.cursors(&prefix).await;
    let floor = now_micros().saturating_sub(micros(WINDOW));
    let plan = Plan::of(&prefix, cursors, floor);
    // Before anything is read: a reply taken meanwhile (live, or a broadcast one in a
    // channel's history) in a thread the bot is in needs no mention.
    for (channel, thread) in plan.threads.iter().rev() {
        intake.state.remember_thread(channel, thread);
    }
    let mut reader = read::Reader::new(intake, floor, &plan);
    for chat in &plan.chats {
        reader.chat(chat).await;
    }
    let tally = reader.tally;
    tally.report();
    tally
}

/// Ends the catch-up when dropped: made right after the gate opened and moved into the
/// task, so the catch-up ends however the task does (done, a panic, an abort, or dropped
/// before it ever ran) and live events never wait on one that is gone.
pub struct EndCatchUp {
    state: Arc<State>,
    ended: bool,
}

impl EndCatchUp {
    /// The guard of the catch-up `state`'s gate just began.
    pub fn new(state: Arc<State>) -> EndCatchUp {
        EndCatchUp {
            state,
            ended: false,
        }
    }

    /// After a pass: whether to make another (a reconnect asked for one); else the
    /// catch-up has ended.
    pub fn again(&mut self) -> bool {
        if self.state.catch_up().pass_done() {
            return true;
        }
        self.ended = true;
        false
    }
}

impl Drop for EndCatchUp {
    fn drop(&mut self) {
        if !self.ended {
            self.state.catch_up().end();
        }
    }
}

/// A duration in µs (a cursor's unit).
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_catch_up_whose_task_is_gone_ends() {
        let state = Arc::new(State::default());
        assert!(state.catch_up().begin());
        let end = EndCatchUp::new(state.clone());
        let task = tokio::spawn(async move {
            let _end = end;
            std::future::pending::<()>().await;
        });
        tokio::task::yield_now().await;
        assert!(state.catch_up().running());
        task.abort();
        let _ = task.await;
        assert!(!state.catch_up().running(), "aborted: ended");

        assert!(state.catch_up().begin());
        let end = EndCatchUp::new(state.clone());
        let task = tokio::spawn(async move {
            let _end = end;
            panic!("a bug in the catch-up");
        });
        assert!(task.await.is_err());
        assert!(!state.catch_up().running(), "panicked: ended");
    }

    #[test]
    fn a_guard_that_finished_does_not_end_a_later_catch_up() {
        let state = Arc::new(State::default());
        assert!(state.catch_up().begin());
        let mut end = EndCatchUp::new(state.clone());
        assert!(!state.catch_up().begin(), "a reconnect meanwhile");
        assert!(end.again(), "so another pass");
        assert!(!end.again(), "then done");
        assert!(state.catch_up().begin(), "the next reconnect's");
        drop(end);
        assert!(state.catch_up().running(), "not ended by the old guard");
    }
}
