//! Durable commits on one thread: group commit, a periodic commit, and idle compaction.
//!
//! Every write commits with `Durability::None` (no fsync; redb holds it in memory). A caller
//! that needs its writes durable queues a waiter here; the thread answers every waiter queued
//! so far with one `Durability::Immediate` commit, which makes every earlier commit durable
//! too and bumps the store's generation in the same transaction. Without waiters, the thread
//! makes a durable commit every [`PERIOD`] when anything was written, so a crash loses at most
//! that much of the buffered writes (sled flushes every 500 ms too). After [`IDLE_COMPACT`]
//! without writes it compacts the file once (under the database's write lock, so no
//! transaction is open), giving back the pages the load left free.
//!
//! Under load (the last commit answered at least [`COMMIT_SIBLINGS`] waiters) the thread
//! waits up to [`COMMIT_DELAY`] for more waiters before it commits, and stops waiting once
//! none came for [`ARRIVAL_GAP`] (after PostgreSQL's `commit_delay`): each durable commit
//! writes about the same pages whatever it carries, so fewer, larger commits cost less per
//! write. One chat has at most three waiters at once (its reply, its previous reply's
//! delivered mark, its account's poll cursor), so a lone chat is committed at once; so is
//! the first waiter after a pause of [`PERIOD`].
//!
//! The high-water file is written by a second thread (the sled backend's mark writer scheme),
//! so its fsync never delays the next group commit; it lags by at most one commit.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::Shared;
use crate::store::highwater::HighWater;

/// How often buffered writes are made durable when nobody asks.
const PERIOD: Duration = Duration::from_millis(500);
/// How long a commit under load waits for more waiters.
const COMMIT_DELAY: Duration = Duration::from_millis(1);
/// How long a commit under load waits for the next waiter before it goes.
const ARRIVAL_GAP: Duration = Duration::from_micros(200);
/// How many waiters the last commit must have answered for the next to wait for more.
const COMMIT_SIBLINGS: usize = 4;
/// The most waiters a commit under load waits for.
const BATCH_ENOUGH: usize = 64;
/// How long the store must go without writes before the file is compacted.
const IDLE_COMPACT: Duration = Duration::from_secs(30);
/// The least time between two compactions.
const COMPACT_EVERY: Duration = Duration::from_secs(600);
/// The least free space a compaction must give back (4 MiB).
const COMPACT_FREE: u64 = 4 << 20;

/// Why a flush did not make the writes durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum FlushError {
    /// The flusher thread has ended (the store is closing, or the thread died).
    #[error("the store flusher has stopped")]
    Stopped,
    /// redb failed to commit; the text is its error.
    #[error("{0}")]
    Failed(String),
}

/// A caller waiting for its writes to be durable.
type Waiter = oneshot::Sender<Result<(), FlushError>>;

/// The handle of the flusher thread. Dropping it ends the thread (after a last durable
/// commit) and waits for it, so the file is released as soon as the store is dropped.
pub(super) struct Flusher {
    queue: Option<mpsc::Sender<Waiter>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The thread's state.
struct Worker {
    shared: Arc<Shared>,
    generation: u64,
    marks: Option<MarkWriter>,
    /// When the last write was seen, and whether the file was compacted since.
    last_write: Instant,
    compacted: bool,
    /// When the file was last compacted.
    last_compaction: Option<Instant>,
    /// How many waiters the last commit answered.
    last_batch: usize,
}

impl Flusher {
    /// Starts the flusher thread for `shared`, whose generation is `generation`; durable
    /// generations are recorded in `highwater`.
    pub(super) fn start(
        shared: Arc<Shared>,
        generation: u64,
        highwater: Option<HighWater>,
    ) -> std::io::Result<Flusher> {
        let (queue, waiters) = mpsc::channel::<Waiter>();
        let thread = std::thread::Builder::new()
            .name("chela-store-flush".into())
            .spawn(move || {
                let marks = match highwater.map(MarkWriter::start).transpose() {
                    Ok(marks) => marks,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot start the high-water writer; the mark stays where it is");
                        None
                    }
                };
                let mut worker = Worker {
                    shared,
                    generation,
                    marks,
                    last_write: Instant::now(),
                    compacted: true,
                    last_compaction: None,
                    last_batch: 0,
                };
                worker.run(&waiters);
                if let Some(marks) = worker.marks.take() {
                    marks.finish();
                }
            })?;
        Ok(Flusher {
            queue: Some(queue),
            thread: Some(thread),
        })
    }

    /// Waits until everything committed before the call is on disk.
    pub(super) async fn flush(&self) -> Result<(), FlushError> {
        let (tx, rx) = oneshot::channel();
        self.queue
            .as_ref()
            .ok_or(FlushError::Stopped)?
            .send(tx)
            .map_err(|_| FlushError::Stopped)?;
        rx.await.map_err(|_| FlushError::Stopped)?
    }
}

