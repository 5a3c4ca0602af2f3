//! The outbox worker: the one place final replies are delivered from. A run records its final
//! in the store's outbox (with its pending turns cleared, one transaction) and hands it here;
//! start-up recovery hands over what the previous process left. Each conversation gets its
//! finals in the order they were handed over, independently of every other conversation and
//! of the session's lane: transport errors, 429s and 5xx are retried with capped exponential
//! backoff and jitter (a 429 waits its `retry_after`, and ends a run of server failures: the
//! backoff after it starts afresh) until the reply is delivered or older
//! than `[delivery] ttl`, when it goes to the dead letters. A reply the platform refuses for
//! good is dead-lettered at once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_channel::{Channel, ChannelError, Conversation, SentMessage};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::files::{self, FilePolicy};
use super::journal::RunJournal;
use super::voice::{self, Spoken, Voices};
use crate::domain::message::now_ms;
use crate::reply::{FileFailure, FileOpener, FileProgress, ReplyStream, VoiceNote};
use crate::store::{OutboxEntry, ReplyJournal, Store, StoreError};

/// The first retry after a server failure or a dropped connection waits up to this long (at
/// least half of it, [`Backoff`]; most such failures are over at once, and a longer outage
/// soon reaches the cap) ...
const MIN_BACKOFF: Duration = Duration::from_millis(200);
/// ... doubling up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long what follows a conversation's finals (a notice, the next reply's previews)
/// waits at most for them.
pub const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// One final reply to deliver.
pub struct Delivery {
    /// Its outbox id.
    pub id: u64,
    /// The session it answers (whose agent's workspace its files come from).
    pub session_key: String,
    /// Where it goes.
    pub to: Conversation,
    /// The final text.
    pub text: String,
    /// When it was recorded, ms since the epoch (the TTL counts from here).
    pub created_ms: u64,
    /// The run that produced it; its reply journal is forgotten once delivered.
    pub run_id: Option<String>,
    /// The live reply (previews already in the chat) the final completes; `None`: a new
    /// reply, journaled under `run_id`.
    pub stream: Option<ReplyStream>,
    /// Messages a previous process's cut-short reply left, deleted before the final goes.
    pub take_back: Option<ReplyJournal>,
}

impl Delivery {
    /// A delivery of the recorded outbox entry `entry` (start-up recovery).
    pub fn recorded(entry: OutboxEntry, take_back: Option<ReplyJournal>) -> Delivery {
        Delivery {
            id: entry.id,
            session_key: entry.session_key,
            to: entry.conversation,
            text: entry.text,
            created_ms: entry.created_ms,
            run_id: entry.run_id,
            stream: None,
            take_back,
        }
    }
}

/// Counters of the worker since start.
#[derive(Debug, Default)]
pub struct OutboxCounters {
    /// Finals delivered.
    pub delivered: AtomicU64,
    /// Finals moved to the dead letters (too old, or refused for good).
    pub dead_lettered: AtomicU64,
    /// Attempts that failed and were retried.
    pub retries: AtomicU64,
    /// Store reads or writes of the delivery path that failed (logged).
    pub store_errors: AtomicU64,
}

/// Delivers finals, per conversation in order; cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    channels: HashMap<String, Arc<dyn Channel>>,
    ttl: Duration,
    shutdown: CancellationToken,
    /// Deliveries waiting per conversation; a conversation is here while its task runs.
    queues: Mutex<HashMap<Conversation, VecDeque<Delivery>>>,
    /// Deliveries handed over and not finished yet.
    in_flight: watch::Sender<usize>,
    /// The ids of those deliveries: one handed over again meanwhile (a cluster node taking
    /// back a partition it lost for a moment recovers its undelivered finals) is dropped.
    ids: Mutex<HashSet<u64>>,
    counters: OutboxCounters,
    /// Which files a final's file lines may send.
    files: FilePolicy,
    /// The voice notes of finals (`[tts]`); `None`: off.
    voices: Option<Arc<Voices>>,
    /// Who waits for the outcome of which delivery ([`Outbox::submit_watched`]).
    watchers: Mutex<HashMap<u64, oneshot::Sender<Result<(), String>>>>,
}

