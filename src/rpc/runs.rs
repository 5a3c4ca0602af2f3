//! The run tracker behind `agent.wait`: remembers the most recent finished runs (by the
//! durable seq of every message each one answered) and the answers to commands sent through
//! `agent`, so a wait that starts after the end still gets the result. Bounded: the oldest
//! entries are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::channel::RpcMessage;
use super::protocol::Fault;
use crate::domain::events::RunEvent;
use crate::domain::run::RunStatus;
use crate::domain::run::seq_of_run_id;
use crate::domain::run::{LiveEvent, RunRecord};

/// How many finished messages (and command answers) are remembered.
pub const KEEP: usize = 256;

/// How long a finished run's record may take to reach the tracker.
const RECORD_GRACE: Duration = Duration::from_secs(1);

/// Prefix of the ids `agent` gives to commands (answered without a run).
const COMMAND_PREFIX: &str = "cmd-";

#[derive(Default)]
struct Inner {
    /// Finished runs by each seq they answered.
    finished: HashMap<u64, Arc<RunRecord>>,
    finished_order: VecDeque<u64>,
    /// Commands by call id: accepted at, and the answer once one was sent.
    commands: HashMap<String, (u64, Option<(String, u64)>)>,
    command_order: VecDeque<String>,
}

/// Finished runs and command answers, for `agent.wait`.
#[derive(Default)]
pub struct RunTracker {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl RunTracker {
    /// A tracker fed from the run bus `live` (each run's record) and `messages` until
    /// `stop` fires.
    pub fn spawn(
        mut live: broadcast::Receiver<LiveEvent>,
        mut messages: broadcast::Receiver<RpcMessage>,
        stop: CancellationToken,
    ) -> Arc<RunTracker> {
        let tracker = Arc::new(RunTracker::default());
        let weak = Arc::downgrade(&tracker);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    event = live.recv() => match event {
                        Ok(LiveEvent { event: RunEvent::Finished(record), .. }) => match weak.upgrade() {
                            Some(tracker) => tracker.finished(*record),
                            None => return,
                        },
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "rpc: run tracker lagged; some waits will time out");
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    message = messages.recv() => match message {
                        Ok(message) => match weak.upgrade() {
                            Some(tracker) => tracker.answered(&message),
                            None => return,
                        },
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "rpc: command answers lagged");
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        });
        tracker
    }

    /// Records a finished run under every seq it answered.
    pub fn finished(&self, record: RunRecord) {
        let record = Arc::new(record);
        if let Ok(mut inner) = self.inner.lock() {
            for seq in &record.seqs {
                if inner.finished.insert(*seq, record.clone()).is_none() {
                    inner.finished_order.push_back(*seq);
                }
            }
            while inner.finished_order.len() > KEEP {
                if let Some(old) = inner.finished_order.pop_front() {
                    inner.finished.remove(&old);
                }
            }
        }
        self.changed.notify_waiters();
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

    /// The result of run `run_id` if it has finished.
    pub fn result(&self, run_id: &str) -> Result<Option<Value>, Fault> {
        let inner = self
            .inner
            .lock()
            .map_err(|_| Fault::internal("run tracker unavailable"))?;
        if let Some(seq) = seq_of_run_id(run_id) {
            return Ok(inner.finished.get(&seq).map(|r| run_result(run_id, r)));
        }
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
    /// run goes on). `answering(seq)` tells whether a message is still being answered: a run
    /// id whose message is neither answered (remembered here) nor being answered is unknown,
    /// and the wait says so instead of sitting out its timeout.
    pub async fn wait(
        &self,
        run_id: &str,
        timeout: Duration,
        answering: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<Value, Fault> {
        let deadline = tokio::time::Instant::now() + timeout;
        // A run's record reaches this tracker a moment after its message stops being
        // answered: an id is called unknown only after that long.
        let mut unknown_since: Option<tokio::time::Instant> = None;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(result) = self.result(run_id)? {
                return Ok(result);
            }
            let mut until = deadline;
            if let Some(seq) = seq_of_run_id(run_id)
                && !answering(seq)
            {
                let since = *unknown_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= RECORD_GRACE {
                    return Err(Fault::params(format!(
                        "unknown runId {run_id:?}: its message is not queued or running and no run that answered it is remembered (it was never accepted, was dropped by /stop or abort, or was answered more than {KEEP} runs ago)"
                    )));
                }
                until = until.min(since + RECORD_GRACE);
            } else {
                unknown_since = None;
            }
            if tokio::time::timeout_at(until, changed).await.is_err() && until == deadline {
                return Ok(json!({
                    "runId": run_id,
                    "status": "timeout",
                    "startedAt": null,
                    "endedAt": null,
                }));
            }
        }
    }
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
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn record(seqs: &[u64], status: RunStatus) -> RunRecord {
        RunRecord {
            run_id: crate::domain::run::run_id_for(seqs),
            seqs: seqs.to_vec(),
            session_key: "agent:main:main".into(),
            status,
            text: "hi".into(),
            started_ms: 1,
            ended_ms: 2,
        }
    }

    /// Every message is still being answered.
    fn running(_seq: u64) -> bool {
        true
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_on_a_message_nobody_answers_is_refused_after_a_grace() {
        let tracker = RunTracker::default();
        let started = tokio::time::Instant::now();
        let fault = tracker
            .wait("run-77", Duration::from_secs(30), &|_| false)
            .await
            .unwrap_err();
        assert_eq!(fault.code, crate::rpc::protocol::INVALID_PARAMS);
        assert!(fault.message.contains("unknown runId"), "{fault:?}");
        assert_eq!(started.elapsed(), RECORD_GRACE, "not the whole timeout");
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_arriving_within_the_grace_is_still_answered() {
        let tracker = Arc::new(RunTracker::default());
        let waiter = {
            let tracker = tracker.clone();
            tokio::spawn(async move {
                tracker
                    .wait("run-4", Duration::from_secs(30), &|_| false)
                    .await
            })
        };
        tokio::time::sleep(RECORD_GRACE / 2).await;
        tracker.finished(record(&[4], RunStatus::Ok));
        assert_eq!(waiter.await.unwrap().unwrap()["status"], "ok");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_after_the_end_still_answers() {
        let tracker = RunTracker::default();
        tracker.finished(record(&[5], RunStatus::Ok));
        let result = tracker
            .wait("run-5", Duration::from_secs(1), &running)
            .await
            .unwrap();
        assert_eq!(result["status"], "ok");
        assert_eq!(result["text"], "hi");
        assert_eq!(result["startedAt"], 1);
        assert!(result.get("handledBy").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_woken_by_the_end_and_a_merged_message_names_its_run() {
        let tracker = Arc::new(RunTracker::default());
        let waiter = {
            let tracker = tracker.clone();
            tokio::spawn(async move {
                tracker
                    .wait("run-8", Duration::from_secs(30), &running)
                    .await
            })
        };
        tokio::task::yield_now().await;
        tracker.finished(record(
            &[7, 8],
            RunStatus::Error(crate::domain::run::RunError::Model("boom".into())),
        ));
        let result = waiter.await.unwrap().unwrap();
        assert_eq!(result["status"], "error");
        assert_eq!(result["error"], "boom");
        assert_eq!(result["handledBy"], "run-7");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_times_out_without_an_end() {
        let tracker = RunTracker::default();
        let result = tracker
            .wait("run-9", Duration::from_millis(50), &running)
            .await
            .unwrap();
        assert_eq!(result["status"], "timeout");
    }

    #[tokio::test(start_paused = true)]
    async fn a_command_is_answered_by_its_first_message() {
        let tracker = RunTracker::default();
        let id = tracker.expect_command("c1", 10);
        assert_eq!(tracker.result(&id).unwrap(), None);
        tracker.answered(&RpcMessage {
            chat_id: "c1".into(),
            text: "New session started.".into(),
        });
        tracker.answered(&RpcMessage {
            chat_id: "c1".into(),
            text: "later".into(),
        });
        let result = tracker
            .wait(&id, Duration::from_secs(1), &running)
            .await
            .unwrap();
        assert_eq!(result["text"], "New session started.");
    }

    #[test]
    fn unknown_ids_are_refused_and_old_runs_forgotten() {
        let tracker = RunTracker::default();
        assert!(tracker.result("nope").is_err());
        assert!(tracker.result("cmd-unknown").is_err());
        for seq in 0..(KEEP as u64 + 10) {
            tracker.finished(record(&[seq], RunStatus::Ok));
        }
        assert_eq!(tracker.result("run-0").unwrap(), None);
        assert!(
            tracker
                .result(&format!("run-{}", KEEP + 9))
                .unwrap()
                .is_some()
        );
    }
}
