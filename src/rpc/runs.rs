//! `agent.wait`: a waiter subscribes to the run bus, then looks in the store: a message still
//! pending is waited for until its run's `Finished` comes on the bus (the record is in it); a
//! message sent through the RPC's `agent` keeps its run's record in the store
//! (`QueueStore::finished_run`, written in the same step that removes it from the pending
//! queue), so a wait that starts after the end, or after a restart, gets it too. A message
//! neither pending nor recorded is unknown at once: there is no gap between the states. The answers to
//! commands sent through `agent` (answered without a run) are remembered here, in memory, the
//! last [`KEEP`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::channel::RpcMessage;
use super::protocol::Fault;
use crate::domain::events::LiveEvent;
use crate::domain::events::RunEvent;
use crate::domain::run::RunRecord;
use crate::domain::run::RunStatus;
use crate::domain::run::seq_of_run_id;
use crate::store::Store;

/// How long the store keeps a settled run's record for `agent.wait` (pruned by the gateway's
/// housekeeping).
pub const FINISHED_KEEP: Duration = Duration::from_secs(60 * 60);

/// How many finished messages (and command answers) are remembered.
pub const KEEP: usize = 256;

/// Prefix of the ids `agent` gives to commands (answered without a run).
const COMMAND_PREFIX: &str = "cmd-";

#[derive(Default)]
struct Inner {
    /// Commands by call id: accepted at, and the answer once one was sent.
    commands: HashMap<String, (u64, Option<(String, u64)>)>,
    command_order: VecDeque<String>,
}

/// Command answers, for `agent.wait`.
#[derive(Default)]
pub struct RunTracker {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl RunTracker {
    /// A tracker fed from `messages` (the RPC conversation's answers) until `stop` fires.
    pub fn spawn(
        mut messages: broadcast::Receiver<RpcMessage>,
        stop: CancellationToken,
    ) -> Arc<RunTracker> {
        let tracker = Arc::new(RunTracker::default());
        let weak = Arc::downgrade(&tracker);
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    _ = stop.cancelled() => return,
                    message = messages.recv() => message,
                };
                match message {
                    Ok(message) => match weak.upgrade() {
                        Some(tracker) => tracker.answered(&message),
                        None => return,
                    },
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "rpc: command answers lagged");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        tracker
    }

    /// Registers a command sent through `agent` (before it is routed, so its answer cannot
    /// be missed); returns its run id.
    pub fn expect_command(&self, call_id: &str, accepted_ms: u64) -> String {
        if let Ok(mut inner) = self.inner.lock() {
            inner
                .commands
                .insert(call_id.to_owned(), (accepted_ms, None));
            inner.command_order.push_back(call_id.to_owned());
            while inner.command_order.len() > KEEP {
                if let Some(old) = inner.command_order.pop_front() {
                    inner.commands.remove(&old);
                }
            }
        }
        format!("{COMMAND_PREFIX}{call_id}")
    }

    /// Forgets a registered command (the message turned out not to be one).
    pub fn forget_command(&self, call_id: &str) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.commands.remove(call_id);
            inner.command_order.retain(|id| id != call_id);
        }
    }

    /// Takes the first message sent into a registered command's conversation as its answer.
    pub fn answered(&self, message: &RpcMessage) {
        let mut changed = false;
        if let Ok(mut inner) = self.inner.lock()
            && let Some((_, answer @ None)) = inner.commands.get_mut(&message.chat_id)
        {
            *answer = Some((message.text.clone(), crate::domain::message::now_ms()));
            changed = true;
        }
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// The answer of command `run_id` if it has one.
    fn command_result(&self, run_id: &str) -> Result<Option<Value>, Fault> {
        let inner = self
            .inner
            .lock()
            .map_err(|_| Fault::internal("run tracker unavailable"))?;
        if let Some(call_id) = run_id.strip_prefix(COMMAND_PREFIX)
            && let Some((accepted, answer)) = inner.commands.get(call_id)
        {
            return Ok(answer.as_ref().map(|(text, ended)| {
                json!({
                    "runId": run_id,
                    "status": "ok",
                    "startedAt": accepted,
                    "endedAt": ended,
                    "text": text,
                })
            }));
        }
        Err(Fault::params(format!(
            "unknown runId {run_id:?}; expected one that agent returned"
        )))
    }

    /// Waits up to `timeout` for run `run_id` to finish; `{"status":"timeout"}` then (the
    /// run goes on). A run id whose message is neither answered (its record is in `store`)
    /// nor pending is unknown, and the wait says so at once. `bus` (subscribed before the
    /// call) wakes the wait when a run finishes.
    ///
    /// With `recheck`, the store is looked at again that often too: on a node of several the
    /// run may go on another node, whose end never comes on this node's bus.
    pub async fn wait(
        &self,
        run_id: &str,
        timeout: Duration,
        store: &Store,
        bus: broadcast::Receiver<LiveEvent>,
        recheck: Option<Duration>,
    ) -> Result<Value, Fault> {
        let deadline = crate::domain::deadline::after(timeout);
        match seq_of_run_id(run_id) {
            Some(seq) => wait_run(run_id, seq, deadline, store, bus, recheck).await,
            None => self.wait_command(run_id, deadline).await,
        }
    }

    /// Waits for the answer of command `run_id`.
    async fn wait_command(
        &self,
        run_id: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Value, Fault> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(result) = self.command_result(run_id)? {
                return Ok(result);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return Ok(timed_out(run_id));
            }
        }
    }
}

