//! One turn: the run's events go on the bus and into the chat, chela's agent or the bound
//! coding agent runs it, and it settles.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Handles, RunnerPort};
use crate::agent::run::{RunOutcome, RunRequest, RunStatus, Steer};
use crate::delivery::journal::RunJournal;
use crate::domain::events::RunEvent;
use crate::domain::run::{RunRecord, run_id_for};
use crate::lane::QueuedTurn;
use crate::reply::{Streamed, stream_events};

/// Events buffered between a run and its reply stream.
const EVENT_BUFFER: usize = 256;

/// One turn: the run's events go on the bus (the reply and the RPC's subscribers), the run
/// settles, and its record ends the bus.
pub(super) async fn run_turn(
    handles: &Arc<Handles>,
    port: Arc<dyn RunnerPort>,
    key: String,
    turn: QueuedTurn,
    cancel: CancellationToken,
    steer: mpsc::Receiver<Box<Steer>>,
) -> RunOutcome {
    let run_id = run_id_for(&turn.seqs);
    if answered_elsewhere(handles, port.as_ref(), &key, &turn) {
        tracing::info!(run_id = %run_id, "cluster: the turn was answered by another run; not run again");
        return not_run(steer);
    }
    tracing::debug!(run_id = %run_id, "run starts");
    let started_ms = crate::domain::message::now_ms();
    remember_target(handles, &key, &turn.target);
    let (reply, reply_tx) = start_reply(handles, port.as_ref(), &key, &run_id, &turn);
    let bus = super::live::tee(run_id.clone(), key.clone(), handles.live.clone(), reply_tx);
    let prepared = super::media::prepare(handles, &key, &turn, &cancel).await;
    let steer_files = super::media::SteerDownloads {
        handles: Arc::downgrade(handles),
        key: key.clone(),
        target: turn.target.clone(),
        cancel: cancel.clone(),
    };
    let request = RunRequest {
        session_key: key.clone(),
        run_id: run_id.clone(),
        text: prepared.text,
        media: prepared.media,
        cancel,
        steer,
        steer_files: Some(Arc::new(steer_files)),
        events: bus.events.clone(),
        reply_to: Some(turn.target.clone()),
    };
    // A conversation bound to a coding agent talks to it; every other one to chela's agent.
    let outcome = if handles.acp.binding(&key).is_some() {
        handles.acp.run(request).await
    } else {
        handles.agents.for_key(&key).run(request).await
    };
    crate::metrics::global().run_ended(outcome_label(&outcome.status));
    let mut seqs = turn.seqs.clone();
    seqs.extend(&outcome.steered_seqs);
    let record = RunRecord {
        run_id: run_id.clone(),
        seqs: seqs.clone(),
        session_key: key.clone(),
        status: outcome.status.clone(),
        text: outcome.text.clone(),
        started_ms,
        ended_ms: crate::domain::message::now_ms(),
        usage: outcome.usage,
        context_tokens: outcome.context_tokens,
        cost_usd: outcome.cost_usd,
    };
    super::settle::settle(handles, port, &key, &turn, &record, &outcome, reply).await;
    bus.finish(record).await;
    outcome
}

/// On a cluster, whether none of `turn`'s messages is pending any more: another run
/// answered it (its partition moved away and back while the turn waited in this lane), so
/// running it again would answer twice. Unknown counts as pending: the store's settle
/// refuses a second final all the same.
fn answered_elsewhere(
    handles: &Handles,
    port: &dyn RunnerPort,
    key: &str,
    turn: &QueuedTurn,
) -> bool {
    if port.still_held(key).is_none() || turn.seqs.is_empty() {
        return false;
    }
    turn.seqs
        .iter()
        .all(|seq| matches!(handles.store.is_pending(*seq), Ok(false)))
}

/// The outcome of a turn not run: aborted, with every steer it was handed left over (the
/// lane queues them again).
fn not_run(mut steer: mpsc::Receiver<Box<Steer>>) -> RunOutcome {
    steer.close();
    let mut leftover = Vec::new();
    while let Ok(s) = steer.try_recv() {
        leftover.push(*s);
    }
    RunOutcome {
        status: RunStatus::Aborted,
        text: String::new(),
        steered_seqs: Vec::new(),
        leftover,
        usage: Default::default(),
        context_tokens: 0,
        cost_usd: None,
    }
}

