//! What the channel knows while it runs: the bot's user id, whether Socket Mode is up, the
//! threads it took messages from, and people's names.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// Names remembered at most (the oldest half goes when full).
const MAX_NAMES: usize = 4_096;
/// Threads remembered at most.
const MAX_THREADS: usize = 10_000;

/// The channel's shared state.
#[derive(Default)]
pub struct State {
    bot_user: OnceLock<String>,
    connected: AtomicBool,
    threads: Mutex<HashSet<String>>,
    names: Mutex<HashMap<String, String>>,
    caught_up: tokio::sync::watch::Sender<bool>,
    catching_up: AtomicBool,
}

impl State {
    /// The bot's user id, once `auth.test` said it.
    pub fn bot_user(&self) -> Option<&str> {
        self.bot_user.get().map(String::as_str)
    }

    /// Keeps the bot's user id (the first one said).
    pub fn set_bot_user(&self, user: &str) {
        let _ = self.bot_user.set(user.to_string());
    }

    /// Whether Socket Mode said hello on a connection that is still open.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Records whether Socket Mode is up.
    pub fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Relaxed);
    }

    /// Starts a catch-up unless one runs: `false` when one does. Live events wait for it.
    pub fn begin_catch_up(&self) -> bool {
        if self.catching_up.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.caught_up.send_replace(false);
        true
    }

    /// Ends the catch-up: live events go on.
    pub fn end_catch_up(&self) {
        self.catching_up.store(false, Ordering::Release);
        self.caught_up.send_replace(true);
    }

    /// Waits (at most `max`) until no catch-up runs.
    pub async fn wait_caught_up(&self, max: Duration) {
        let mut done = self.caught_up.subscribe();
        if self.catching_up.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(max, done.wait_for(|done| *done)).await;
        }
    }

    /// Whether the bot took a message of thread `channel`/`thread_ts` before.
    pub fn knows_thread(&self, channel: &str, thread_ts: &str) -> bool {
        let threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        threads.contains(&thread_key(channel, thread_ts))
    }

    /// Remembers thread `channel`/`thread_ts` as one the bot is in.
    pub fn remember_thread(&self, channel: &str, thread_ts: &str) {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        if threads.len() >= MAX_THREADS {
            threads.clear();
        }
        threads.insert(thread_key(channel, thread_ts));
    }

    /// A person's name, if known.
    pub fn name(&self, user: &str) -> Option<String> {
        let names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        names.get(user).cloned()
    }

    /// Remembers a person's name.
    pub fn remember_name(&self, user: &str, name: &str) {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if names.len() >= MAX_NAMES {
            let drop: Vec<String> = names.keys().take(MAX_NAMES / 2).cloned().collect();
            for key in drop {
                names.remove(&key);
            }
        }
        names.insert(user.to_string(), name.to_string());
    }
}

/// A thread's key (`C1/1700000000.000100`), as in the thread's cursor name.
pub fn thread_key(channel: &str, thread_ts: &str) -> String {
    format!("{channel}/{thread_ts}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_and_names_are_remembered() {
        let state = State::default();
        assert!(!state.knows_thread("C1", "1.1"));
        state.remember_thread("C1", "1.1");
        assert!(state.knows_thread("C1", "1.1"));
        assert!(!state.knows_thread("C2", "1.1"));
        state.remember_name("U1", "ann");
        assert_eq!(state.name("U1").as_deref(), Some("ann"));
        state.set_bot_user("UBOT");
        state.set_bot_user("UOTHER");
        assert_eq!(state.bot_user(), Some("UBOT"));
    }

    #[tokio::test(start_paused = true)]
    async fn live_events_wait_for_a_running_catch_up_but_not_forever() {
        let state = std::sync::Arc::new(State::default());
        state.wait_caught_up(Duration::from_secs(60)).await;
        assert!(state.begin_catch_up());
        assert!(!state.begin_catch_up(), "one at a time");
        let started = tokio::time::Instant::now();
        state.wait_caught_up(Duration::from_secs(10)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        let waiter = {
            let state = state.clone();
            tokio::spawn(async move { state.wait_caught_up(Duration::from_secs(600)).await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        state.end_catch_up();
        waiter.await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(12));
    }
}
