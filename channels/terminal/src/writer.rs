//! The terminal's writer: a thread of its own writes what the screen queues, in order, so no
//! caller waits on the terminal while it holds the screen (a line editor's printer takes one
//! message at a time and waits for the editor to read it; a paused pager stops stdout).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Longest wait of [`Writer::hold`] for a write under way (one the editor has not taken yet).
const HOLD_WAIT: Duration = Duration::from_millis(50);

/// What the writer thread is asked.
enum Job {
    /// Write this.
    Text(String),
    /// Say when everything queued before has been written.
    Settled(mpsc::Sender<()>),
}

/// The output, shared with the thread writing to it.
pub type Shared = Arc<Mutex<Box<dyn Write + Send>>>;

/// What the writer and its thread share.
struct Common {
    out: Shared,
    /// Why the thread stopped writing, once it has.
    failed: Mutex<Option<String>>,
    /// Closed while [`Writer::hold`] writes: the thread waits.
    gate: AtomicBool,
    /// Set while the thread writes.
    busy: AtomicBool,
}

impl Common {
    /// The thread's way in to a write: busy first, then the gate (so that either it sees the
    /// gate closed, or [`Writer::hold`] sees it busy).
    fn enter(&self) {
        loop {
            self.busy.store(true, Ordering::SeqCst);
            if !self.gate.load(Ordering::SeqCst) {
                return;
            }
            self.busy.store(false, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Writes `text`; false (and why kept) when the output failed.
    fn write(&self, text: &str) -> bool {
        self.enter();
        let written = {
            let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        };
        self.busy.store(false, Ordering::SeqCst);
        match written {
            Ok(()) => true,
            Err(e) => {
                let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
                *failed = Some(e.to_string());
                false
            }
        }
    }

    /// The thread: every job in order, until the writer is gone or a write fails.
    fn run(&self, queue: mpsc::Receiver<Job>) {
        for job in queue {
            match job {
                Job::Text(text) => {
                    if !self.write(&text) {
                        return;
                    }
                }
                Job::Settled(done) => {
                    let _ = done.send(());
                }
            }
        }
    }
}

/// Where the screen's text goes.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Job>,
    common: Arc<Common>,
}

impl Writer {
    /// Starts the thread writing to `out`; `None` when no thread can be started.
    pub fn start(out: Shared) -> Option<Writer> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let common = Arc::new(Common {
            out,
            failed: Mutex::new(None),
            gate: AtomicBool::new(false),
            busy: AtomicBool::new(false),
        });
        let thread = common.clone();
        let started = std::thread::Builder::new()
            .name("chela-screen".into())
            .spawn(move || thread.run(queue));
        match started {
            Ok(_) => Some(Writer { jobs, common }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the terminal's writer");
                None
            }
        }
    }

    /// Queues `text`; an error when the terminal can no longer be written (why).
    pub fn write(&self, text: String) -> Result<(), String> {
        if self.jobs.send(Job::Text(text)).is_ok() {
            return Ok(());
        }
        let failed = self
            .common
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Err(failed
            .clone()
            .unwrap_or_else(|| "the terminal's writer stopped".to_owned()))
    }

    /// Writes `text` at once, ahead of what is queued, while the thread waits: the editor
    /// clearing the line just entered before anything else reaches the terminal. A write of
    /// the thread under way is waited for (50 ms at most: one the editor has not taken yet
    /// waits for the editor itself).
    pub fn hold(&self, text: &str) {
        let common = &self.common;
        common.gate.store(true, Ordering::SeqCst);
        let since = Instant::now();
        while common.busy.load(Ordering::SeqCst) && since.elapsed() < HOLD_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Ok(mut out) = common.out.try_lock() {
            let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        }
        common.gate.store(false, Ordering::SeqCst);
    }

    /// Waits (at most `wait`) until everything queued so far is written; false when it was
    /// not in that time.
    pub fn settle(&self, wait: Duration) -> bool {
        let (done, written) = mpsc::channel();
        if self.jobs.send(Job::Settled(done)).is_err() {
            return false;
        }
        written.recv_timeout(wait).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kept::Kept;

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("gone"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_is_written_in_order_and_settle_waits_for_it() {
        let kept = Kept::default();
        let writer = Writer::start(Arc::new(Mutex::new(Box::new(kept.clone())))).unwrap();
        for i in 0..100 {
            writer.write(format!("{i},")).unwrap();
        }
        assert!(writer.settle(Duration::from_secs(5)));
        let all = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
        let expected: String = (0..100).map(|i| format!("{i},")).collect();
        assert_eq!(all, expected);
    }

    #[test]
    fn a_failed_write_is_told_to_the_next_writer() {
        let writer = Writer::start(Arc::new(Mutex::new(Box::new(Broken)))).unwrap();
        writer.write("x".into()).unwrap();
        assert!(!writer.settle(Duration::from_secs(5)));
        assert_eq!(writer.write("y".into()), Err("gone".to_owned()));
    }

    #[test]
    fn what_is_held_goes_out_ahead_of_the_queue() {
        let kept = Kept::default();
        let writer = Writer::start(Arc::new(Mutex::new(Box::new(kept.clone())))).unwrap();
        writer.hold("first,");
        writer.write("then".into()).unwrap();
        assert!(writer.settle(Duration::from_secs(5)));
        assert_eq!(kept.0.lock().unwrap().as_slice(), b"first,then");
    }
}
