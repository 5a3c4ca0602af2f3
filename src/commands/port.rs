//! What a chat command may use of the gateway: [`CommandContext`], the commands' port.
//! Everything a command can reach is listed here; the gateway maps it onto its state.

use std::path::Path;
use std::sync::Arc;

use chela_channel::{BoxFuture, Channel, Conversation, Inbound};
use tokio_util::sync::CancellationToken;

use crate::acp::AcpManager;
use crate::agent::compact::CompactError;
use crate::agent::provider::Provider;
use crate::cluster::Stopped;
use crate::config::QueueLimits;
use crate::domain::events::Compacted;
use crate::lane::Lanes;
use crate::store::Store;

/// The gateway as commands see it.
pub trait CommandContext: Send + Sync {
    /// The session lanes: stop, queue settings, transcript writes and jobs.
    fn lanes(&self) -> &Lanes;
    /// The store (transcripts, model choices).
    fn store(&self) -> &Store;
    /// Coding-agent bindings and their processes.
    fn acp(&self) -> &AcpManager;
    /// The model backend of session `key`'s agent.
    fn provider(&self, key: &str) -> &Arc<dyn Provider>;
    /// What model calls cost, for session `key`'s agent.
    fn pricing(&self, key: &str) -> &crate::agent::pricing::Pricing;
    /// The context window of session `key`'s agent's model in tokens (0: unknown).
    fn context_window(&self, key: &str) -> u64;
    /// How much session `key`'s agent's model reasons unless the session says
    /// (`[model] thinking`).
    fn thinking(&self, key: &str) -> crate::config::Thinking;
    /// `[tts]`: voice replies (`/tts`).
    fn tts(&self) -> &crate::config::TtsConfig;
    /// `[model] models`: the names `/model` may choose (empty: any).
    fn allowed_models(&self) -> &[String];
    /// Whether the sender of `inbound` may switch to a model by name (`/model NAME`).
    fn may_choose_models(&self, inbound: &Inbound) -> bool;
    /// The bounds of what `/queue` may set (`[queue] max_cap`, `max_debounce_ms`).
    fn queue_limits(&self) -> QueueLimits;
    /// The workspace of session `key`'s agent.
    fn workspace(&self, key: &str) -> &Path;
    /// The session key of `inbound` (for a conversation a command opens).
    fn session_key(&self, inbound: &Inbound) -> String;
    /// The channel named `name`, if it runs (to open a thread).
    fn channel(&self, name: &str) -> Option<Arc<dyn Channel>>;
    /// Answers `inbound` (privately for a native command).
    fn answer<'a>(&'a self, inbound: &'a Inbound, text: &'a str) -> BoxFuture<'a, ()>;
    /// Says `text` in `to` outside any run.
    fn say<'a>(&'a self, to: &'a Conversation, text: &'a str) -> BoxFuture<'a, ()>;
    /// Whether an answer to `inbound` can carry a menu ([`CommandContext::offer`]); none by
    /// default.
    fn offers_menus(&self, inbound: &Inbound) -> bool {
        let _ = inbound;
        false
    }
    /// Answers `inbound` with `text` and a menu of `choices` (label, the typed command it
    /// stands for) where [`CommandContext::offers_menus`]; elsewhere the text alone.
    fn offer<'a>(
        &'a self,
        inbound: &'a Inbound,
        text: &'a str,
        choices: &'a [(String, String)],
    ) -> BoxFuture<'a, ()> {
        let _ = choices;
        self.answer(inbound, text)
    }
    /// `/stop` for session `key`, with its sub-agents, on the node that runs it.
    fn stop<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Stopped>;
    /// `/approve ARGS` from conversation `to`: answers an exec approval or lists the
    /// waiting ones that conversation may see (of every node).
    fn approve<'a>(&'a self, to: &'a Conversation, args: &'a str) -> BoxFuture<'a, String>;
    /// The work of `/compact` for session `key`: summarizes all but the newest turn until
    /// the token fires (the caller runs it as a lane job).
    fn compactor(&self, key: String) -> Compactor;
}

/// `/compact`'s work, to be run once with the token that cancels it.
pub type Compactor = Box<
    dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<Option<Compacted>, CompactError>>
        + Send,
>;
