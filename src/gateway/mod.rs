//! The composition root: builds the store, the provider, the agent, lanes and the router,
//! runs the channels, recovers what a previous process left, and shuts everything down.

mod command_context;
mod intake_port;
mod pairing;
mod partition_work;
mod reach_host;
mod recover;
mod runner_port;
mod scheduler;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Channel, Inbound};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::ProviderError;
use crate::config::Config;
use crate::intake::Router;
use crate::lane::{LaneSettings, Lanes};
use crate::rpc::backend::{Backend, BackendParts};
use crate::store::{Store, StoreError};

pub use crate::domain::run::RunRecord;

/// How long shutdown waits at least for recorded finals to be delivered.
const OUTBOX_SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No usable model provider.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The RPC could not start.
    #[error(transparent)]
    Rpc(#[from] crate::rpc::RpcError),
    /// A channel failed for good.
    #[error("channel {channel}: {reason}")]
    Channel {
        /// Channel name.
        channel: String,
        /// What happened.
        reason: String,
    },
}

pub use crate::delivery::SendError;

/// The handles the gateway holds for its stages, private to it: the ports it implements for
/// them (intake, runner, commands, cluster, the agent's reach) map each stage's questions
/// onto these, and the RPC gets its [`Backend`](crate::rpc::backend::Backend) built from them.
struct Core {
    /// Configuration in force.
    config: Arc<Config>,
    /// The store.
    store: Store,
    /// The session lanes.
    lanes: Lanes,
    /// The agents: the default one and those of `[[agents]]`.
    agents: Arc<crate::agent::Agents>,
    /// Coding-agent bindings and their processes.
    acp: Arc<crate::acp::AcpManager>,
    /// The questions waiting in the chat: permission questions and exec approvals.
    desk: Arc<crate::questions::Desk>,
    /// The channels by name, and notices into them after their finals.
    notices: crate::delivery::Notices,
    /// Every run's events as they happen, this node's runs.
    live: broadcast::Sender<crate::domain::events::LiveEvent>,
    /// What the RPC's event feed reads: `live` itself, or in a cluster this node's events
    /// and the other nodes' (the cluster's relay).
    feed: broadcast::Sender<crate::domain::events::LiveEvent>,
    /// Fires when the gateway stops.
    shutdown: CancellationToken,
    /// Command tasks in flight (awaited at shutdown so no answer is cut off).
    tasks: tokio_util::task::TaskTracker,
    /// The intake stage: admission, routing, the durable queue.
    intake: Arc<crate::intake::Intake>,
    /// Where replies to messages sent through the RPC go (also in `channels`).
    rpc: Arc<crate::rpc::RpcChannel>,
    /// Delivers every final reply (the delivery stage's worker).
    outbox: crate::delivery::Outbox,
    /// Where sessions run: here ([`crate::cluster::SingleNode`]), or on the node of several
    /// that leases their partition (`[cluster]`).
    placement: Arc<dyn crate::cluster::Placement>,
    /// Wakes the scheduler when jobs change.
    cron_wake: Arc<tokio::sync::Notify>,
    /// The MCP servers (`None`: none configured).
    mcp: Option<Arc<crate::mcp::Hub>>,
}

impl Core {
    /// The commands' port over this core.
    fn commands(self: &Arc<Self>) -> command_context::CoreCommands {
        command_context::CoreCommands(self.clone())
    }
}

