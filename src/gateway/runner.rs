//! The gateway's [`Runner`]: an agent run whose events stream into the chat, with the final
//! reply recorded in the outbox (and the turn's pending entries cleared) and handed to the
//! outbox worker, which delivers it without holding the session's lane.

use std::sync::Arc;

use chela_channel::Conversation;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Core, RunRecord};
use crate::agent::provider::BoxFuture;
use crate::agent::run::{RunOutcome, RunRequest, RunStatus, Steer};
use crate::delivery::Delivery;
use crate::delivery::files::{self, FinalFiles};
use crate::delivery::journal::{Holds, RunJournal, forget};
use crate::domain::events::RunEvent;
use crate::lane::{QueuedTurn, Runner};
use crate::reply::{Streamed, stream_events};
use crate::store::StoreError;

/// Events buffered between a run and its reply stream.
const EVENT_BUFFER: usize = 256;

/// Runs turns through the agent and delivers their replies.
pub struct AgentRunner {
    /// The core the runner belongs to (weak: the core owns the lanes that own the runner).
    core: std::sync::Weak<Core>,
}

impl AgentRunner {
    /// A runner for the core being built (`Arc::new_cyclic`).
    pub fn new(core: std::sync::Weak<Core>) -> Self {
        AgentRunner { core }
    }

    fn core(&self) -> Option<Arc<Core>> {
        self.core.upgrade()
    }
}

impl Runner for AgentRunner {
    fn run(
        &self,
        key: String,
        turn: QueuedTurn,
        cancel: CancellationToken,
        steer: mpsc::Receiver<Box<Steer>>,
    ) -> BoxFuture<'static, RunOutcome> {
        let core = self.core();
        Box::pin(async move {
            let Some(core) = core else {
                return RunOutcome {
                    status: RunStatus::Error(crate::domain::run::RunError::ShuttingDown),
                    text: String::new(),
                    steered_seqs: Vec::new(),
                    leftover: Vec::new(),
                    usage: Default::default(),
                };
            };
            let span = tracing::info_span!("run", session = %key);
            run_turn(&core, key, turn, cancel, steer)
                .instrument(span)
                .await
        })
    }

    fn notice(&self, to: &chela_channel::Conversation, text: String) {
        if let Some(core) = self.core() {
            let to = to.clone();
            tokio::spawn(async move { core.say(&to, &text).await });
        }
    }

    fn waiting(&self, turn: &QueuedTurn) -> BoxFuture<'static, std::convert::Infallible> {
        let channel = self
            .core()
            .and_then(|core| core.channel(&turn.target.channel));
        let to = turn.target.clone();
        Box::pin(async move {
            match channel {
                Some(channel) => crate::reply::keep_typing(channel, to).await,
                None => std::future::pending().await,
            }
        })
    }

    /// Ends the dropped turns on the bus as runs that were stopped before they ran, so
    /// `agent.wait` and `events.subscribe` learn it at once.
    fn dropped(&self, key: &str, seqs: &[u64]) {
        let (Some(core), false) = (self.core(), seqs.is_empty()) else {
            return;
        };
        let now = crate::domain::message::now_ms();
        let record = RunRecord {
            run_id: run_id_for(seqs),
            seqs: seqs.to_vec(),
            session_key: key.to_owned(),
            status: RunStatus::Aborted,
            text: String::new(),
            started_ms: now,
            ended_ms: now,
        };
        let event = crate::domain::events::LiveEvent {
            run_id: record.run_id.clone(),
            session_key: key.to_owned(),
            seq: 1,
            event: crate::domain::events::RunEvent::Finished(Box::new(record)),
        };
        // No subscriber is no error: nobody waits.
        let _ = core.live.send(event);
    }
}

pub use crate::domain::run::{run_id_for, seq_of_run_id};

