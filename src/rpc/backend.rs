//! The RPC's port ([`GatewayApi`]) over a running gateway's stages: intake's router for
//! turns, the lanes and placement for stops, the store, delivery and the scheduler for
//! the operator's methods, and the run feed.

use std::sync::Arc;

use chela_channel::{BoxFuture, Inbound, SinkError};
use serde_json::Value;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use crate::acp::AcpManager;
use crate::agent::tools::cron::CronAction;
use crate::cluster::Placement;
use crate::cluster::Stopped;
use crate::cluster::intake_lease;
use crate::config::Config;
use crate::cron::Fire;
use crate::delivery::{Notices, Outbox};
use crate::domain::events::LiveEvent;
use crate::inbound::route::Accepted;
use crate::intake::Router;
use crate::lane::Lanes;
use crate::lane::{LaneError, StopReport};
use crate::metrics::{Gauges, Readiness};
use crate::rpc::RpcChannel;
use crate::rpc::api::CronReply;
use crate::rpc::api::{Aborted, GatewayApi};
use crate::rpc::cron_operator;
use crate::rpc::protocol::Fault;
use crate::rpc::status::StatusReport;
use crate::runner::stop::Stopper;
use crate::store::{OutboxEntry, Store};

/// What [`Backend::new`] takes: the handles of the stages the RPC reaches.
pub struct BackendParts {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The store.
    pub store: Store,
    /// Takes the turns the RPC submits.
    pub router: Router,
    /// The session lanes (stops, live runs).
    pub lanes: Lanes,
    /// Where sessions run.
    pub placement: Arc<dyn Placement>,
    /// The channels (their states).
    pub notices: Notices,
    /// Delivers replies (a dead letter sent again).
    pub outbox: Outbox,
    /// Coding-agent bindings.
    pub acp: Arc<AcpManager>,
    /// The run events the RPC's feed reads.
    pub feed: broadcast::Sender<LiveEvent>,
    /// Wakes the scheduler when jobs change.
    pub cron_wake: Arc<Notify>,
    /// Queues a job's run now.
    pub fire: Arc<dyn Fire>,
    /// Where replies to RPC messages go.
    pub rpc: Arc<RpcChannel>,
    /// The questions waiting in chats (pairing requests asked in owners' DMs).
    pub desk: Arc<crate::questions::Desk>,
    /// Fires when the gateway stops.
    pub shutdown: CancellationToken,
    /// The MCP servers (`None`: none configured).
    pub mcp: Option<Arc<crate::mcp::Hub>>,
}

/// The RPC's view of a running gateway: the stages' handles it was given.
pub struct Backend(BackendParts);

impl Backend {
    /// The RPC's view of the stages in `parts`.
    pub fn new(parts: BackendParts) -> Self {
        Backend(parts)
    }
}

/// The cursor `/readyz` reads to see the store answer (never written).
const READY_PROBE: &str = "chela:readyz";

impl Backend {
    /// Each running channel, by name, and whether it is connected.
    fn channel_states(&self) -> Vec<(String, bool)> {
        let mut states: Vec<(String, bool)> = self
            .0
            .notices
            .channels()
            .iter()
            .map(|(name, channel)| (name.clone(), channel.connected()))
            .collect();
        states.sort();
        states
    }
}

