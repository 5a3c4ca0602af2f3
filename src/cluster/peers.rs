//! Calls between the nodes of a cluster: a node asks another (or every other) node to act
//! where the state lives (stop a session it runs, answer an exec approval it asked) and
//! gathers the answers for a while. They travel as PostgreSQL notifications on the channel
//! of the store's schema that the run events use (`relay`): an
//! [`Envelope`]'s payload starts with [`MARK`], which tells it from an event batch. Best
//! effort, as the events are: a node that does not answer in time is reported as such, never
//! guessed at. What is asked and answered belongs to the stages: a stop (the runner's
//! `stop.rs`) and an exec approval (the questions' `remote.rs`).
//!
//! Every envelope is signed (HMAC-SHA256 with the store's call key, [`Coordinator::call_key`],
//! which only roles that can read chela's tables know): a role that can merely connect, and
//! so `NOTIFY` and `LISTEN`, cannot forge a call, and a call without a valid signature is
//! dropped. Nor can it copy a signed call it heard and send it again: every envelope
//! carries its send time and a random nonce in its signed part, and a call outside the
//! freshness window, or taken before, is dropped ([`super::peers_fresh`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use hmac::{KeyInit, Mac};

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::peers_fresh::{Seen, Stale};
use crate::domain::message::now_ms;
use crate::store::{Coordinator, MAX_EVENT_PAYLOAD};

/// How long a node waits for the others' answers.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// What a call's payload starts with: the envelope's first field.
const MARK: &str = "{\"call\":";

/// At most this many calls from other nodes are handled at once; one more is refused with
/// [`Body::Busy`] (the asker reports the node as busy instead of waiting out the answer).
pub const CALLS_AT_ONCE: usize = 16;

/// A call that could not be handed to the other nodes: no call key, too big for a
/// notification, or the database could not be reached. Nobody received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call could not be sent to the other nodes")]
pub struct NotSent;

/// One call or its answer, as it travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The call's number at the node that made it (first: see [`MARK`]).
    pub call: u64,
    /// When it was sent: ms since the epoch, by the sender's clock.
    pub at: u64,
    /// Random: tells this envelope from a copy of it.
    pub nonce: String,
    /// The node it comes from.
    pub from: String,
    /// The node it is for; `None`: every other node.
    pub to: Option<String>,
    /// The question, or the answer to call `call` of node `to`.
    pub body: Body,
    /// The signature of the envelope without it, hex (empty while it is made).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sig: String,
}

/// The signature scheme of the envelopes.
type Signer = hmac::Hmac<sha2::Sha256>;

/// What is asked, or answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// Stop session `session` (its run and queued turns) and, with `children`, its
    /// sub-agents, on the node that runs it.
    Stop {
        /// The session key.
        session: String,
        /// Whether its sub-agents stop too (`/stop`; the RPC's `abort` does not).
        children: bool,
    },
    /// What [`Body::Stop`] did.
    Stopped {
        /// False when the node does not run the session (any more): it did nothing.
        runs_here: bool,
        /// The node is shutting down: nothing was stopped.
        closed: bool,
        /// Queued turns dropped.
        cleared: usize,
        /// Whether a run was cancelled (and settled).
        stopped_run: bool,
        /// Sub-agents stopped.
        children: usize,
    },
    /// Answer exec approval `id` with `decision` (as typed after `/approve <id>`).
    Approve {
        /// The approval's id.
        id: String,
        /// `allow-once`, `allow-always` or `deny`.
        decision: String,
    },
    /// What [`Body::Approve`] did on one node.
    Approved {
        /// Whether it reached the one asking.
        outcome: Answered,
    },
    /// The exec approvals waiting on a node (asked in conversation `place` only, or with
    /// id `id` only, when given).
    ListApprovals {
        /// Only those asked in this conversation (the questions stage's `approvals::place_of`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        place: Option<String>,
        /// Only the one with this id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// The answer to [`Body::ListApprovals`].
    Approvals {
        /// Oldest first.
        waiting: Vec<WaitingApproval>,
    },
    /// The answer of a node handling [`CALLS_AT_ONCE`] calls already: nothing was done.
    Busy,
}

