//! Running the gateway connection: each shard on a serenity client of its own
//! (`Client::start_shard(id, shards)`, which IDENTIFYs with `shard: [id, shards]`), so that
//! a cluster can run each shard on the node holding its lease and start or stop one without
//! touching the others. On one node [`DiscordChannel::run_all`] runs every shard. Starts
//! are spaced as Discord asks (one IDENTIFY per 5 s per `max_concurrency` bucket, from
//! `GET /gateway/bot`, which also says how many shards Discord recommends).

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{ChannelError, InboundSink};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serenity::client::ClientBuilder;
use serenity::prelude::GatewayIntents;
use tokio::sync::{Mutex, OnceCell};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::command_intake::CommandIntake;
use crate::errors::channel_error;
use crate::shard::Shard;
use crate::{DiscordChannel, build_http, connection, handler, state};

/// Discord's window for IDENTIFYs: `max_concurrency` of them per this long.
const IDENTIFY_WINDOW: Duration = Duration::from_secs(5);

/// When this process's shards may IDENTIFY: one start per `IDENTIFY_WINDOW /
/// max_concurrency`.
#[derive(Default)]
pub(crate) struct Starts {
    /// `max_concurrency` from `GET /gateway/bot` (asked once, 1 when that fails).
    concurrency: OnceCell<u64>,
    last: Mutex<Option<Instant>>,
}

impl Starts {
    /// Waits for this shard's turn to start.
    async fn turn(&self, spacing: Duration) {
        let mut last = self.last.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + spacing).await;
        }
        *last = Some(Instant::now());
    }
}

/// Removes a shard from the running ones when its run ends, however it ends.
struct Running(Arc<state::State>, u32);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.stopped(self.1);
    }
}

impl DiscordChannel {
    /// How many shards the bot runs (at least 1).
    pub(crate) fn shards(&self) -> u32 {
        self.settings.shards.max(1)
    }

    /// Runs every shard until `shutdown`; when one ends by itself (a fatal error: bad token,
    /// intents not allowed), the others stop and its result is returned.
    pub(crate) async fn run_all(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let stop = shutdown.child_token();
        let mut runs: FuturesUnordered<_> = (0..self.shards())
            .map(|id| self.run_shard(id, sink.clone(), stop.clone()))
            .collect();
        let mut outcome = Ok(());
        while let Some(result) = runs.next().await {
            stop.cancel();
            if outcome.is_ok() {
                outcome = result;
            }
        }
        outcome
    }

    /// Spacing of IDENTIFYs: Discord's window over `max_concurrency`, asked once (with one
    /// shard nothing is spaced and nothing asked). Warns when Discord recommends more shards.
    async fn spacing(&self) -> Duration {
        let total = self.shards();
        if total == 1 {
            return Duration::ZERO;
        }
        let concurrency = self
            .starts
            .concurrency
            .get_or_init(|| async {
                match self.http.get_bot_gateway().await {
                    Ok(bot) => {
                        if bot.shards > total {
                            tracing::warn!(
                                recommended = bot.shards,
                                configured = total,
                                "discord recommends more shards than channels.discord.shards"
                            );
                        }
                        bot.session_start_limit.max_concurrency.max(1)
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "discord: cannot ask /gateway/bot; one IDENTIFY per 5 s");
                        1
                    }
                }
            })
            .await;
        IDENTIFY_WINDOW / u32::try_from(*concurrency).unwrap_or(u32::MAX).max(1)
    }

    /// Runs shard `id` until `shutdown` or until its client ends; returns once every task
    /// it started ended too.
    pub(crate) async fn run_shard(
        &self,
        id: u32,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), ChannelError> {
        let shard = Arc::new(Shard::under(id, self.shards(), &shutdown));
        self.state.running(shard.clone());
        let _running = Running(self.state.clone(), id);
        let result = self.connect_shard(shard.clone(), sink).await;
        shard.stop().await;
        result
    }

    /// Connects `shard` and runs it until it stops or its client ends.
    async fn connect_shard(
        &self,
        shard: Arc<Shard>,
        sink: Arc<dyn InboundSink>,
    ) -> Result<(), ChannelError> {
        let (id, shutdown) = (shard.id(), shard.stopping());
        // Live messages wait for the first READY's catch-up; the bot's id is asked at once,
        // so a message that reaches the handler before READY's does is not held up by it.
        shard.hold_until_ready();
        match self.http.get_current_user().await {
            Ok(me) => self.state.set_bot(me.id),
            Err(e) => tracing::debug!(error = %e, "discord: cannot ask who the bot is yet"),
        }
        shard.track(state::State::keep_saving_cursors(
            self.state.clone(),
            sink.clone(),
            shutdown.clone(),
        ));
        let spacing = self.spacing().await;
        tokio::select! {
            () = self.starts.turn(spacing) => {}
            () = shutdown.cancelled() => return Ok(()),
        }
        let intents = GatewayIntents::GUILDS
            | GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT;
        let commands = Arc::new(CommandIntake {
            sink: sink.clone(),
            state: self.state.clone(),
            pending: self.pending.clone(),
            http: self.http.clone(),
        });
        let handler = handler::Handler {
            sink,
            state: self.state.clone(),
            shard: shard.clone(),
            commands,
            registrar: self.registrar.clone(),
            http: self.http.clone(),
        };
        let http = build_http(&self.settings, self.rest.client());
        let mut client = ClientBuilder::new_with_http(http, intents)
            .event_handler(handler)
            .await
            .map_err(channel_error)?;
        if !self.settings.gateway_url.is_empty() {
            *client.ws_url.lock().await = self.settings.gateway_url.clone();
        }
        let manager = client.shard_manager.clone();
        shard.track(connection::watch(
            manager.clone(),
            shard.clone(),
            shutdown.clone(),
        ));
        if shard.total() > 1 {
            tracing::info!(
                shard = id,
                shards = shard.total(),
                "discord: starting a shard"
            );
        }
        let result = tokio::select! {
            result = client.start_shard(id, shard.total()) => result.map_err(channel_error),
            _ = shutdown.cancelled() => Ok(()),
        };
        // Whichever way it ended, the shard's runner goes (and with it its collectors).
        manager.shutdown_all().await;
        result
    }
}