/// One turn: the run's events go on the bus (the reply and the RPC's subscribers), the run
/// settles, and its record ends the bus.
async fn run_turn(
    core: &Arc<Core>,
    key: String,
    turn: QueuedTurn,
    cancel: CancellationToken,
    steer: mpsc::Receiver<Box<Steer>>,
) -> RunOutcome {
    let run_id = run_id_for(&turn.seqs);
    tracing::debug!(run_id = %run_id, "run starts");
    let started_ms = crate::domain::message::now_ms();
    remember_target(core, &key, &turn.target);
    let (reply, reply_tx) = start_reply(core, &key, &run_id, &turn);
    let bus = super::live::tee(run_id.clone(), key.clone(), core.live.clone(), reply_tx);
    let prepared = super::media::prepare(core, &key, &turn, &cancel).await;
    let steer_files = super::media::SteerDownloads {
        core: Arc::downgrade(core),
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
    let outcome = if core.acp.binding(&key).is_some() {
        core.acp.run(request).await
    } else {
        core.agents.for_key(&key).run(request).await
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
    };
    settle(core, &key, &turn, &record, &outcome, reply).await;
    bus.finish(record).await;
    outcome
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

/// Remembers where session `key` replies (for the `message` tool's other sessions).
fn remember_target(core: &Core, key: &str, to: &chela_channel::Conversation) {
    let internal = to.channel == super::subagent::INTERNAL_CHANNEL;
    if !internal && let Err(e) = core.store.set_target(key, to) {
        tracing::warn!(error = %e, "cannot remember the session's conversation");
    }
}

/// Starts the reply of `turn`'s run, if its channel runs: the task streaming the run's
/// events into the chat, and the sender feeding it.
fn start_reply(
    core: &Core,
    key: &str,
    run_id: &str,
    turn: &QueuedTurn,
) -> (Option<JoinHandle<Streamed>>, Option<mpsc::Sender<RunEvent>>) {
    let Some(channel) = core.channel(&turn.target.channel) else {
        return (None, None);
    };
    let (reply_tx, events_rx) = mpsc::channel(EVENT_BUFFER);
    // A durable turn journals what its reply sends, so a restart can take it back.
    let journal = (!turn.seqs.is_empty()).then(|| {
        RunJournal::shared(
            core.store.clone(),
            run_id.to_owned(),
            turn.target.clone(),
            holds(core, key),
        )
    });
    let (outbox, to) = (core.outbox.clone(), turn.target.clone());
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

/// Whether this node still holds session `key` (see [`RunJournal::shared`]); `None` when it
/// always does.
fn holds(core: &Core, key: &str) -> Option<Holds> {
    core.placement.still_held(key)
}

/// Settles a finished run: its final is recorded in the outbox (its pending entries cleared
/// in the same step) and handed to the outbox worker; a sub-agent's goes to its parent.
async fn settle(
    core: &Arc<Core>,
    key: &str,
    turn: &QueuedTurn,
    record: &RunRecord,
    outcome: &RunOutcome,
    reply: Option<JoinHandle<Streamed>>,
) {
    let run_id = &record.run_id;
    if core.shutdown.is_cancelled() && outcome.status == RunStatus::Aborted {
        // Shutdown, not /stop: the turn stays pending and runs again at the next start
        // (its previews are taken back then); no preview goes out after this.
        if let Some(reply) = reply {
            reply.abort();
        }
        return;
    }
    // A sub-agent replies to its parent session, not to a chat.
    if let Ok(Some(link)) = core.store.subagent(key) {
        if let Some(reply) = reply {
            reply.abort();
        }
        // Its turns leave the queue with the hand-over to the parent: the record goes first.
        if let Err(e) = core.store.keep_run_record(record) {
            tracing::warn!(error = %e, "cannot keep a sub-agent run's record");
        }
        super::subagent::finish(core, key, link, turn, outcome).await;
        forget(&core.store, run_id);
        return;
    }
    let streamed = match reply {
        Some(handle) => handle.await.ok(),
        None => None,
    };
    let Some(streamed) = streamed else {
        if turn.target.channel == super::subagent::INTERNAL_CHANNEL {
            tracing::info!(
                "the session has no chat to reply to; its reply stays in its transcript"
            );
            forget(&core.store, run_id);
        } else {
            tracing::error!(channel = %turn.target.channel, "no channel to reply on; reply dropped");
        }
        let keep = keeps_record(turn, record);
        // Settling is idempotent: when the answer was lost (a connection dropped during
        // COMMIT), once more, after the store reconnected (its calls wait for that).
        let mut finished = core.store.finish_run(record, keep).await;
        if !matches!(finished, Ok(()) | Err(StoreError::NotOwner { .. })) {
            finished = core.store.finish_run(record, keep).await;
        }
        if let Err(e) = finished {
            tracing::error!(error = %e, "cannot settle a run whose reply goes nowhere; it runs again at the next start");
        }
        return;
    };
    // What the `message` tool already sent here is not said again.
    let text = streamed.final_text();
    // A heartbeat with nothing to report sends nothing (its preview, if any, is deleted),
    // unless someone's message was steered into its run: that one gets its answer.
    let quiet = turn.scheduled
        && turn.sender == crate::cron::HEARTBEAT_SENDER
        && record.seqs == turn.seqs
        && crate::cron::is_heartbeat_ok(&text);
    let text = match quiet {
        true => crate::reply::stream::NO_REPLY.to_owned(),
        false => text,
    };
    // File lines of the answer are checked now: what the outbox reads as one was allowed.
    let text = files::check_final(final_files(core, key, &turn.target), text).await;
    // Once the final is durable the lane is free: the outbox worker delivers it.
    let keep = keeps_record(turn, record);
    let settled = match core
        .store
        .settle_turn(record, keep, &turn.target, &text)
        .await
    {
        Ok(id) => Some(id),
        Err(e) => {
            let done = super::settle_again::Final {
                record,
                keep_record: keep,
                to: &turn.target,
                text: &text,
            };
            super::settle_again::recorded_after(&core.store, &e, &done).await
        }
    };
    if let Some(id) = settled {
        core.outbox.submit(Delivery {
            id,
            session_key: key.to_owned(),
            to: turn.target.clone(),
            text,
            created_ms: crate::domain::message::now_ms(),
            run_id: Some(run_id.clone()),
            stream: Some(streamed.reply),
            take_back: None,
        });
    }
}

/// What the file lines of session `key`'s final into `to` are checked against: the channel's
/// limit, and the session's tool policy (a conversation that may not use `message` sends no
/// file through its answer either, README "Files from the agent").
fn final_files(core: &Core, key: &str, to: &Conversation) -> FinalFiles {
    let channel = core.channel(&to.channel);
    FinalFiles {
        policy: core.outbox.files().for_session(key),
        channel: to.channel.clone(),
        max_bytes: channel.and_then(|c| c.max_file_bytes()),
        may_send: core
            .agents
            .for_key(key)
            .allowed_for(key, Some(to))
            .allows("message"),
        own_media: format!("media/{}", super::media::safe_key(key)),
    }
}

/// Whether the store keeps the record of `turn`'s run: for messages sent through the RPC's
/// `agent`, whose callers wait with `agent.wait` (also after the end, or a restart), and for
/// any run that answered several messages (steered or merged ones may have come through the
/// RPC). A single chat message's run is told on the bus alone: no store space.
fn keeps_record(turn: &QueuedTurn, record: &RunRecord) -> bool {
    turn.target.channel == crate::rpc::channel::NAME || record.seqs.len() > 1
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