impl GatewayApi for Backend {
    fn submit(&self, key: String, inbound: Inbound) -> BoxFuture<'_, Result<Accepted, SinkError>> {
        Box::pin(self.0.router.accept_tracked(key, inbound))
    }

    fn abort<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Aborted, LaneError>> {
        Box::pin(async move {
            let here = self.0.placement.node().map(str::to_owned);
            let stopper = Stopper::new(&self.0.store, &self.0.lanes, &*self.0.placement);
            Ok(match stopper.stop(key, false).await {
                Stopped::Here(report, _) => Aborted {
                    report: Some(report?),
                    node: here,
                    not_handed: None,
                },
                Stopped::There(node, done) => Aborted {
                    report: done.transpose()?.map(|(report, _)| report),
                    node: Some(node),
                    not_handed: None,
                },
                Stopped::Nowhere => Aborted {
                    report: Some(StopReport::default()),
                    node: None,
                    not_handed: None,
                },
                Stopped::Unknown => Aborted {
                    report: None,
                    node: None,
                    not_handed: Some(
                        "which node runs the session could not be read (the database could not be reached)"
                            .to_owned(),
                    ),
                },
                Stopped::NotHanded(node, busy) => Aborted {
                    report: None,
                    node: Some(node),
                    not_handed: Some(
                        match busy {
                            true => "the node was too busy to take it",
                            false => {
                                "the call could not be sent (the database could not be reached)"
                            }
                        }
                        .to_owned(),
                    ),
                },
            })
        })
    }

    fn default_session_key(&self) -> String {
        crate::intake::default_session_key(&self.0.config)
    }

    fn live_events(&self) -> broadcast::Receiver<LiveEvent> {
        self.0.feed.subscribe()
    }

    fn cron(&self, action: CronAction) -> BoxFuture<'_, Result<CronReply, Fault>> {
        Box::pin(async move {
            let jobs = cron_operator::Jobs {
                store: &self.0.store,
                config: &self.0.config,
                wake: &self.0.cron_wake,
                fire: &*self.0.fire,
            };
            cron_operator::call(jobs, action)
                .await
                .map_err(cron_operator::fault)
        })
    }

    fn close_binding<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, Fault>> {
        Box::pin(async move {
            match self.0.acp.close(key).await {
                Ok(binding) => Ok(binding.map(|b| b.harness)),
                Err(e) => Err(Fault::internal(e.to_string())),
            }
        })
    }

    fn retry_dead_letter(&self, id: u64) -> BoxFuture<'_, Result<Option<OutboxEntry>, Fault>> {
        Box::pin(async move {
            let internal = |e: crate::store::StoreError| Fault::internal(e.to_string());
            if self.0.placement.node().is_some() {
                let dead = self.0.store.dead_letters().map_err(internal)?;
                if let Some(entry) = dead.iter().find(|d| d.id == id)
                    && !self.0.placement.runs_here(&entry.session_key)
                {
                    return Err(Fault::new(
                        crate::rpc::protocol::UNAVAILABLE,
                        format!(
                            "another node runs {}: retry it on the node that owns it (chela status lists them)",
                            entry.session_key
                        ),
                    ));
                }
            }
            let now = crate::domain::message::now_ms();
            let revived = self
                .0
                .store
                .revive_dead_letter(id, now)
                .await
                .map_err(internal)?;
            if let Some(entry) = &revived {
                let journal = match &entry.run_id {
                    Some(run) => self.0.store.journal(run).map_err(internal)?,
                    None => None,
                };
                tracing::info!(id, session = %entry.session_key, "a dead letter is sent again");
                self.0
                    .outbox
                    .submit(crate::delivery::Delivery::recorded(entry.clone(), journal));
            }
            Ok(revived)
        })
    }

    fn send_to_chat<'a>(
        &'a self,
        key: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<crate::rpc::api::Posted, Fault>> {
        let chats = crate::rpc::session_send::Chats {
            store: self.0.store.clone(),
            notices: self.0.notices.clone(),
            lanes: self.0.lanes.clone(),
        };
        Box::pin(async move {
            // On a cluster, the node running the session orders its transcript writes.
            if self.0.placement.node().is_some() && !self.0.placement.runs_here(key) {
                return Err(Fault::new(
                    crate::rpc::protocol::UNAVAILABLE,
                    format!(
                        "another node runs {key}: send it through that node's RPC (chela status lists them)"
                    ),
                ));
            }
            crate::rpc::session_send::post(chats, key, text).await
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<Value, Fault>> {
        Box::pin(async move {
            let mut channels: Vec<String> = self.0.notices.channels().keys().cloned().collect();
            channels.sort();
            let at = self.0.config.store.describe();
            let node = self.0.placement.cluster().map(|c| c.node().to_owned());
            let lanes = &self.0.lanes;
            let report =
                StatusReport::running(&self.0.store, &at, channels, lanes, node.as_deref());
            let mut report = report.await.map_err(|e| Fault::internal(e.to_string()))?;
            report.mcp = (self.0.mcp.iter())
                .flat_map(|hub| hub.status())
                .map(crate::rpc::status::McpLine::of)
                .collect();
            serde_json::to_value(report).map_err(|e| Fault::internal(e.to_string()))
        })
    }

    fn readiness(&self) -> BoxFuture<'_, Readiness> {
        Box::pin(async move {
            // A read the store must answer (PostgreSQL: a round trip to the server), and no
            // damage met by an earlier read or write (the gateway stops on it).
            let store_error = match self.0.store.damage() {
                Some(e) => {
                    tracing::warn!(error = %e, "readyz: the store is damaged");
                    Some("damaged".to_owned())
                }
                None => self.0.store.get_cursor(READY_PROBE).err().map(|e| {
                    // The detail may name the database's host or user: the log has it.
                    tracing::warn!(error = %e, "readyz: the store does not answer");
                    "not answering".to_owned()
                }),
            };
            // In a cluster a channel whose intake another node leases is on standby here:
            // ready, though not connected.
            let leased_here = match self.0.placement.cluster() {
                Some(cluster) => cluster
                    .coordinator()
                    .nodes()
                    .await
                    .ok()
                    .and_then(|nodes| nodes.into_iter().find(|n| n.id == cluster.node()))
                    .map(|n| n.intakes),
                None => None,
            };
            let channels = self
                .channel_states()
                .into_iter()
                .map(|(name, up)| {
                    let on_cluster = self.0.placement.cluster().is_some();
                    let standby = intake_lease::is_exclusive(&self.0.config, on_cluster, &name)
                        && leased_here
                            .as_ref()
                            .is_some_and(|held| !intake_lease::runs_here(&name, held));
                    (name, up || standby)
                })
                .collect();
            Readiness {
                store_error,
                channels,
            }
        })
    }

    fn gauges(&self) -> BoxFuture<'_, Gauges> {
        Box::pin(async move {
            let store = self.0.store.clone();
            let path = self.0.config.store.path.clone();
            let read = tokio::task::spawn_blocking(move || {
                let pending = store.pending_count().ok();
                let bytes = match store.stored_bytes() {
                    Ok(Some(bytes)) => Some(bytes),
                    Ok(None) => crate::metrics::disk_usage(&path).ok(),
                    Err(_) => None,
                };
                (pending, bytes)
            });
            let (pending_turns, store_bytes) = read.await.unwrap_or((None, None));
            Gauges {
                pending_turns,
                acp_sessions: self.0.acp.live_count() as u64,
                store_bytes,
                channels: self.channel_states(),
            }
        })
    }

    fn store(&self) -> &Store {
        &self.0.store
    }

    fn pairing_answered(
        &self,
        request: crate::store::PairingRequest,
        approved: bool,
    ) -> BoxFuture<'_, ()> {
        let parts = &self.0;
        let (notices, router) = (parts.notices.clone(), parts.router.clone());
        Box::pin(async move {
            if let Some(paired) = parts.desk.answered_pairing(request, approved).await {
                // On a task of its own: the held messages may wait for a run (a `/new`
                // among them), and the operator's approval does not wait for them.
                tokio::spawn(async move {
                    crate::questions::pairing::welcome(&notices, &router, paired).await;
                });
            }
        })
    }

    fn config(&self) -> &Config {
        &self.0.config
    }

    fn shutdown(&self) -> &CancellationToken {
        &self.0.shutdown
    }

    fn rpc_channel(&self) -> &Arc<RpcChannel> {
        &self.0.rpc
    }

    fn runs_elsewhere(&self) -> bool {
        self.0.placement.routes_where_it_runs()
    }
}