impl Outbox {
    /// A worker delivering through `channels`, the files of finals checked by `files`, finals
    /// of sessions with voice replies on spoken by `voices`; retries stop when `shutdown`
    /// fires (what is left stays in the outbox for the next start).
    pub fn new(
        store: Store,
        channels: HashMap<String, Arc<dyn Channel>>,
        ttl: Duration,
        shutdown: CancellationToken,
        files: FilePolicy,
        voices: Option<Arc<Voices>>,
    ) -> Outbox {
        Outbox {
            inner: Arc::new(Inner {
                store,
                channels,
                ttl,
                shutdown,
                queues: Mutex::new(HashMap::new()),
                in_flight: watch::channel(0).0,
                ids: Mutex::new(HashSet::new()),
                counters: OutboxCounters::default(),
                files,
                voices,
                watchers: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Hands `delivery` over; it goes after every earlier one of its conversation.
    pub fn submit(&self, delivery: Delivery) {
        let new = self
            .inner
            .ids
            .lock()
            .map_or(true, |mut ids| ids.insert(delivery.id));
        if !new {
            tracing::debug!(id = delivery.id, "reply already being delivered here");
            return;
        }
        self.inner.in_flight.send_modify(|n| *n += 1);
        let to = delivery.to.clone();
        let Ok(mut queues) = self.inner.queues.lock() else {
            tracing::error!(
                id = delivery.id,
                "outbox queues poisoned; the reply waits for the next start"
            );
            if let Ok(mut ids) = self.inner.ids.lock() {
                ids.remove(&delivery.id);
            }
            self.inner
                .in_flight
                .send_modify(|n| *n = n.saturating_sub(1));
            return;
        };
        if let Some(queue) = queues.get_mut(&to) {
            queue.push_back(delivery);
            return;
        }
        queues.insert(to.clone(), VecDeque::from([delivery]));
        drop(queues);
        let inner = self.inner.clone();
        tokio::spawn(async move { inner.run_conversation(to).await });
    }

    /// [`Outbox::submit`], and a receiver of its outcome: `Ok` once delivered, `Err` with the
    /// reason once dead-lettered; closed without a value when it is left for the next start.
    pub fn submit_watched(&self, delivery: Delivery) -> oneshot::Receiver<Result<(), String>> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut watchers) = self.inner.watchers.lock() {
            watchers.insert(delivery.id, tx);
        }
        self.submit(delivery);
        rx
    }

    /// Waits until every delivery handed over is finished (delivered, dead-lettered, or left
    /// for the next start).
    pub async fn idle(&self) {
        let mut rx = self.inner.in_flight.subscribe();
        // Err: the sender is gone, nothing is in flight any more.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Waits until no final for `to` is queued or being delivered, so that an answer sent
    /// next (`/stop`'s) comes after the finals handed over before it.
    pub async fn settled(&self, to: &Conversation) {
        let mut rx = self.inner.in_flight.subscribe();
        while self.inner.busy(to) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// [`Outbox::settled`], waiting at most [`SETTLE_WAIT`]: a final the platform keeps
    /// refusing must not hold what comes after it for long.
    pub async fn settled_within(&self, to: &Conversation) {
        if tokio::time::timeout(SETTLE_WAIT, self.settled(to))
            .await
            .is_err()
        {
            tracing::debug!(channel = %to.channel, "going ahead of a final still being retried");
        }
    }

    /// Which files finals may send.
    pub fn files(&self) -> &FilePolicy {
        &self.inner.files
    }

    /// Counters since start.
    pub fn counters(&self) -> &OutboxCounters {
        &self.inner.counters
    }
}

impl Inner {
    /// Delivers `to`'s queue, oldest first, until it is empty.
    async fn run_conversation(self: Arc<Self>, to: Conversation) {
        let mut next = self.pop(&to);
        while let Some(delivery) = next {
            let id = delivery.id;
            if let Some(sent) = self.deliver(delivery).await {
                // Durable before the conversation is let go: a crash cannot resend this final
                // below a reply that came after it.
                self.delivered(&sent).await;
                self.tell(id, Ok(()));
            }
            // Left for the next start: a watcher learns it by the closed channel.
            self.tell_none(id);
            if let Ok(mut ids) = self.ids.lock() {
                ids.remove(&id);
            }
            // Popped (and the conversation let go when empty) before the count changes, so a
            // waiter woken by the count sees the queue as it is.
            next = self.pop(&to);
            self.in_flight.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    /// The next delivery of `to`; when there is none, `to` is no longer busy.
    fn pop(&self, to: &Conversation) -> Option<Delivery> {
        let mut queues = self.queues.lock().ok()?;
        let next = queues.get_mut(to).and_then(VecDeque::pop_front);
        if next.is_none() {
            queues.remove(to);
        }
        next
    }

    /// Whether finals for `to` are queued or being delivered.
    fn busy(&self, to: &Conversation) -> bool {
        self.queues.lock().is_ok_and(|q| q.contains_key(to))
    }

    /// Delivers one final: retried until delivered, refused for good, too old, or shutdown.
    /// Returns it when it was delivered: it still has to be marked so ([`Inner::delivered`]).
    async fn deliver(&self, mut delivery: Delivery) -> Option<Delivery> {
        // The TTL counts from the record; measured on the runtime's clock from here on.
        let age = Duration::from_millis(now_ms().saturating_sub(delivery.created_ms));
        if age >= self.ttl {
            self.dead_letter(&delivery, "older than [delivery] ttl");
            return None;
        }
        let deadline = crate::domain::deadline::after(self.ttl.saturating_sub(age));
        if self.shutdown.is_cancelled() {
            // Left for the next start, which takes back what was sent and sends it once.
            return None;
        }
        let Some(channel) = self.channels.get(&delivery.to.channel).cloned() else {
            tracing::warn!(id = delivery.id, channel = %delivery.to.channel, "the channel does not run; the reply waits for a start where it does");
            return None;
        };
        if let Some(journal) = delivery.take_back.take() {
            take_back(channel.as_ref(), &journal).await;
            self.forget_journal(delivery.run_id.as_deref());
        }
        let (text, paths) = files::split(&delivery.text);
        let opener = Opener {
            files: self.files.for_session(&delivery.session_key),
            channel: channel.name().to_owned(),
            max_bytes: channel.max_file_bytes(),
        };
        // A `message`-tool record (no run) fails when a file cannot go, and its tool call is
        // told; a final's file becomes a note, its text and other files delivered.
        let failure = match delivery.run_id {
            None => FileFailure::Fail,
            Some(_) => FileFailure::Note,
        };
        let speaks = voice::may_speak_into(channel.as_ref());
        let mut stream = delivery.stream.take().unwrap_or_else(|| {
            let journal = delivery.run_id.as_ref().map(|run| {
                // Fenced by `note_attempt` below, in the store, before each attempt.
                RunJournal::shared(self.store.clone(), run.clone(), delivery.to.clone(), None)
            });
            ReplyStream::new(channel, delivery.to.clone()).journaled(journal)
        });
        if delivery.run_id.is_none() && !paths.is_empty() {
            self.resume(&delivery, &mut stream);
        }
        if speaks && let Some(note) = self.voice_note(&delivery, &text).await {
            stream.voice(note);
        }
        // Each part of this final is sent under a key of its own outbox record, so the same
        // part resent after a crash is answered with the first message (Discord's nonce).
        stream.keyed(format!("{}.{}", delivery.id, delivery.to.chat_id));
        let mut backoff = Backoff::new(delivery.id);
        let mut wait_until = stream.take_limit();
        loop {
            if let Some(until) = wait_until.take() {
                let until = until.min(deadline);
                tokio::select! {
                    _ = self.shutdown.cancelled() => return None,
                    _ = tokio::time::sleep_until(until) => {}
                }
            }
            if Instant::now() >= deadline {
                self.dead_letter(&delivery, "older than [delivery] ttl");
                return None;
            }
            if self.shutdown.is_cancelled() {
                return None;
            }
            match self.store.note_attempt(delivery.id) {
                Err(StoreError::NotOwner { partition, .. }) => {
                    // Another node holds the session now and delivers it from the store.
                    tracing::info!(
                        id = delivery.id,
                        partition,
                        "cluster: the session moved to another node; its reply goes from there"
                    );
                    return None;
                }
                Err(e) => self.store_error(&e, "cannot count a delivery attempt"),
                Ok(_) => {}
            }
            let before = stream.progress();
            let delivered = stream
                .deliver_with_files(&text, &paths, &opener, failure)
                .await;
            match delivered {
                Ok(()) => return Some(delivery),
                Err(e) if e.is_retryable() => {
                    if stream.progress() != before {
                        backoff.reset();
                    }
                    let wait = match e {
                        ChannelError::RateLimited { retry_after_ms } => {
                            // The platform answered, and said when: a server failure after
                            // this one starts its backoff afresh.
                            backoff.reset();
                            Duration::from_millis(retry_after_ms)
                        }
                        _ => backoff.next(),
                    };
                    self.counters.retries.fetch_add(1, Ordering::Relaxed);
                    crate::metrics::global().delivery_retry(&delivery.to.channel);
                    tracing::debug!(error = %e, id = delivery.id, wait_ms = wait.as_millis() as u64, "reply not delivered yet; retrying");
                    wait_until = Some(crate::domain::deadline::after(wait));
                }
                Err(e) => {
                    self.dead_letter(&delivery, &format!("refused: {e}"));
                    return None;
                }
            }
        }
    }

    /// Marks `delivery` delivered, durably at once (a crash right after the send must not
    /// send it again), and forgets its journal.
    async fn delivered(&self, delivery: &Delivery) {
        self.counters.delivered.fetch_add(1, Ordering::Relaxed);
        crate::metrics::global().reply_delivered(&delivery.to.channel);
        // Marking is idempotent: when the answer was lost (a connection dropped meanwhile),
        // once more, after the store reconnected (its calls wait for that).
        let marked = self.store.mark_delivered(delivery.id).or_else(|e| {
            self.store_error(&e, "cannot mark a reply delivered; once more");
            self.store.mark_delivered(delivery.id)
        });
        if let Err(e) = marked.and(self.store.flush().await) {
            self.store_error(&e, "cannot mark a reply delivered");
            // The journal stays, so a restart takes the sent reply back before resending.
            return;
        }
        self.forget_journals(delivery);
    }

    /// The voice note of `delivery` with text `text` (without file lines), when it is a final
    /// (not a `message`-tool record) of a session with voice replies on: spoken now, before
    /// the first attempt, so every attempt sends the same audio; a recovered final is spoken
    /// again ([`voice`]).
    async fn voice_note(&self, delivery: &Delivery, text: &str) -> Option<VoiceNote> {
        let voices = self.voices.as_ref()?;
        delivery.run_id.as_ref()?;
        let files = self.files.for_session(&delivery.session_key);
        let spoken = Spoken {
            id: delivery.id,
            session_key: &delivery.session_key,
            text,
            workspace: files.workspace(),
        };
        voices.note(&self.store, spoken, &self.shutdown).await
    }

    /// Gives `stream` the durable progress of `delivery`, a `message`-tool record with files
    /// (its journal, [`files_journal`]), so a restart sends only what did not go yet.
    fn resume(&self, delivery: &Delivery, stream: &mut ReplyStream) {
        let key = files_journal(delivery.id);
        let done = match self.store.journal(&key) {
            Ok(journal) => journal.map(|j| j.messages).unwrap_or_default(),
            Err(e) => {
                self.store_error(&e, "cannot read the progress of a reply with files");
                Vec::new()
            }
        };
        let progress = Arc::new(RunJournalProgress {
            store: self.store.clone(),
            key,
            to: delivery.to.clone(),
        });
        stream.resume_files(progress, &done);
    }

    /// Tells the watcher of delivery `id`, if any, its outcome.
    fn tell(&self, id: u64, outcome: Result<(), String>) {
        let watcher = self.watchers.lock().ok().and_then(|mut w| w.remove(&id));
        if let Some(tx) = watcher {
            let _ = tx.send(outcome);
        }
    }

    /// Lets the watcher of delivery `id` go without an outcome (left for the next start).
    fn tell_none(&self, id: u64) {
        if let Ok(mut watchers) = self.watchers.lock() {
            watchers.remove(&id);
        }
    }

    /// Moves `delivery` to the dead letters (what was sent of it stays: a partial answer
    /// beats none).
    fn dead_letter(&self, delivery: &Delivery, why: &str) {
        self.tell(delivery.id, Err(why.to_owned()));
        self.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
        crate::metrics::global().dead_letter(&delivery.to.channel);
        tracing::warn!(id = delivery.id, channel = %delivery.to.channel, chat = %delivery.to.chat_id, why, "reply dead-lettered");
        match self.store.dead_letter(delivery.id) {
            Ok(_) => self.forget_journals(delivery),
            Err(e) => self.store_error(&e, "cannot dead-letter a reply"),
        }
    }

    /// Forgets what `delivery` kept beside its record: its run's journal and its voice note's
    /// audio, or its progress ([`files_journal`]).
    fn forget_journals(&self, delivery: &Delivery) {
        match &delivery.run_id {
            Some(run) => {
                self.forget_journal(Some(run));
                if self.voices.is_some() {
                    let files = self.files.for_session(&delivery.session_key);
                    let workspace = files.workspace().to_path_buf();
                    tokio::spawn(voice::discard(workspace, delivery.id));
                }
            }
            None => self.forget_journal(Some(&files_journal(delivery.id))),
        }
    }

    fn forget_journal(&self, run: Option<&str>) {
        if let Some(run) = run
            && let Err(e) = self.store.forget_journal(run)
        {
            self.store_error(&e, "cannot forget a reply journal");
        }
    }

    fn store_error(&self, error: &crate::store::StoreError, what: &str) {
        self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(error = %error, "{what}");
    }
}

/// The journal that keeps how far the `message`-tool record `id` got: one entry per item in
/// the chat (`text`, `f<n>`; see [`FileProgress`]). Never taken back (start-up recovery hands
/// it to the record's delivery); forgotten with the record.
pub fn files_journal(id: u64) -> String {
    format!("out-{id}")
}

/// Opens a final's files for the channel, through the [`FilePolicy`], on the blocking pool.
struct Opener {
    files: FilePolicy,
    channel: String,
    max_bytes: Option<u64>,
}

impl FileOpener for Opener {
    fn open<'a>(
        &'a self,
        path: &'a str,
    ) -> chela_channel::BoxFuture<'a, Result<chela_channel::OutboundFile, String>> {
        Box::pin(async move {
            self.files
                .open_blocking(path, &self.channel, self.max_bytes)
                .await
                .map(|(_, file)| file)
                .map_err(|e| format!("a file of the reply cannot be sent: {e}"))
        })
    }
}

/// Notes the items of a `message`-tool record in its journal ([`files_journal`]), durably.
struct RunJournalProgress {
    store: Store,
    key: String,
    to: Conversation,
}

impl FileProgress for RunJournalProgress {
    fn done<'a>(&'a self, item: &'a str) -> chela_channel::BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self
                .store
                .journal_sent(&self.key, &self.to, item, true)
                .await
            {
                tracing::warn!(error = %e, key = %self.key, "cannot note the progress of a reply with files");
            }
        })
    }
}

/// Deletes what a cut-short reply sent (best effort: a message the platform will not delete
/// stays).
async fn take_back(channel: &dyn Channel, journal: &ReplyJournal) {
    for id in &journal.messages {
        let message = SentMessage {
            message_id: id.clone(),
        };
        if let Err(e) = channel.delete(&journal.conversation, &message).await {
            tracing::warn!(error = %e, message = %id, "cannot take back a message of an unfinished reply");
        }
    }
}

/// Exponential backoff from [`MIN_BACKOFF`] to [`MAX_BACKOFF`], each wait jittered into its
/// upper half so that retries of many chats spread out.
struct Backoff {
    attempt: u32,
    seed: u64,
}

impl Backoff {
    fn new(seed: u64) -> Backoff {
        Backoff { attempt: 0, seed }
    }

    fn reset(&mut self) {
        self.attempt = 0;
    }

    fn next(&mut self) -> Duration {
        let full = MIN_BACKOFF
            .saturating_mul(1 << self.attempt.min(16))
            .min(MAX_BACKOFF);
        self.attempt += 1;
        let half = full / 2;
        let spread = u64::try_from(half.as_millis()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_millis(mix(self.seed ^ u64::from(self.attempt)) % spread)
    }
}

/// splitmix64: a well-spread hash for jitter.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
#[path = "outbox_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "outbox_files_tests.rs"]
mod files_tests;

#[cfg(test)]
#[path = "outbox_voice_tests.rs"]
mod voice_tests;