/// Waits for the run answering durable message `seq`.
async fn wait_run(
    run_id: &str,
    seq: u64,
    deadline: tokio::time::Instant,
    store: &Store,
    mut bus: broadcast::Receiver<LiveEvent>,
    recheck: Option<Duration>,
) -> Result<Value, Fault> {
    let failed = |e: crate::store::StoreError| Fault::internal(e.to_string());
    // Whether this wait saw the message pending: if it then goes without a kept record, its
    // run ended while the wait's feed lagged (or it was dropped), which is not "unknown".
    let mut was_pending = false;
    loop {
        // Pending first: settling moves a seq from pending to its record in one step, so a
        // seq found not pending has its record by the time it is looked for (the other order
        // could miss both).
        let pending = store.is_pending(seq).map_err(failed)?;
        if let Some(record) = store.finished_run(seq).map_err(failed)? {
            return Ok(run_result(run_id, &record));
        }
        if !pending && was_pending {
            return Err(Fault::new(
                super::protocol::LOST_TRACK,
                format!(
                    "runId {run_id:?} is no longer queued or running, but this wait missed how it ended (its event feed lagged, or the message was dropped by /stop or abort); events.subscribe shows every run's end"
                ),
            ));
        }
        was_pending = true;
        if !pending {
            return Err(Fault::params(format!(
                "unknown runId {run_id:?}: its message is not queued or running and no run that answered it is remembered (it was never accepted, was dropped by /stop or abort, or was answered more than {} ago)",
                humantime::format_duration(FINISHED_KEEP)
            )));
        }
        // Until a run that answered `seq` finishes (or the feed lagged, or it is time to
        // look in the store again): then look again.
        loop {
            let now = tokio::time::Instant::now();
            let wake = recheck.map_or(deadline, |every| (now + every).min(deadline));
            match tokio::time::timeout_at(wake, bus.recv()).await {
                Err(_) if wake >= deadline => return Ok(timed_out(run_id)),
                Err(_) => break,
                Ok(Ok(LiveEvent {
                    event: RunEvent::Finished(record),
                    ..
                })) if record.seqs.contains(&seq) => {
                    // Settled runs end the bus; a run that did not settle (stopped by a
                    // shutdown, its turn pending for the next start) is looked at again.
                    if !store.is_pending(seq).map_err(failed)? {
                        return Ok(run_result(run_id, &record));
                    }
                    break;
                }
                Ok(Ok(_)) => {}
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => break,
                Ok(Err(broadcast::error::RecvError::Closed)) => {
                    return Err(Fault::internal("the run bus closed"));
                }
            }
        }
    }
}

/// What `agent.wait` answers when the time is up.
fn timed_out(run_id: &str) -> Value {
    json!({
        "runId": run_id,
        "status": "timeout",
        "startedAt": null,
        "endedAt": null,
    })
}

/// The status name of a run (`ok`, `error`, `aborted`).
pub fn status_name(status: &RunStatus) -> &'static str {
    match status {
        RunStatus::Ok => "ok",
        RunStatus::Aborted => "aborted",
        RunStatus::Error(_) => "error",
    }
}

