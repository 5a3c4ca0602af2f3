//! [`CodingAgent`]: what chela needs from an external coding agent (SPEC 4). The ACP crate
//! stays behind it ([`super::client::AcpClient`] is the implementation), so the rest of chela
//! does not change when the crate's API does.

use std::path::Path;

use agent_client_protocol::v1::schema::SessionUpdate;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::AcpError;
use super::client::{AcpClient, TurnEnd};
use super::media::Prompt;
use crate::agent::provider::BoxFuture;

/// A running coding agent (one process) serving sessions.
pub trait CodingAgent: Send + Sync {
    /// The agent's name and version.
    fn describe(&self) -> String;
    /// Its process id, for `/acp status`.
    fn pid(&self) -> u32;
    /// True while the process runs.
    fn is_alive(&self) -> bool;
    /// Whether it resumes sessions (`session/load`).
    fn can_load(&self) -> bool;
    /// Starts a session in `cwd`; returns its id.
    fn new_session<'a>(&'a self, cwd: &'a Path) -> BoxFuture<'a, Result<String, AcpError>>;
    /// Resumes session `id` in `cwd`.
    fn load_session<'a>(
        &'a self,
        id: &'a str,
        cwd: &'a Path,
    ) -> BoxFuture<'a, Result<(), AcpError>>;
    /// Whether it takes `image` content blocks in prompts (`promptCapabilities.image`).
    fn accepts_images(&self) -> bool {
        false
    }
    /// Runs one prompt turn, streaming its updates; `cancel` stops it.
    fn prompt<'a>(
        &'a self,
        id: &'a str,
        prompt: &'a Prompt,
        updates: mpsc::Sender<SessionUpdate>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<TurnEnd, AcpError>>;
    /// Closes session `id`.
    fn close_session<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()>;
    /// Ends the process and its whole process group.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

impl CodingAgent for AcpClient {
    fn describe(&self) -> String {
        self.agent_name().to_owned()
    }

    fn pid(&self) -> u32 {
        AcpClient::pid(self)
    }

    fn is_alive(&self) -> bool {
        AcpClient::is_alive(self)
    }

    fn can_load(&self) -> bool {
        AcpClient::can_load(self)
    }

    fn new_session<'a>(&'a self, cwd: &'a Path) -> BoxFuture<'a, Result<String, AcpError>> {
        Box::pin(AcpClient::new_session(self, cwd))
    }

    fn load_session<'a>(
        &'a self,
        id: &'a str,
        cwd: &'a Path,
    ) -> BoxFuture<'a, Result<(), AcpError>> {
        Box::pin(AcpClient::load_session(self, id, cwd))
    }

    fn accepts_images(&self) -> bool {
        AcpClient::accepts_images(self)
    }

    fn prompt<'a>(
        &'a self,
        id: &'a str,
        prompt: &'a Prompt,
        updates: mpsc::Sender<SessionUpdate>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<TurnEnd, AcpError>> {
        Box::pin(AcpClient::prompt_with(self, id, prompt, updates, cancel))
    }

    fn close_session<'a>(&'a self, id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(AcpClient::close_session(self, id))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(AcpClient::shutdown(self))
    }
}