impl Body {
    /// Whether this answers a call (else it asks).
    fn is_answer(&self) -> bool {
        matches!(
            self,
            Body::Stopped { .. } | Body::Approved { .. } | Body::Approvals { .. } | Body::Busy
        )
    }
}

/// What became of an answer to an exec approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answered {
    /// It reached the one asking, who runs (or not) `command`.
    Done {
        /// The command asked about.
        command: String,
        /// Where it was asked (the questions stage's `approvals::place_of`).
        #[serde(default)]
        place: String,
        /// Not to be shown where it is told (asked in another conversation): set by the
        /// node telling it, never sent.
        #[serde(skip)]
        hidden: bool,
    },
    /// No approval has that id here (answered, timed out or stopped).
    Unknown,
    /// The one asking stopped waiting in the meantime.
    Gone,
}

/// An exec approval waiting on some node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingApproval {
    /// Its id.
    pub id: String,
    /// The session asking.
    pub session: String,
    /// The command (shortened to fit a notification).
    pub command: String,
}

/// Whether `payload` (from the shared channel) is a call or an answer, not an event batch.
pub fn is_call(payload: &str) -> bool {
    payload.starts_with(MARK)
}

/// This node's side of the calls.
pub struct Peers {
    coordinator: Arc<dyn Coordinator>,
    next: AtomicU64,
    /// The calls waiting for answers: call number -> where its answers go.
    calls: Mutex<HashMap<u64, mpsc::UnboundedSender<(String, Body)>>>,
    /// The key envelopes are signed with ([`Peers::set_key`]); none: nothing is sent or taken.
    key: OnceLock<Vec<u8>>,
    /// The calls from other nodes being handled ([`CALLS_AT_ONCE`]).
    handling: Arc<Semaphore>,
    /// The stops from other nodes being handled: a pool of their own ([`CALLS_AT_ONCE`]),
    /// so that slow calls of other kinds never lock a `/stop` out.
    stopping: Arc<Semaphore>,
    /// The busy answers on their way ([`Peers::refuse`]).
    refusing: Arc<Semaphore>,
    /// The envelopes taken within the freshness window ([`super::peers_fresh`]).
    seen: Mutex<Seen>,
    /// When (ms since the epoch) a dropped call was last logged at warn ([`STALE_LOG_MS`]).
    stale_logged: AtomicU64,
}

/// At most one stale call (not a plain copy) is logged at warn in this long (ms): a
/// replayer cannot flood the log.
const STALE_LOG_MS: u64 = 10_000;

/// Forgets a call when its asker stops waiting.
struct Pending<'a> {
    peers: &'a Peers,
    call: u64,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let mut calls = self
            .peers
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.remove(&self.call);
    }
}

impl Peers {
    /// Calls over `coordinator`'s notifications.
    pub fn new(coordinator: Arc<dyn Coordinator>) -> Peers {
        // Numbered from the clock: a node restarted under the same id does not take the
        // late answers to its previous life's calls for its own. Nor does it take a copy of
        // a call sent to its previous life: nothing sent before now is fresh.
        let start = now_ms();
        let first = start.saturating_mul(1000);
        Peers {
            coordinator,
            next: AtomicU64::new(first),
            calls: Mutex::new(HashMap::new()),
            key: OnceLock::new(),
            handling: Arc::new(Semaphore::new(CALLS_AT_ONCE)),
            stopping: Arc::new(Semaphore::new(CALLS_AT_ONCE)),
            refusing: Arc::new(Semaphore::new(CALLS_AT_ONCE)),
            seen: Mutex::new(Seen::since(start)),
            stale_logged: AtomicU64::new(0),
        }
    }

    /// Sets the key envelopes are signed and checked with (the store's call key, read when
    /// the node joins). An empty key is refused: calls stay off.
    pub fn set_key(&self, key: Vec<u8>) {
        if key.is_empty() {
            tracing::warn!("cluster: the store has no call key; calls between nodes are off");
            return;
        }
        let _ = self.key.set(key);
    }