impl Worker {
    /// Serves waiters until the queue closes, then makes what is left durable.
    fn run(&mut self, waiters: &mpsc::Receiver<Waiter>) {
        loop {
            match waiters.recv_timeout(PERIOD) {
                Ok(first) => {
                    let batch = gather(first, waiters, self.last_batch >= COMMIT_SIBLINGS);
                    self.last_batch = batch.len();
                    let done = self.commit();
                    for waiter in batch {
                        let _ = waiter.send(done.clone());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // A pause: the load is over.
                    self.last_batch = 0;
                    self.tick();
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if self.shared.dirty.load(Ordering::Acquire) {
                        log(self.commit());
                    }
                    return;
                }
            }
        }
    }

    /// The periodic step: a durable commit when something was written, else (once) a
    /// compaction after a long enough pause.
    fn tick(&mut self) {
        if self.shared.dirty.load(Ordering::Acquire) {
            log(self.commit());
        } else if !self.compacted && self.last_write.elapsed() >= IDLE_COMPACT {
            self.compacted = true;
            self.compact();
        }
    }

    /// One durable commit that bumps the generation; records it in the high-water file.
    fn commit(&mut self) -> Result<(), FlushError> {
        let was_dirty = self.shared.dirty.swap(false, Ordering::AcqRel);
        if was_dirty {
            self.last_write = Instant::now();
            self.compacted = false;
        }
        let next = self.generation.saturating_add(1);
        let db = self
            .shared
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = (self.shared.damage).watch(super::highwater::commit_generation(&db, next)) {
            // Not durable: the next tick tries again.
            if was_dirty {
                self.shared.dirty.store(true, Ordering::Release);
            }
            return Err(FlushError::Failed(e.to_string()));
        }
        self.generation = next;
        if let Some(marks) = &self.marks {
            marks.record(next);
        }
        Ok(())
    }

    /// Compacts the file under the write lock when enough of it is free; a failure is only
    /// logged. Store calls wait meanwhile, so it runs only after a pause in writes, at most
    /// once per [`COMPACT_EVERY`], and only when at least [`COMPACT_FREE`] bytes (and a
    /// quarter of the file) would come back.
    fn compact(&mut self) {
        if self
            .last_compaction
            .is_some_and(|at| at.elapsed() < COMPACT_EVERY)
        {
            return;
        }
        let (free, stored) = match self.free_bytes() {
            Some(sizes) => sizes,
            None => return,
        };
        if free < COMPACT_FREE || free < (free + stored) / 4 {
            return;
        }
        let mut db = self
            .shared
            .db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.last_compaction = Some(Instant::now());
        let started = Instant::now();
        match db.compact() {
            Ok(done) => tracing::debug!(
                done,
                took_ms = started.elapsed().as_millis() as u64,
                "store compacted"
            ),
            Err(e) => tracing::info!(error = %e, "store compaction skipped"),
        }
    }
}

impl Worker {
    /// The file's free (fragmented) and stored bytes, from redb's statistics.
    fn free_bytes(&self) -> Option<(u64, u64)> {
        let db = self
            .shared
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tx = db.begin_write().ok()?;
        let stats = tx.stats().ok()?;
        let sizes = (
            stats.fragmented_bytes(),
            stats.stored_bytes() + stats.metadata_bytes(),
        );
        tx.abort().ok()?;
        Some(sizes)
    }
}

/// `first` and the waiters queued behind it; `under_load`, also those that come within
/// [`COMMIT_DELAY`], each within [`ARRIVAL_GAP`] of the one before (the first of the
/// queued ones), waiting only while the batch is smaller than [`BATCH_ENOUGH`].
fn gather<T>(first: T, waiters: &mpsc::Receiver<T>, under_load: bool) -> Vec<T> {
    let mut batch = vec![first];
    batch.extend(waiters.try_iter());
    if under_load {
        let deadline = Instant::now() + COMMIT_DELAY;
        while batch.len() < BATCH_ENOUGH {
            let left = deadline.saturating_duration_since(Instant::now());
            match waiters.recv_timeout(left.min(ARRIVAL_GAP)) {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
    }
    batch
}

/// Logs a failed commit nobody waited for.
fn log(done: Result<(), FlushError>) {
    if let Err(e) = done {
        tracing::warn!(error = %e, "periodic store commit failed");
    }
}

/// The thread writing durable generations to the high-water file.
struct MarkWriter {
    generations: mpsc::Sender<u64>,
    thread: std::thread::JoinHandle<()>,
}

impl MarkWriter {
    /// Starts the thread writing to `file`.
    fn start(file: HighWater) -> std::io::Result<MarkWriter> {
        let (generations, durable) = mpsc::channel::<u64>();
        let thread = std::thread::Builder::new()
            .name("chela-store-mark".into())
            .spawn(move || {
                while let Ok(first) = durable.recv() {
                    let newest = durable.try_iter().fold(first, u64::max);
                    if let Err(e) = file.write(newest, super::now_ms()) {
                        tracing::warn!(error = %e, "cannot write the store's high-water mark");
                    }
                }
            })?;
        Ok(MarkWriter {
            generations,
            thread,
        })
    }

    /// Hands over `generation`, now durable in the store.
    fn record(&self, generation: u64) {
        let _ = self.generations.send(generation);
    }

    /// Writes what is left and ends the thread.
    fn finish(self) {
        drop(self.generations);
        let _ = self.thread.join();
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Closing the queue ends the thread after a last durable commit.
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_not_under_load_takes_the_waiters_already_queued() {
        let (tx, rx) = mpsc::channel();
        for n in 1..3 {
            tx.send(n).unwrap();
        }
        assert_eq!(gather(0, &rx, false), vec![0, 1, 2]);
    }

    #[test]
    fn a_commit_takes_every_waiter_already_queued_even_past_the_cap() {
        let (tx, rx) = mpsc::channel();
        for n in 1..100 {
            tx.send(n).unwrap();
        }
        // The cap only ends the waiting for more.
        assert_eq!(gather(0, &rx, true), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_commit_under_load_ends_its_wait_when_the_queue_closes() {
        let (tx, rx) = mpsc::channel();
        for n in 1..10 {
            tx.send(n).unwrap();
        }
        drop(tx);
        assert_eq!(gather(0, &rx, true), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_commit_under_load_ends_its_wait_while_the_queue_stays_open() {
        let (tx, rx) = mpsc::channel();
        tx.send(1).unwrap();
        // Nothing more comes, but the sender stays: the wait ends by itself.
        assert_eq!(gather(0, &rx, true), vec![0, 1]);
        drop(tx);
    }
}
