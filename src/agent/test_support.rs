//! Test support shared by the agent's run tests.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::run::{Agent, RunOutcome, RunRequest};
use crate::domain::events::RunEvent;

/// Runs `text` in session `key` of `agent`, nobody steering, and collects the run's events.
pub(crate) async fn run_collecting(
    agent: &Agent,
    key: &str,
    text: &str,
) -> (RunOutcome, Vec<RunEvent>) {
    let (_steer_tx, steer) = mpsc::channel(4);
    let (events, mut rx) = mpsc::channel(10_000);
    let outcome = agent
        .run(RunRequest {
            session_key: key.into(),
            run_id: String::new(),
            text: text.into(),
            media: Vec::new(),
            cancel: CancellationToken::new(),
            steer,
            steer_files: None,
            events,
            reply_to: None,
        })
        .await;
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        seen.push(e);
    }
    (outcome, seen)
}