/// What `agent.wait` and the `run` event say about a finished run; `asked` is the run id
/// the caller knows (another when its message was merged into a run already going).
pub fn run_result(asked: &str, record: &RunRecord) -> Value {
    let mut out = json!({
        "runId": asked,
        "session": record.session_key,
        "status": status_name(&record.status),
        "startedAt": record.started_ms,
        "endedAt": record.ended_ms,
        "text": record.text,
    });
    if asked != record.run_id {
        out["handledBy"] = Value::String(record.run_id.clone());
    }
    if let RunStatus::Error(e) = &record.status {
        out["error"] = Value::String(e.to_string());
    }
    if record.usage != crate::domain::message::Usage::default() {
        out["usage"] = json!(record.usage);
        out["contextTokens"] = json!(record.context_tokens);
    }
    if let Some(cost) = record.cost_usd {
        out["costUsd"] = json!(cost);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! On real time: the store flushes on a thread of its own, and a paused clock would jump
    //! past a wait's timeout while a test awaits that flush.

    use super::*;
    use crate::store::PendingTurn;

    fn record(seqs: &[u64], status: RunStatus) -> RunRecord {
        RunRecord {
            status,
            text: "hi".into(),
            ..RunRecord::for_test(
                &crate::domain::run::run_id_for(seqs),
                "agent:main:main",
                seqs,
            )
        }
    }

    fn chat() -> chela_channel::Conversation {
        chela_channel::Conversation {
            channel: "rpc".into(),
            account: "default".into(),
            kind: chela_channel::ChatKind::Direct,
            chat_id: "c".into(),
            thread_id: None,
        }
    }

    /// A store with `n` pending turns; their seqs.
    async fn pending(store: &Store, n: usize) -> Vec<u64> {
        let mut seqs = Vec::new();
        for i in 0..n {
            let turn = PendingTurn {
                session_key: "agent:main:main".into(),
                inbound: chela_channel::Inbound {
                    conversation: chat(),
                    sender: Default::default(),
                    message_id: format!("m{i}"),
                    text: "hello".into(),
                    reply_to: None,
                    mentioned: false,
                    timestamp_ms: 0,
                    interaction: None,
                    attachments: Vec::new(),
                },
                queued_ms: 0,
            };
            seqs.push(store.enqueue(&turn).await.unwrap());
        }
        seqs
    }

    /// Settles `record` in `store` and publishes its end on `bus`, as the runner does (an RPC
    /// message's run keeps its record).
    async fn settle(store: &Store, bus: &broadcast::Sender<LiveEvent>, record: RunRecord) {
        settle_keeping(store, bus, record, true).await;
    }

    async fn settle_keeping(
        store: &Store,
        bus: &broadcast::Sender<LiveEvent>,
        record: RunRecord,
        keep: bool,
    ) {
        store
            .settle_turn(&record, keep, &chat(), "hi")
            .await
            .unwrap();
        let _ = bus.send(LiveEvent {
            run_id: record.run_id.clone(),
            session_key: record.session_key.clone(),
            seq: 9,
            event: RunEvent::Finished(Box::new(record)),
        });
    }

    #[tokio::test]
    async fn a_wait_on_a_message_nobody_answers_is_refused_at_once() {
        let (store, (bus, _)) = (Store::temporary().unwrap(), broadcast::channel(8));
        let started = tokio::time::Instant::now();
        let fault = RunTracker::default()
            .wait(
                "run-77",
                Duration::from_secs(30),
                &store,
                bus.subscribe(),
                None,
            )
            .await
            .unwrap_err();
        assert_eq!(fault.code, crate::rpc::protocol::INVALID_PARAMS);
        assert!(fault.message.contains("unknown runId"), "{fault:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no grace, no timeout"
        );
    }

    #[tokio::test]
    async fn a_wait_after_the_end_still_answers_from_the_store() {
        let (store, (bus, _)) = (Store::temporary().unwrap(), broadcast::channel(8));
        let seqs = pending(&store, 1).await;
        settle(&store, &bus, record(&seqs, RunStatus::Ok)).await;
        let run_id = format!("run-{}", seqs[0]);
        let result = RunTracker::default()
            .wait(
                &run_id,
                Duration::from_secs(1),
                &store,
                bus.subscribe(),
                None,
            )
            .await
            .unwrap();
        assert_eq!(result["status"], "ok");
        assert_eq!(result["text"], "hi");
        assert_eq!(result["startedAt"], 1);
        assert!(result.get("handledBy").is_none());
    }

    #[tokio::test]
    async fn a_wait_is_woken_by_the_end_and_a_merged_message_names_its_run() {
        let store = Store::temporary().unwrap();
        let (bus, _) = broadcast::channel(8);
        let seqs = pending(&store, 2).await;
        let waiter = {
            let (store, rx) = (store.clone(), bus.subscribe());
            let run_id = format!("run-{}", seqs[1]);
            tokio::spawn(async move {
                RunTracker::default()
                    .wait(&run_id, Duration::from_secs(30), &store, rx, None)
                    .await
            })
        };
        tokio::task::yield_now().await;
        let failed = RunStatus::Error(crate::domain::run::RunError::Model("boom".into()));
        settle(&store, &bus, record(&seqs, failed)).await;
        let result = waiter.await.unwrap().unwrap();
        assert_eq!(result["status"], "error");
        assert_eq!(result["error"], "boom");
        assert_eq!(result["handledBy"], format!("run-{}", seqs[0]));
    }

    #[tokio::test]
    async fn a_chat_messages_run_is_answered_from_the_bus_without_a_stored_record() {
        let store = Store::temporary().unwrap();
        let (bus, _) = broadcast::channel(8);
        let seqs = pending(&store, 1).await;
        let run_id = format!("run-{}", seqs[0]);
        let waiter = {
            let (store, rx, run_id) = (store.clone(), bus.subscribe(), run_id.clone());
            tokio::spawn(async move {
                RunTracker::default()
                    .wait(&run_id, Duration::from_secs(30), &store, rx, None)
                    .await
            })
        };
        tokio::task::yield_now().await;
        settle_keeping(&store, &bus, record(&seqs, RunStatus::Ok), false).await;
        assert_eq!(waiter.await.unwrap().unwrap()["status"], "ok");
        // Afterwards nothing is kept: a late wait calls it unknown.
        let late = RunTracker::default()
            .wait(
                &run_id,
                Duration::from_secs(1),
                &store,
                bus.subscribe(),
                None,
            )
            .await;
        assert!(late.is_err());
    }

    #[tokio::test]
    async fn a_wait_times_out_while_the_message_is_pending() {
        let (store, (bus, _)) = (Store::temporary().unwrap(), broadcast::channel(8));
        let seqs = pending(&store, 1).await;
        let result = RunTracker::default()
            .wait(
                &format!("run-{}", seqs[0]),
                Duration::from_millis(50),
                &store,
                bus.subscribe(),
                None,
            )
            .await
            .unwrap();
        assert_eq!(result["status"], "timeout");
    }

    #[tokio::test]
    async fn with_recheck_a_run_ended_on_another_node_is_found_in_the_store() {
        let store = Store::temporary().unwrap();
        // This node's bus: the run ends elsewhere, nothing comes on it.
        let (bus, _) = broadcast::channel::<LiveEvent>(8);
        let seqs = pending(&store, 1).await;
        let run_id = format!("run-{}", seqs[0]);
        let waiter = {
            let (store, rx, run_id) = (store.clone(), bus.subscribe(), run_id.clone());
            tokio::spawn(async move {
                RunTracker::default()
                    .wait(
                        &run_id,
                        Duration::from_secs(30),
                        &store,
                        rx,
                        Some(Duration::from_millis(20)),
                    )
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        store
            .settle_turn(&record(&seqs, RunStatus::Ok), true, &chat(), "hi")
            .await
            .unwrap();
        let result = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the wait finds the record without a bus event")
            .unwrap()
            .unwrap();
        assert_eq!(result["status"], "ok");
        assert_eq!(result["text"], "hi");
    }

    #[tokio::test]
    async fn a_command_is_answered_by_its_first_message() {
        let (store, (bus, _)) = (Store::temporary().unwrap(), broadcast::channel(8));
        let tracker = RunTracker::default();
        let id = tracker.expect_command("c1", 10);
        assert_eq!(tracker.command_result(&id).unwrap(), None);
        tracker.answered(&RpcMessage {
            chat_id: "c1".into(),
            text: "New session started.".into(),
        });
        tracker.answered(&RpcMessage {
            chat_id: "c1".into(),
            text: "later".into(),
        });
        let result = tracker
            .wait(&id, Duration::from_secs(1), &store, bus.subscribe(), None)
            .await
            .unwrap();
        assert_eq!(result["text"], "New session started.");
    }

    #[test]
    fn unknown_command_ids_are_refused() {
        let tracker = RunTracker::default();
        assert!(tracker.command_result("nope").is_err());
        assert!(tracker.command_result("cmd-unknown").is_err());
    }
}