    /// The hex signature of `unsigned` (an envelope's JSON without `sig`); `None` without a key.
    fn sign(&self, unsigned: &str) -> Option<String> {
        let mut mac = Signer::new_from_slice(self.key.get()?).ok()?;
        mac.update(unsigned.as_bytes());
        let bytes = mac.finalize().into_bytes();
        Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Whether `envelope` carries the signature of its other fields.
    fn signed(&self, envelope: &Envelope) -> bool {
        let mut unsigned = envelope.clone();
        let sig = std::mem::take(&mut unsigned.sig);
        let Ok(text) = serde_json::to_string(&unsigned) else {
            return false;
        };
        let (Some(key), Some(given)) = (self.key.get(), unhex(&sig)) else {
            return false;
        };
        let Ok(mut mac) = Signer::new_from_slice(key) else {
            return false;
        };
        mac.update(text.as_bytes());
        mac.verify_slice(&given).is_ok()
    }

    /// A new envelope of call `call` from this node to `to` (unsigned): sent now, with a
    /// nonce of its own.
    fn envelope(&self, call: u64, to: Option<&str>, body: Body) -> Envelope {
        Envelope {
            call,
            at: now_ms(),
            nonce: uuid::Uuid::new_v4().simple().to_string(),
            from: self.node().to_owned(),
            to: to.map(str::to_owned),
            body,
            sig: String::new(),
        }
    }

    /// Whether `envelope` (signed) is fresh at `now` (ms since the epoch): logs why not (a
    /// copy at debug; others at warn, at most once per [`STALE_LOG_MS`]).
    fn fresh(&self, envelope: &Envelope, now: u64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let Err(stale) = seen.check(envelope.at, &envelope.from, &envelope.nonce, now) else {
            return true;
        };
        let last = self.stale_logged.load(Ordering::Relaxed);
        let loud = stale != Stale::Seen
            && now.saturating_sub(last) >= STALE_LOG_MS
            && self
                .stale_logged
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        let (from, sent_ms) = (&envelope.from, envelope.at);
        if loud {
            tracing::warn!(%from, sent_ms, now_ms = now, "cluster: a call from another node was dropped: {stale}");
        } else {
            tracing::debug!(%from, sent_ms, now_ms = now, "cluster: a call from another node was dropped: {stale}");
        }
        false
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        self.coordinator.node()
    }

    /// Sends `body` to node `to` (`None`: every other node) and gathers the answers, by
    /// node, until `expected` came, one of them is `decisive`, or `within` passed;
    /// [`NotSent`] when the call could not be handed over at all (with `expected` 0 nothing
    /// is sent and nothing is answered).
    pub async fn ask(
        &self,
        to: Option<&str>,
        body: Body,
        expected: usize,
        within: Duration,
        decisive: impl Fn(&Body) -> bool,
    ) -> Result<Vec<(String, Body)>, NotSent> {
        let call = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = mpsc::unbounded_channel();
        (self.calls.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call, tx);
        let _pending = Pending { peers: self, call };
        let envelope = self.envelope(call, to, body);
        let mut answers = Vec::new();
        if expected == 0 {
            return Ok(answers);
        }
        if !self.send(&envelope).await {
            return Err(NotSent);
        }
        let deadline = tokio::time::Instant::now() + within;
        while let Ok(Some((node, body))) = tokio::time::timeout_at(deadline, rx.recv()).await {
            if answers.iter().any(|(n, _)| *n == node) {
                continue;
            }
            let done = decisive(&body);
            answers.push((node, body));
            if done || answers.len() >= expected {
                break;
            }
        }
        Ok(answers)
    }

    /// Handles `question` (a call from another node) with `handle`, in a task of its own,
    /// while fewer than [`CALLS_AT_ONCE`] of its kind (stops; the others) are handled;
    /// otherwise refuses it ([`Peers::refuse`]). Never waits: the loop taking the calls
    /// goes on at once.
    pub fn dispatch<F>(&self, question: &Envelope, handle: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let pool = match question.body {
            Body::Stop { .. } => &self.stopping,
            _ => &self.handling,
        };
        match pool.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(handled(handle, permit));
            }
            Err(_) => {
                tracing::warn!(
                    from = %question.from,
                    "cluster: {CALLS_AT_ONCE} calls from other nodes are being handled; one more was refused as busy"
                );
                self.refuse(question);
            }
        }
    }

    /// Answers `question` [`Body::Busy`] in a task of its own, waiting at most
    /// [`ANSWER_WITHIN`] for the database (the asker has given up by then); while
    /// [`CALLS_AT_ONCE`] such answers are on their way, the refusal is not answered (the
    /// asker sees no answer in time).
    fn refuse(&self, question: &Envelope) {
        let Ok(permit) = self.refusing.clone().try_acquire_owned() else {
            tracing::debug!(from = %question.from, "cluster: too many busy answers on their way; one is not sent");
            return;
        };
        let busy = self.envelope(question.call, Some(&question.from), Body::Busy);
        let Some(payload) = self.seal(&busy) else {
            return;
        };
        let coordinator = self.coordinator.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(ANSWER_WITHIN, publish(&*coordinator, payload)).await;
            drop(permit);
        });
    }

    /// Answers call `call` of node `to` with `body`.
    pub async fn answer(&self, to: &str, call: u64, body: Body) {
        let envelope = self.envelope(call, Some(to), body);
        self.send(&envelope).await;
    }

    /// Takes in `payload` from the shared channel: an answer to one of this node's calls
    /// goes to its asker; a question for this node is returned, to be answered. Either is
    /// dropped unless signed and fresh ([`super::peers_fresh`]).
    pub fn take(&self, payload: &str) -> Option<Envelope> {
        self.take_at(payload, now_ms())
    }

    /// [`Peers::take`] at `now` (ms since the epoch).
    fn take_at(&self, payload: &str, now: u64) -> Option<Envelope> {
        let envelope: Envelope = match serde_json::from_str(payload) {
            Ok(envelope) => envelope,
            Err(e) => {
                tracing::debug!(error = %e, "cluster: a call from another node not understood");
                return None;
            }
        };
        let me = self.node();
        if envelope.from == me || envelope.to.as_deref().is_some_and(|to| to != me) {
            return None;
        }
        if !self.signed(&envelope) {
            tracing::warn!(from = %envelope.from, "cluster: a call without a valid signature was dropped");
            return None;
        }
        if !self.fresh(&envelope, now) {
            return None;
        }
        if !envelope.body.is_answer() {
            return Some(envelope);
        }
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(asker) = calls.get(&envelope.call) {
            let _ = asker.send((envelope.from, envelope.body));
        }
        None
    }

    /// Publishes `envelope`; false when it could not be sent.
    async fn send(&self, envelope: &Envelope) -> bool {
        match self.seal(envelope) {
            Some(payload) => publish(&*self.coordinator, payload).await,
            None => false,
        }
    }

    /// The payload of `envelope`, signed; `None` without a key or when it is too big for a
    /// notification.
    fn seal(&self, envelope: &Envelope) -> Option<String> {
        let unsigned = serde_json::to_string(envelope).ok()?;
        let signed = Envelope {
            sig: self.sign(&unsigned)?,
            ..envelope.clone()
        };
        let payload = serde_json::to_string(&signed).ok()?;
        if payload.len() > MAX_EVENT_PAYLOAD {
            tracing::warn!(
                bytes = payload.len(),
                "cluster: a call to another node is too big to send"
            );
            return None;
        }
        Some(payload)
    }
}

/// Publishes `payload` over `coordinator`; false when the database could not be reached.
async fn publish(coordinator: &dyn Coordinator, payload: String) -> bool {
    match coordinator.publish_events(payload).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot reach the other nodes");
            false
        }
    }
}

/// Runs `handle`, holding `permit` until it ends.
async fn handled(handle: impl Future<Output = ()>, permit: OwnedSemaphorePermit) {
    handle.await;
    drop(permit);
}

/// The bytes of hex text `text`; `None` when it is not hex.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "peers_tests.rs"]
mod tests;
