//! Sessions: live state in memory, history persisted as JSON so that a new
//! process can `session/load` them.
//!
//! Each session is one file, `<state dir>/<session id>.json`:
//! `{"cwd": "/abs/dir", "history": [{"role": "user"|"agent", "text": ".."}, ..]}`.
//! The user's prompt is written when its turn starts; the agent's reply (the
//! text of all its message chunks) when the turn ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// Who said a history entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// The user's prompt, replayed as `user_message_chunk`.
    User,
    /// The agent's reply, replayed as `agent_message_chunk`.
    Agent,
}

/// One turn's half: a prompt or a reply.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// Who said it.
    pub role: Speaker,
    /// The whole text.
    pub text: String,
}

/// What is persisted per session.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stored {
    /// The session's working directory.
    pub cwd: PathBuf,
    /// Prompts and replies, oldest first.
    pub history: Vec<Entry>,
}

#[derive(Debug)]
struct Live {
    stored: Stored,
    /// Cancels the running prompt, if any.
    running: Option<CancellationToken>,
}

/// Why a session operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// No such session in this process (or, for load, on disk).
    NotFound,
    /// The session already has a prompt running.
    Busy,
    /// Reading or writing the state dir failed.
    Io(String),
}

/// All sessions of this process, plus the state dir they persist to.
#[derive(Clone, Debug)]
pub struct Sessions {
    dir: Arc<PathBuf>,
    live: Arc<Mutex<HashMap<String, Live>>>,
}

impl Sessions {
    /// Sessions persisted under `dir` (created if missing).
    pub fn new(dir: PathBuf) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            dir: Arc::new(dir),
            live: Arc::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Live>> {
        // A poisoned map only means another handler panicked mid-update; the
        // map itself is still usable for a test fixture.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Creates and persists a new session; returns its id.
    pub fn create(&self, cwd: PathBuf) -> Result<String, StoreError> {
        let id = format!("fake-{}", uuid::Uuid::new_v4());
        let stored = Stored {
            cwd,
            history: Vec::new(),
        };
        write_stored(&self.path(&id), &stored)?;
        self.lock().insert(
            id.clone(),
            Live {
                stored,
                running: None,
            },
        );
        Ok(id)
    }

    /// Loads a session from disk into this process (with `cwd` from the
    /// request) and returns its history for replay.
    pub fn load(&self, id: &str, cwd: PathBuf) -> Result<Vec<Entry>, StoreError> {
        if !is_plain_id(id) {
            return Err(StoreError::NotFound);
        }
        let path = self.path(id);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound);
            }
            Err(error) => return Err(StoreError::Io(format!("{}: {error}", path.display()))),
        };
        let mut stored: Stored = serde_json::from_str(&text)
            .map_err(|error| StoreError::Io(format!("{}: {error}", path.display())))?;
        stored.cwd = cwd;
        let history = stored.history.clone();
        let mut live = self.lock();
        if let Some(old) = live.get(id).and_then(|old| old.running.as_ref()) {
            old.cancel();
        }
        live.insert(
            id.to_owned(),
            Live {
                stored,
                running: None,
            },
        );
        Ok(history)
    }

    /// Starts a turn: records the prompt, persists it and returns the
    /// session's cwd and the turn's cancel token.
    pub fn begin_turn(
        &self,
        id: &str,
        prompt: &str,
    ) -> Result<(PathBuf, CancellationToken), StoreError> {
        let (cwd, token, stored) = {
            let mut live = self.lock();
            let session = live.get_mut(id).ok_or(StoreError::NotFound)?;
            if session.running.is_some() {
                return Err(StoreError::Busy);
            }
            let token = CancellationToken::new();
            session.running = Some(token.clone());
            session.stored.history.push(Entry {
                role: Speaker::User,
                text: prompt.to_owned(),
            });
            (session.stored.cwd.clone(), token, session.stored.clone())
        };
        write_stored(&self.path(id), &stored)?;
        Ok((cwd, token))
    }

    /// Ends a turn: records the reply (if any), persists, frees the session.
    pub fn end_turn(&self, id: &str, reply: &str) -> Result<(), StoreError> {
        let stored = {
            let mut live = self.lock();
            let Some(session) = live.get_mut(id) else {
                // Closed during the turn: nothing left to record.
                return Ok(());
            };
            session.running = None;
            if !reply.is_empty() {
                session.stored.history.push(Entry {
                    role: Speaker::Agent,
                    text: reply.to_owned(),
                });
            }
            session.stored.clone()
        };
        write_stored(&self.path(id), &stored)
    }

    /// Cancels the running prompt of `id`; false if none runs.
    pub fn cancel(&self, id: &str) -> bool {
        let live = self.lock();
        match live.get(id).and_then(|session| session.running.as_ref()) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels any running prompt and forgets the session in this process
    /// (its file stays, so it can be loaded again).
    pub fn close(&self, id: &str) -> Result<(), StoreError> {
        let session = self.lock().remove(id).ok_or(StoreError::NotFound)?;
        if let Some(token) = session.running {
            token.cancel();
        }
        Ok(())
    }
}

/// Session ids become file names: refuse anything that could leave the dir.
fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn write_stored(path: &Path, stored: &Stored) -> Result<(), StoreError> {
    let text =
        serde_json::to_string_pretty(stored).map_err(|error| StoreError::Io(error.to_string()))?;
    // Write then rename, so a crash mid-write never leaves half a file.
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|error| StoreError::Io(format!("{}: {error}", path.display())))
}
