//! The port the RPC talks through: a narrow view of the gateway that the composition root
//! implements (the `gateway` module does, for its core). The RPC knows nothing else about the
//! gateway, so it sits below it.

use std::sync::Arc;

use chela_channel::{BoxFuture, Inbound, SinkError};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::channel::RpcChannel;
use super::protocol::Fault;
use crate::agent::tools::cron::CronAction;
use crate::config::Config;
use crate::domain::events::LiveEvent;
use crate::inbound::route::Accepted;
use crate::lane::{LaneError, StopReport};
use crate::metrics::{Gauges, Readiness};
use crate::store::{CronJob, OutboxEntry, Store};

/// What `abort` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aborted {
    /// What the stop did; `None` when it was handed to [`Aborted::node`], which did not
    /// confirm in time.
    pub report: Option<StopReport>,
    /// On a cluster, the node that runs the session (where the stop acted or was handed);
    /// `None` on a single gateway, or when no node runs the session now.
    pub node: Option<String>,
    /// Why the stop never reached [`Aborted::node`] (nothing was stopped there): it could
    /// not be sent, or the node refused it as busy; with no node, which node runs the
    /// session could not be read. `None` when it was handed over.
    pub not_handed: Option<String>,
}

/// What the gateway answers to a [`CronAction`] of the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CronReply {
    /// Every job, by id.
    Jobs(Vec<CronJob>),
    /// The job made; `answers_known`: its session has a chat to answer in already (else its
    /// runs are skipped until it has one).
    Added {
        /// The job.
        job: CronJob,
        /// Whether the session has a chat to answer in.
        answers_known: bool,
    },
    /// The job removed.
    Removed(CronJob),
    /// Job `id`'s turn was queued now as run `run_id`.
    Queued {
        /// The job.
        id: String,
        /// Its run (`run-<seq>`, for `agent.wait`).
        run_id: String,
    },
}

/// Where `sessions.send` posted a text, and whether the transcript has it yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The chat it went to (the session's remembered conversation).
    pub to: chela_channel::Conversation,
    /// Whether the session's transcript recorded it before the answer; `false` when a run
    /// going on in the session holds the write back (it is recorded once that run ends).
    pub recorded: bool,
    /// Whether the post ended before the answer; `false`: the platform is slow, the post
    /// (and the record) go on.
    pub done: bool,
}

/// What the RPC may ask of the gateway.
pub trait GatewayApi: Send + Sync + 'static {
    /// Accepts `inbound` for session `key` on the path every channel's messages take.
    fn submit(&self, key: String, inbound: Inbound) -> BoxFuture<'_, Result<Accepted, SinkError>>;
    /// `/stop` for session `key`: queued turns dropped, the run cancelled and settled, on
    /// the node that runs the session. When which node runs it could not be read (the
    /// database could not be reached), nothing is stopped and [`Aborted::not_handed`] says
    /// so, with no node.
    fn abort<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Aborted, LaneError>>;
    /// The session `chela agent` uses when none is named.
    fn default_session_key(&self) -> String;
    /// Every run's events from now on.
    fn live_events(&self) -> broadcast::Receiver<LiveEvent>;
    /// The operator's `action` on the schedules (`cron.*`): any session, any job but the
    /// config's, checked as the agent's `cron` tool is.
    fn cron(&self, action: CronAction) -> BoxFuture<'_, Result<CronReply, Fault>>;
    /// Unbinds session `key` from its coding agent and ends the agent (`/acp close`): the
    /// harness of the binding it had, `None` when it had none.
    fn close_binding<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, Fault>>;
    /// Sends dead letter `id` again: back into the outbox (fresh attempts and time to live)
    /// and handed to the delivery worker; the entry, `None` when there is no such dead letter.
    /// In a cluster only the node running the entry's session may.
    fn retry_dead_letter(&self, id: u64) -> BoxFuture<'_, Result<Option<OutboxEntry>, Fault>>;
    /// Posts `text` as the bot into the chat session `key` last answered in (its remembered
    /// conversation) and records it in the session's transcript, so its agent sees it later;
    /// refused when the session has no chat (`sessions.send`).
    fn send_to_chat<'a>(
        &'a self,
        key: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Posted, Fault>>;
    /// The `status` report.
    fn status(&self) -> BoxFuture<'_, Result<Value, Fault>>;
    /// Whether the gateway is ready (`/readyz`): the store answers, each channel is connected.
    fn readiness(&self) -> BoxFuture<'_, Readiness>;
    /// The state `/metrics` reads when scraped.
    fn gauges(&self) -> BoxFuture<'_, Gauges>;
    /// The store (sessions, transcripts, pairing).
    fn store(&self) -> &Store;
    /// Pairing request `request` was approved (`approved`) or rejected through the RPC or
    /// the panel: the owners' messages about it end, and an approved stranger is told they
    /// are in and answered. By default nothing.
    fn pairing_answered(
        &self,
        request: crate::store::PairingRequest,
        approved: bool,
    ) -> BoxFuture<'_, ()> {
        let _ = (request, approved);
        Box::pin(async {})
    }
    /// The configuration in force.
    fn config(&self) -> &Config;
    /// Fires when the gateway stops.
    fn shutdown(&self) -> &CancellationToken;
    /// Where replies to messages sent through the RPC go.
    fn rpc_channel(&self) -> &Arc<RpcChannel>;
    /// Whether runs may go on other gateways sharing the store (`[cluster] enabled`): their
    /// ends never come on [`RpcApi::live_events`].
    fn runs_elsewhere(&self) -> bool {
        false
    }
}

/// The session key `asked` names (checked), or the default session when none is asked.
pub(super) fn session_or_default(
    api: &dyn GatewayApi,
    asked: Option<String>,
) -> Result<String, Fault> {
    match asked {
        Some(key) => crate::domain::session_key::SessionKey::parse(&key)
            .map(|k| k.to_string())
            .map_err(|e| Fault::params(format!("session {key:?}: {e}"))),
        None => Ok(api.default_session_key()),
    }
}
