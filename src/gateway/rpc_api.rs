//! The gateway's side of the RPC's port ([`GatewayApi`]): the core and its router.

use std::sync::Arc;

use chela_channel::{BoxFuture, Inbound, SinkError};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::Core;
use super::remote::Stopped;
use super::status::StatusReport;
use crate::agent::tools::cron::CronAction;
use crate::config::Config;
use crate::domain::events::LiveEvent;
use crate::inbound::route::Accepted;
use crate::intake::Router;
use crate::lane::{LaneError, StopReport};
use crate::metrics::{Gauges, Readiness};
use crate::rpc::RpcChannel;
use crate::rpc::api::CronReply;
use crate::rpc::api::{Aborted, GatewayApi};
use crate::rpc::protocol::Fault;
use crate::store::{OutboxEntry, Store};

/// The RPC's view of a running gateway.
pub struct CoreApi {
    core: Arc<Core>,
    router: Router,
}

impl CoreApi {
    /// The API of `core`.
    pub fn new(core: Arc<Core>) -> Self {
        let router = Router::new(core.intake.clone());
        CoreApi { core, router }
    }
}

/// The cursor `/readyz` reads to see the store answer (never written).
const READY_PROBE: &str = "chela:readyz";

impl CoreApi {
    /// Each running channel, by name, and whether it is connected.
    fn channel_states(&self) -> Vec<(String, bool)> {
        let mut states: Vec<(String, bool)> = self
            .core
            .notices
            .channels()
            .iter()
            .map(|(name, channel)| (name.clone(), channel.connected()))
            .collect();
        states.sort();
        states
    }
}

impl GatewayApi for CoreApi {
    fn submit(&self, key: String, inbound: Inbound) -> BoxFuture<'_, Result<Accepted, SinkError>> {
        Box::pin(self.router.accept_tracked(key, inbound))
    }

    fn abort<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Aborted, LaneError>> {
        Box::pin(async move {
            let here = self.core.placement.node().map(str::to_owned);
            Ok(match super::remote::stop(&self.core, key, false).await {
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
        self.core.default_session_key()
    }

    fn live_events(&self) -> broadcast::Receiver<LiveEvent> {
        self.core.feed.subscribe()
    }

    fn cron(&self, action: CronAction) -> BoxFuture<'_, Result<CronReply, Fault>> {
        Box::pin(async move {
            super::cron_operator::call(&self.core, action)
                .await
                .map_err(super::cron_operator::fault)
        })
    }

    fn close_binding<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<String>, Fault>> {
        Box::pin(async move {
            match self.core.acp.close(key).await {
                Ok(binding) => Ok(binding.map(|b| b.harness)),
                Err(e) => Err(Fault::internal(e.to_string())),
            }
        })
    }

    fn retry_dead_letter(&self, id: u64) -> BoxFuture<'_, Result<Option<OutboxEntry>, Fault>> {
        Box::pin(async move {
            let core = &self.core;
            let internal = |e: crate::store::StoreError| Fault::internal(e.to_string());
            if core.placement.node().is_some() {
                let dead = core.store.dead_letters().map_err(internal)?;
                if let Some(entry) = dead.iter().find(|d| d.id == id)
                    && !core.placement.runs_here(&entry.session_key)
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
            let revived = core
                .store
                .revive_dead_letter(id, now)
                .await
                .map_err(internal)?;
            if let Some(entry) = &revived {
                let journal = match &entry.run_id {
                    Some(run) => core.store.journal(run).map_err(internal)?,
                    None => None,
                };
                tracing::info!(id, session = %entry.session_key, "a dead letter is sent again");
                core.outbox
                    .submit(crate::delivery::Delivery::recorded(entry.clone(), journal));
            }
            Ok(revived)
        })
    }

    fn status(&self) -> BoxFuture<'_, Result<Value, Fault>> {
        Box::pin(async move {
            let report = StatusReport::from_core(&self.core)
                .await
                .map_err(|e| Fault::internal(e.to_string()))?;
            serde_json::to_value(report).map_err(|e| Fault::internal(e.to_string()))
        })
    }

    fn readiness(&self) -> BoxFuture<'_, Readiness> {
        Box::pin(async move {
            // A read the store must answer (PostgreSQL: a round trip to the server), and no
            // damage met by an earlier read or write (the gateway stops on it).
            let store_error = match self.core.store.damage() {
                Some(e) => {
                    tracing::warn!(error = %e, "readyz: the store is damaged");
                    Some("damaged".to_owned())
                }
                None => self.core.store.get_cursor(READY_PROBE).err().map(|e| {
                    // The detail may name the database's host or user: the log has it.
                    tracing::warn!(error = %e, "readyz: the store does not answer");
                    "not answering".to_owned()
                }),
            };
            // In a cluster a channel whose intake another node leases is on standby here:
            // ready, though not connected.
            let leased_here = match self.core.placement.cluster() {
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
                    let standby = self.core.intake_is_exclusive(&name)
                        && leased_here.as_ref().is_some_and(|held| {
                            !crate::cluster::intake_lease::runs_here(&name, held)
                        });
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
            let store = self.core.store.clone();
            let path = self.core.config.store.path.clone();
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
                acp_sessions: self.core.acp.live_count() as u64,
                store_bytes,
                channels: self.channel_states(),
            }
        })
    }

    fn store(&self) -> &Store {
        &self.core.store
    }

    fn config(&self) -> &Config {
        &self.core.config
    }

    fn shutdown(&self) -> &CancellationToken {
        &self.core.shutdown
    }

    fn rpc_channel(&self) -> &Arc<RpcChannel> {
        &self.core.rpc
    }

    fn runs_elsewhere(&self) -> bool {
        self.core.placement.routes_where_it_runs()
    }
}
