//! Group commit on one thread. sled 0.34.7's `flush_async` deadlocks when called from
//! several tasks at once (sled#1308, unreleased fix), and a synchronous flush must not block
//! the async runtime. So every `BaseStore::flush` queues a waiter here; one thread runs a single
//! `Db::flush` for all waiters queued so far and answers them together.
//!
//! The high-water file is written by a second thread, so its fsync never delays the next
//! group commit: the flusher hands it each durable generation, and it writes the newest one it
//! has (older ones it has not written yet are skipped). The file lags behind sled by at most
//! the commits of one fsync, and never runs ahead of it.

use std::sync::mpsc;

use tokio::sync::oneshot;

use crate::store::highwater::HighWater;

/// Why a flush did not make the writes durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum FlushError {
    /// The flusher thread has ended (the store is closing, or the thread died).
    #[error("the store flusher has stopped")]
    Stopped,
    /// sled failed to bump the generation or to flush; the text is its error.
    #[error("{0}")]
    Failed(String),
}

/// A caller waiting for its writes to be durable.
type Waiter = oneshot::Sender<Result<(), FlushError>>;

/// The handle of the flusher thread. Dropping it ends the thread and waits for it, so the
/// store's files are released as soon as the store is dropped.
pub(super) struct Flusher {
    queue: Option<mpsc::Sender<Waiter>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The thread writing durable generations to the high-water file.
struct MarkWriter {
    generations: mpsc::Sender<u64>,
    thread: std::thread::JoinHandle<()>,
}

impl Flusher {
    /// Starts the flusher thread for `db`, whose generation is `generation`. Each flush
    /// bumps the generation and, once sled made it durable, records it in `highwater`
    /// (on the mark writer's thread, so neither the waiters nor the next commit wait for
    /// that small fsync).
    pub(super) fn start(
        db: sled::Db,
        mut generation: u64,
        highwater: Option<HighWater>,
    ) -> std::io::Result<Flusher> {
        let (queue, waiters) = mpsc::channel::<Waiter>();
        let thread = std::thread::Builder::new()
            .name("chela-store-flush".into())
            .spawn(move || {
                // Started here so that it ends (and is joined) when the flusher ends.
                let marks = match highwater.map(MarkWriter::start).transpose() {
                    Ok(marks) => marks,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot start the high-water writer; the mark stays where it is");
                        None
                    }
                };
                while let Ok(first) = waiters.recv() {
                    let mut batch = vec![first];
                    batch.extend(waiters.try_iter());
                    let flushed = super::highwater::bump_generation(&db, generation)
                        .map_err(|e| FlushError::Failed(e.to_string()))
                        .and_then(|next| {
                            db.flush()
                                .map(|_| next)
                                .map_err(|e| FlushError::Failed(e.to_string()))
                        });
                    for waiter in batch {
                        let _ = waiter.send(flushed.clone().map(|_| ()));
                    }
                    if let Ok(next) = flushed {
                        generation = next;
                        if let Some(marks) = &marks {
                            marks.record(next);
                        }
                    }
                }
                if let Some(marks) = marks {
                    marks.finish();
                }
            })?;
        Ok(Flusher {
            queue: Some(queue),
            thread: Some(thread),
        })
    }

    /// Waits until everything written before the call is on disk.
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

impl MarkWriter {
    /// Starts the thread writing to `file`.
    fn start(file: HighWater) -> std::io::Result<MarkWriter> {
        let (generations, durable) = mpsc::channel::<u64>();
        let thread = std::thread::Builder::new()
            .name("chela-store-mark".into())
            .spawn(move || {
                while let Ok(first) = durable.recv() {
                    let newest = durable.try_iter().fold(first, u64::max);
                    write_mark(&file, newest);
                }
            })?;
        Ok(MarkWriter {
            generations,
            thread,
        })
    }

    /// Hands over `generation`, now durable in sled.
    fn record(&self, generation: u64) {
        // Err: the thread is gone (it only ends when this sender closes).
        let _ = self.generations.send(generation);
    }

    /// Writes what is left and ends the thread.
    fn finish(self) {
        drop(self.generations);
        let _ = self.thread.join();
    }
}

/// Writes `generation` to the high-water file; a failure is logged (the mark only lags
/// behind, which can hide a rollback but never raises a false one).
fn write_mark(file: &HighWater, generation: u64) {
    if let Err(e) = file.write(generation, super::now_ms()) {
        tracing::warn!(error = %e, "cannot write the store's high-water mark");
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the flush it may be doing.
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
