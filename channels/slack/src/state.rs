//! What the channel knows while it runs: the bot's user id, which Socket Mode connection
//! is up, the catch-up's gate, the cursors held below refused messages, the threads it took
//! messages from, and people's names.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::gate::Gate;
use crate::hold::Holds;

/// Names remembered at most (the oldest half goes when full).
const MAX_NAMES: usize = 4_096;
/// Threads remembered at most.
pub const MAX_THREADS: usize = 10_000;

/// The channel's shared state.
#[derive(Default)]
pub struct State {
    bot_user: OnceLock<String>,
    team: OnceLock<String>,
    /// The Socket Mode connection that said hello last, while it is open.
    connection: Mutex<Option<String>>,
    threads: Mutex<HashSet<String>>,
    names: Mutex<HashMap<String, String>>,
    catch_up: Gate,
    holds: Holds,
}

impl State {
    /// The bot's user id, once `auth.test` said it.
    pub fn bot_user(&self) -> Option<&str> {
        self.bot_user.get().map(String::as_str)
    }

    /// The bot's workspace (`auth.test`'s `team_id`), once known.
    pub fn team(&self) -> Option<&str> {
        self.team
            .get()
            .map(String::as_str)
            .filter(|t| !t.is_empty())
    }

    /// Keeps the bot's workspace id (the first one said).
    pub fn set_team(&self, team: &str) {
        let _ = self.team.set(team.to_string());
    }

    /// Keeps the bot's user id (the first one said).
    pub fn set_bot_user(&self, user: &str) {
        let _ = self.bot_user.set(user.to_string());
    }

    /// Whether Socket Mode said hello on a connection that is still open.
    pub fn connected(&self) -> bool {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Connection `id` said hello: Socket Mode is up, through it.
    pub fn hello(&self, id: &str) {
        *self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(id.to_string());
    }

    /// Connection `id` ended: Socket Mode is down, unless another connection said hello
    /// since (a late word about an old connection leaves the new one up).
    pub fn gone(&self, id: &str) {
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if connection.as_deref() == Some(id) {
            *connection = None;
        }
    }

    /// Socket Mode is down (the channel stopped).
    pub fn disconnected(&self) {
        *self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The catch-up's gate (live events wait on it).
    pub fn catch_up(&self) -> &Gate {
        &self.catch_up
    }

    /// The cursors held below messages the sink refused.
    pub fn holds(&self) -> &Holds {
        &self.holds
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

    #[test]
    fn a_late_word_about_an_old_connection_leaves_the_new_one_up() {
        let state = State::default();
        assert!(!state.connected());
        state.hello("0/0/1");
        state.hello("0/0/2");
        state.gone("0/0/1");
        assert!(state.connected(), "the old connection's end is stale");
        state.gone("0/0/2");
        assert!(!state.connected());
        state.hello("0/0/3");
        state.disconnected();
        assert!(!state.connected());
    }
}