/// The `chela_runs_total` outcome of a run that ended with `status`.
fn outcome_label(status: &RunStatus) -> crate::metrics::RunOutcome {
    use crate::metrics::RunOutcome;
    match status {
        RunStatus::Ok => RunOutcome::Ok,
        RunStatus::Aborted | RunStatus::Error(crate::domain::run::RunError::ShuttingDown) => {
            RunOutcome::Cancelled
        }
        RunStatus::Error(crate::domain::run::RunError::TimedOut(_)) => RunOutcome::TimedOut,
        RunStatus::Error(_) => RunOutcome::Error,
    }
}

/// Remembers where session `key` replies (for the `message` tool's other sessions, its
/// scheduled jobs and its approvals). Not a sub-agent's internal conversation; and an RPC
/// call's only for a session that answers in no chat: a turn sent through the RPC into a
/// chat's session (`chela agent --session`) leaves it answering in its chat, not in the RPC,
/// which shows a run only to whoever waits on it.
fn remember_target(handles: &Handles, key: &str, to: &chela_channel::Conversation) {
    if to.channel == super::INTERNAL_CHANNEL {
        return;
    }
    if to.channel == crate::inbound::route::RPC_CHANNEL {
        let in_a_chat = handles.store.target(key).ok().flatten();
        if in_a_chat.is_some_and(|t| t.channel != crate::inbound::route::RPC_CHANNEL) {
            return;
        }
    }
    if let Err(e) = handles.store.set_target(key, to) {
        tracing::warn!(error = %e, "cannot remember the session's conversation");
    }
}

/// Starts the reply of `turn`'s run, if its channel runs: the task streaming the run's
/// events into the chat, and the sender feeding it.
fn start_reply(
    handles: &Handles,
    port: &dyn RunnerPort,
    key: &str,
    run_id: &str,
    turn: &QueuedTurn,
) -> (Option<JoinHandle<Streamed>>, Option<mpsc::Sender<RunEvent>>) {
    let Some(channel) = handles.notices.channel(&turn.target.channel) else {
        return (None, None);
    };
    let (reply_tx, events_rx) = mpsc::channel(EVENT_BUFFER);
    // A durable turn journals what its reply sends, so a restart can take it back.
    let journal = (!turn.seqs.is_empty()).then(|| {
        RunJournal::shared(
            handles.store.clone(),
            run_id.to_owned(),
            turn.target.clone(),
            port.still_held(key),
        )
    });
    let (outbox, to) = (handles.notices.outbox().clone(), turn.target.clone());
    let (quote, accepted_ms) = (turn.quote.clone(), turn.queued_ms);
    let task = tokio::spawn(async move {
        // The conversation's earlier finals go first: this reply's previews must not show
        // above the answer before it, however long those finals are retried (until their
        // ttl). Only the previews wait: the run's end does not, so delivery never holds the
        // lane, and a reply whose previews waited throughout is sent whole as its final.
        let earlier = outbox.settled(&to);
        stream_events(
            channel,
            to.clone(),
            quote,
            journal,
            events_rx,
            accepted_ms,
            earlier,
        )
        .await
    });
    (Some(task), Some(reply_tx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::run::RunError;
    use crate::metrics::RunOutcome;

    #[test]
    fn runs_are_counted_by_a_small_set_of_outcomes() {
        assert_eq!(outcome_label(&RunStatus::Ok), RunOutcome::Ok);
        assert_eq!(outcome_label(&RunStatus::Aborted), RunOutcome::Cancelled);
        let error = |e| outcome_label(&RunStatus::Error(e));
        assert_eq!(error(RunError::ShuttingDown), RunOutcome::Cancelled);
        assert_eq!(error(RunError::TimedOut(600)), RunOutcome::TimedOut);
        assert_eq!(error(RunError::Model("500".into())), RunOutcome::Error);
        assert_eq!(error(RunError::ToolRounds(50)), RunOutcome::Error);
    }
}