/// Joins the cluster when `[cluster] enabled`: this node's id (configured or random), its
/// coordinator, and the store fenced by its leases.
async fn join_cluster(
    config: &Config,
    store: &Store,
) -> Result<Option<Arc<crate::cluster::Cluster>>, GatewayError> {
    if !config.cluster.enabled {
        return Ok(None);
    }
    let node = match config.cluster.node_id.trim() {
        "" => format!("node-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        id => id.to_owned(),
    };
    let alive_s = config.cluster.lease_s;
    let Some(coordinator) = Store::coordinator(&config.store, &node, alive_s).await? else {
        return Ok(None);
    };
    store.fence(&node);
    tracing::info!(node = %node, lease_s = config.cluster.lease_s, "cluster: joined");
    let key = coordinator.call_key().await?;
    let cluster = crate::cluster::Cluster::new(coordinator, config.cluster.lease());
    cluster.peers().set_key(key);
    Ok(Some(Arc::new(cluster)))
}

/// A running gateway.
pub struct Gateway {
    core: Arc<Core>,
    rpc: tokio::sync::Mutex<Option<crate::rpc::RpcServer>>,
}

/// The session lanes over `runner`, with `config`'s queue defaults.
fn lanes_for(config: &Config, store: &Store, runner: Arc<dyn crate::lane::Runner>) -> Lanes {
    let defaults = LaneSettings {
        mode: config.queue.mode,
        debounce: Duration::from_millis(config.queue.debounce_ms),
        cap: config.queue.cap,
        drop: config.queue.drop,
    };
    Lanes::new(
        runner,
        store.clone(),
        defaults,
        config.resolved_max_concurrent_runs(),
    )
}

/// Where sessions run, and where group context is kept: on a cluster a mention may reach
/// another node than the messages before it, so the context lives in the store alone.
fn placement_for(
    cluster: Option<Arc<crate::cluster::Cluster>>,
    lanes: &Lanes,
    saved_history: Vec<(String, Vec<String>)>,
) -> (
    Arc<dyn crate::cluster::Placement>,
    crate::intake::GroupContext,
) {
    match cluster {
        Some(cluster) => (
            Arc::new(crate::cluster::OnCluster::new(cluster)),
            crate::intake::GroupContext::Shared,
        ),
        None => (
            Arc::new(crate::cluster::SingleNode::new(lanes.clone())),
            crate::intake::GroupContext::local(saved_history),
        ),
    }
}

/// How often [`Gateway::store_damaged`] looks at the store.
const DAMAGE_CHECK: Duration = Duration::from_secs(1);

impl Gateway {
    /// Builds the gateway over `channels` and recovers the previous process's pending turns
    /// and undelivered replies. Channels are not started yet: see [`Gateway::run_channels`].
    pub async fn start(
        config: Config,
        channels: Vec<Arc<dyn Channel>>,
    ) -> Result<Gateway, GatewayError> {
        for channel in &channels {
            crate::metrics::register_channel(channel.name());
        }
        let store = Store::open_config(&config)?;
        let cluster = join_cluster(&config, &store).await?;
        let shutdown = CancellationToken::new();
        let (provider, providers) = crate::agent::Agents::providers(&config)?;
        let saved_history = store.group_histories().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the saved group history");
            Vec::new()
        });
        let rpc = crate::rpc::RpcChannel::new();
        let mut channels: HashMap<String, Arc<dyn Channel>> = channels
            .into_iter()
            .map(|c| (c.name().to_string(), c))
            .collect();
        channels.insert(
            crate::rpc::channel::NAME.to_owned(),
            rpc.clone() as Arc<dyn Channel>,
        );
        let outbox = crate::delivery::Outbox::new(
            store.clone(),
            channels.clone(),
            config.delivery.ttl(),
            shutdown.clone(),
            crate::delivery::files::FilePolicy::from_config(&config),
            crate::delivery::voice::Voices::from_config(&config.tts),
        );
        let notices = crate::delivery::Notices::new(channels, outbox.clone());
        let desk = Arc::new(crate::questions::Desk::new(crate::questions::DeskParts {
            store: store.clone(),
            notices: notices.clone(),
            cluster: cluster.clone(),
            node_id: config.cluster.node_id.clone(),
            approval_timeout: Duration::from_secs(config.tools.approval_timeout_s),
            ask_timeout: Duration::from_secs(config.acp.ask_timeout_s),
        }));
        // The core owns the lanes, the agent and the ACP manager, whose gateway-side ports
        // (runner, spawner, sessions, approvals, permission askers) point back at it: they
        // get a weak handle while it is built, so nothing is filled in afterwards.
        // MCP servers start in the background: the gateway never waits for them.
        let mcp = crate::mcp::Hub::start(&config, &shutdown);
        #[cfg(feature = "browser")]
        let browser = crate::agent::tools::browser::tool(
            &config,
            crate::agent::tools::web::system_resolver(),
            &shutdown,
        );
        #[cfg(not(feature = "browser"))]
        let browser = None;
        let core = Arc::new_cyclic(|weak: &std::sync::Weak<Core>| {
            let host = weak.clone() as std::sync::Weak<dyn crate::reach::Host>;
            let reach = Arc::new(crate::reach::ReachTools::new(host));
            let ports = || crate::agent::AgentPorts {
                spawner: Some(reach.clone()),
                sessions: Some(reach.clone()),
                approver: Some(Arc::new(desk.approver())),
                cron: Some(reach.clone()),
                mcp: mcp.clone(),
                browser: browser.clone(),
            };
            let mcp = mcp.clone();
            let agents = crate::agent::Agents::build(
                &config, &store, &shutdown, provider, providers, &ports,
            );
            let agents = Arc::new(agents);
            let asker: Arc<dyn crate::acp::manager::AskerFor> = Arc::new(desk.askers());
            let acp = Arc::new(crate::acp::AcpManager::new(
                &config,
                store.clone(),
                Some(asker),
            ));
            let live_bus = broadcast::channel(crate::runner::LIVE_BUFFER).0;
            let config = Arc::new(config);
            let runner = crate::runner::TurnRunner::new(crate::runner::RunnerParts {
                config: config.clone(),
                store: store.clone(),
                agents: agents.clone(),
                acp: acp.clone(),
                notices: notices.clone(),
                live: live_bus.clone(),
                shutdown: shutdown.clone(),
                port: weak.clone() as std::sync::Weak<dyn crate::runner::RunnerPort>,
            });
            let lanes = lanes_for(&config, &store, Arc::new(runner));
            let (placement, history) = placement_for(cluster.clone(), &lanes, saved_history);
            let tasks = tokio_util::task::TaskTracker::new();
            let intake = Arc::new(crate::intake::Intake::new(crate::intake::IntakeParts {
                config: config.clone(),
                store: store.clone(),
                lanes: lanes.clone(),
                placement: placement.clone(),
                tasks: tasks.clone(),
                history,
                port: weak.clone() as std::sync::Weak<dyn crate::intake::IntakePort>,
            }));
            Core {
                intake,
                outbox,
                placement,
                cron_wake: Arc::new(tokio::sync::Notify::new()),
                acp,
                desk: desk.clone(),
                notices,
                rpc,
                lanes,
                store,
                agents,
                live: live_bus.clone(),
                feed: match cluster.is_some() {
                    true => broadcast::channel(crate::runner::LIVE_BUFFER).0,
                    false => live_bus,
                },
                shutdown,
                tasks,
                config,
                mcp,
            }
        });
        // Questions a previous process left open in chats end (their buttons go).
        let desk = core.desk.clone();
        tokio::spawn(async move { desk.end_left_open().await });
        match &cluster {
            // The partitions this node takes are recovered as it takes them.
            Some(cluster) => partition_work::start(&core, cluster),
            None => recover::recover(&core).await,
        }
        // Every node runs the scheduler: a run's dedupe key makes one node's enqueue win.
        scheduler::start(&core, cluster.is_some()).await;
        tokio::spawn(recover::housekeeping(Arc::downgrade(&core)));
        tokio::spawn(recover::acp_housekeeping(Arc::downgrade(&core)));
        Ok(Gateway {
            core,
            rpc: tokio::sync::Mutex::new(None),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.core.config
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.core.store
    }

    /// The session lanes (`chela chat` stops a reply on Ctrl-C through them).
    pub fn lanes(&self) -> &Lanes {
        &self.core.lanes
    }

    /// The agents: the default one and those of `[[agents]]`.
    pub fn agents(&self) -> &crate::agent::Agents {
        &self.core.agents
    }

    /// Coding-agent bindings and their processes.
    pub fn acp(&self) -> &crate::acp::AcpManager {
        &self.core.acp
    }

    /// The session key of an inbound message (SPEC 1.2).
    pub fn session_key(&self, inbound: &Inbound) -> String {
        crate::intake::session_key_of(&self.core.config, inbound)
    }

    /// Resolves once session `key` is idle and its sub-agents' results have run (`chela
    /// chat` and `chela agent` exit then).
    pub async fn wait_settled(&self, key: &str) {
        let core = &self.core;
        crate::runner::subagents::wait_settled(&core.store, &core.lanes, key).await
    }

    /// The agent's reach tools over this gateway (tests of the reach stage).
    #[cfg(test)]
    pub(crate) fn reach_tools(&self) -> crate::reach::ReachTools {
        let host = Arc::downgrade(&self.core) as std::sync::Weak<dyn crate::reach::Host>;
        crate::reach::ReachTools::new(host)
    }

    /// The handles the reach stage gets from this gateway (its tests).
    #[cfg(test)]
    pub(crate) fn reach_handles(&self) -> crate::reach::Handles {
        crate::reach::Host::handles(self.core.clone())
    }

    /// The inbound sink for channels and scripts.
    pub fn router(&self) -> Router {
        Router::new(self.core.intake.clone())
    }

    /// A sink that puts every message in session `key` (`chela chat --session KEY`).
    pub fn router_for_session(&self, key: String) -> Router {
        Router::for_session(self.core.intake.clone(), key)
    }

    /// The gateway as the RPC sees it.
    pub fn api(&self) -> Arc<dyn crate::rpc::api::GatewayApi> {
        let core = &self.core;
        let fire = crate::cron::IntakeFire::new(Arc::downgrade(&core.intake));
        Arc::new(Backend::new(BackendParts {
            config: core.config.clone(),
            store: core.store.clone(),
            router: self.router(),
            lanes: core.lanes.clone(),
            placement: core.placement.clone(),
            notices: core.notices.clone(),
            outbox: core.outbox.clone(),
            acp: core.acp.clone(),
            feed: core.feed.clone(),
            cron_wake: core.cron_wake.clone(),
            fire: Arc::new(fire),
            rpc: core.rpc.clone(),
            desk: core.desk.clone(),
            shutdown: core.shutdown.clone(),
            mcp: core.mcp.clone(),
        }))
    }

    /// Starts the RPC (`[rpc] listen`; `chela gateway` and `chela chat` do, `chela agent`
    /// does not); returns the address it listens on, `None` when it is off. Stopped by
    /// [`Gateway::shutdown`].
    pub async fn serve_rpc(&self) -> Result<Option<std::net::SocketAddr>, GatewayError> {
        let mut slot = self.rpc.lock().await;
        if let Some(server) = slot.as_ref() {
            return Ok(Some(server.address()));
        }
        let server = crate::rpc::RpcServer::start(self.api()).await?;
        let address = server.as_ref().map(|s| s.address());
        *slot = server;
        Ok(address)
    }

    /// Waits until a read or a write of the store meets damage (its file corrupted, the disk
    /// failing: [`BaseStore::damage`](crate::store::BaseStore::damage)), or, on a cluster,
    /// another process took this node's id; returns it. The gateway stops on it rather than
    /// going on without a store that answers (or beside a twin running the same sessions).
    pub async fn store_damaged(&self) -> crate::store::StoreError {
        let mut every = tokio::time::interval(DAMAGE_CHECK);
        loop {
            every.tick().await;
            if let Some(damage) = self.core.store.damage() {
                return damage;
            }
            if let Some(cluster) = self.core.placement.cluster()
                && cluster.coordinator().usurped()
            {
                let node = cluster.node().to_owned();
                return crate::store::StoreError::NodeIdInUse { node };
            }
        }
    }

    /// Subscribes to the run bus: every run's events, each run ending with
    /// [`RunEvent::Finished`](crate::domain::events::RunEvent::Finished).
    pub fn subscribe_events(&self) -> broadcast::Receiver<crate::domain::events::LiveEvent> {
        self.core.live.subscribe()
    }

    /// Registers commands and runs every channel until `stop` fires or all of them end.
    pub async fn run_channels(&self, stop: CancellationToken) -> Result<(), GatewayError> {
        self.run_channels_through(self.router(), stop).await
    }

    /// As [`Gateway::run_channels`], with every message taken by `router`.
    pub async fn run_channels_through(
        &self,
        router: Router,
        stop: CancellationToken,
    ) -> Result<(), GatewayError> {
        let sink: Arc<dyn chela_channel::InboundSink> = Arc::new(router);
        let names: Vec<(&str, &str)> = crate::inbound::commands::HELP.to_vec();
        let mut tasks = tokio::task::JoinSet::new();
        for channel in self.core.notices.channels().values() {
            let channel = channel.clone();
            if let Err(e) = channel.register_commands(&names).await {
                tracing::warn!(channel = channel.name(), error = %e, "cannot register commands");
            }
            let (sink, stop) = (sink.clone(), stop.clone());
            let leased = self.intake_lease(channel.name());
            tasks.spawn(async move {
                let name = channel.name().to_string();
                let run = match leased {
                    // Discord with several shards: a lease per shard, shared by the nodes.
                    Some((coordinator, lease)) if channel.intake_parts() > 1 => {
                        crate::cluster::intake_shards::run_parts(
                            channel,
                            sink,
                            stop,
                            coordinator,
                            lease,
                        )
                        .await
                    }
                    Some((coordinator, lease)) => {
                        crate::cluster::intake_lease::run_leased(
                            channel,
                            sink,
                            stop,
                            coordinator,
                            lease,
                        )
                        .await
                    }
                    None => channel.run(sink, stop).await,
                };
                run.map_err(|e| GatewayError::Channel {
                    channel: name,
                    reason: e.to_string(),
                })
            });
        }
        while let Some(result) = tasks.join_next().await {
            if let Ok(Err(e)) = result {
                tracing::error!(error = %e, "channel ended with an error");
            }
        }
        Ok(())
    }

    /// On a cluster, the coordinator and lease length under which channel `name`'s intake
    /// runs on one node at a time: Telegram long polling and Discord (each shard). Other
    /// intakes (a Telegram webhook behind a load balancer, the terminal, the RPC) run on
    /// every node.
    fn intake_lease(&self, name: &str) -> Option<(Arc<dyn crate::store::Coordinator>, Duration)> {
        let cluster = self.core.placement.cluster()?;
        crate::cluster::intake_lease::is_exclusive(&self.core.config, true, name)
            .then(|| (cluster.coordinator().clone(), cluster.lease()))
    }

    /// Stops intake, cancels live runs (their turns stay pending for the next start),
    /// flushes the store.
    pub async fn shutdown(&self) {
        self.shutdown_after(Duration::ZERO).await;
    }

    /// As [`Gateway::shutdown`], but first lets the runs going on finish and deliver their
    /// replies, for at most `grace`; no new run starts meanwhile (queued turns stay pending
    /// for the next start).
    pub async fn shutdown_after(&self, grace: Duration) {
        if let Some(server) = self.rpc.lock().await.take() {
            server.stop().await;
        }
        self.core.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.core.tasks.wait()).await;
        if !grace.is_zero() {
            let left = self.core.lanes.drain(grace).await;
            if left > 0 {
                tracing::info!(runs = left, "grace over; stopping the runs still going");
            }
        }
        // Finals already recorded get their chance to go out; what is left stays in the
        // outbox for the next start.
        let outbox_wait = grace.max(OUTBOX_SHUTDOWN_WAIT);
        if tokio::time::timeout(outbox_wait, self.core.outbox.idle())
            .await
            .is_err()
        {
            tracing::info!("replies still undelivered at shutdown; they go at the next start");
        }
        self.core.shutdown.cancel();
        self.core.lanes.shutdown().await;
        // Queued finals now stay for the next start; a send already under way finishes and
        // is marked (or journaled) before the store's last flush.
        if tokio::time::timeout(OUTBOX_SHUTDOWN_WAIT, self.core.outbox.idle())
            .await
            .is_err()
        {
            tracing::info!(
                "a reply was still being sent at shutdown; it goes again at the next start"
            );
        }
        self.core.acp.shutdown().await;
        // A node whose id another process took gives nothing back: those leases are its.
        if let Some(cluster) = self.core.placement.cluster()
            && !cluster.coordinator().usurped()
        {
            crate::cluster::shares::leave(cluster).await;
        }
        if let Err(e) = self.core.store.flush().await {
            tracing::error!(error = %e, "cannot flush the store");
        }
    }
}
