//! Intakes split into parts that each run on their own (Discord's gateway shards), on a
//! cluster: every part is an intake lease of its own, `intake:<channel>#<part>/<parts>`
//! (`intake:discord#1/4`), and the nodes that run the same layout (`discord#/4`) share them.
//!
//! [`run_parts`] keeps one loop per node: every tick (a fifth of the lease) it renews the
//! leases of the parts it runs, advertises the layout (for a lease: a node whose loop ended
//! or stalled stops counting), counts the nodes advertising it, gives back the parts over
//! its share while another of those nodes is below its share (the highest-numbered first, so
//! a node that joins gets some) and asks for free or expired parts up to its share, or over
//! it while no other node would take them (`intake_shards_plan.rs`). It runs exactly the
//! parts it holds: each under a token of its own, stopped when the lease is lost (another
//! node holds it) or could not be renewed for the time a lease is trusted (the lease less a
//! tick): checked between the round's calls and by a timer between rounds, so even when the
//! database's calls hang (each waits at most a tick) a part stops by the time its lease
//! could expire. When a node dies, its parts' leases and its advert expire and the others
//! take its parts over; what arrived meanwhile is read again by the part's new holder
//! (Discord: the catch-up on history after READY). A part that ends by itself (a fatal
//! error) ends the whole intake, as it does on one node, and the node stops advertising the
//! layout. A graceful stop gives every lease back at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Channel, ChannelError, InboundSink};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::Coordinator;

#[path = "intake_shards_plan.rs"]
mod shares;

pub use shares::{View, layout_name, part_lease_name, plan, share, view};

/// A part running here.
struct Running {
    /// Which run of the part this is (its task reports its end with it).
    run: u64,
    token: CancellationToken,
    task: JoinHandle<Result<(), ChannelError>>,
    /// Until when its lease is trusted without a renewal.
    trusted_until: Instant,
}

/// The parts of one channel's intake on this node.
struct Parts {
    channel: Arc<dyn Channel>,
    sink: Arc<dyn InboundSink>,
    coordinator: Arc<dyn Coordinator>,
    stop: CancellationToken,
    lease: Duration,
    parts: u32,
    running: BTreeMap<u32, Running>,
    /// Parts stopped and not yet ended (their lease is given back once they have, when
    /// `true`).
    stopping: BTreeMap<u32, JoinHandle<()>>,
    /// Parts that ended, sent by their task with the number of their run.
    ended: mpsc::UnboundedSender<(u32, u64)>,
    /// The number of the next run started.
    next_run: u64,
    /// The nodes running this layout at the last count.
    view: View,
}

/// Runs the parts of `channel`'s intake this node holds leases of, until `stop` fires or a
/// part ends by itself (its result is returned).
pub async fn run_parts(
    channel: Arc<dyn Channel>,
    sink: Arc<dyn InboundSink>,
    stop: CancellationToken,
    coordinator: Arc<dyn Coordinator>,
    lease: Duration,
) -> Result<(), ChannelError> {
    let (ended, mut ended_rx) = mpsc::unbounded_channel();
    let mut parts = Parts {
        parts: channel.intake_parts(),
        channel,
        sink,
        coordinator,
        stop: stop.clone(),
        lease,
        running: BTreeMap::new(),
        stopping: BTreeMap::new(),
        ended,
        next_run: 0,
        view: View::alone(),
    };
    let tick = lease / 5;
    let outcome = loop {
        let epoch = parts.coordinator.lock_epoch();
        parts.round().await;
        let coordinator = parts.coordinator.clone();
        let mut pause = super::intake_lease::pause(coordinator.as_ref(), tick);
        if coordinator.lock_epoch() != epoch {
            // The lock's connection ended during the round (the wake-up below only counts
            // while awaited): the others may take these parts a second later, unless the
            // next round, at once, renews them.
            parts.distrust_soon();
            pause = Duration::ZERO;
        }
        // A part whose lease is no longer trusted stops then, even when the next round is
        // late (the coordinator's calls hang): before its lease can expire in the database.
        let untrusted = parts.first_untrusted();
        tokio::select! {
            () = stop.cancelled() => break Ok(()),
            () = tokio::time::sleep(pause) => {}
            // Renew at once (connecting again) when this node's lock may have been lost.
            _ = coordinator.lock_lost() => parts.distrust_soon(),
            () = tokio::time::sleep_until(untrusted) => parts.halt_untrusted(),
            Some((part, run)) = ended_rx.recv() => {
                if let Some(result) = parts.ended_by_itself(part, run).await {
                    break result;
                }
            }
        }
    };
    // Withdrawn first, so that the others may take the parts over as soon as their leases
    // are given back (the leases stay exclusive meanwhile).
    parts.withdraw().await;
    parts.stop_all().await;
    outcome
}

impl Parts {
    fn tick(&self) -> Duration {
        self.lease / 5
    }

    fn lease_secs(&self) -> u64 {
        self.lease.as_secs_f64().ceil().max(1.0) as u64
    }

    fn name(&self, part: u32) -> String {
        part_lease_name(self.channel.name(), part, self.parts)
    }

    fn layout(&self) -> String {
        layout_name(self.channel.name(), self.parts)
    }

    /// Advertises the layout for a lease and counts the nodes that run it (the view is
    /// kept when the count fails).
    async fn look(&mut self) {
        let (layout, lease_s, tick) = (self.layout(), self.lease_secs(), self.tick());
        let coordinator = self.coordinator.clone();
        let advertised = tokio::time::timeout(tick, coordinator.advertise_layout(&layout, lease_s));
        let nodes = tokio::time::timeout(tick, coordinator.nodes());
        let (advertised, nodes) = futures_util::future::join(advertised, nodes).await;
        match advertised {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "cluster: cannot advertise an intake layout"),
            Err(_) => tracing::debug!("cluster: advertising an intake layout timed out"),
        }
        match nodes {
            Ok(Ok(nodes)) => {
                self.view = view(&nodes, coordinator.node(), self.channel.name(), self.parts);
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "cluster: cannot count the nodes"),
            Err(_) => tracing::debug!("cluster: counting the nodes timed out"),
        }
    }

    /// Stops advertising the layout (the intake ended); its advert expires otherwise.
    async fn withdraw(&self) {
        let layout = self.layout();
        let withdrawn =
            tokio::time::timeout(self.tick(), self.coordinator.withdraw_layout(&layout)).await;
        if !matches!(withdrawn, Ok(Ok(()))) {
            tracing::debug!(
                "cluster: cannot withdraw an intake layout; it expires after the lease"
            );
        }
    }

    /// One round: renew, count the nodes, give back what is over the share, take up to it
    /// (or over it when nobody else would).
    async fn round(&mut self) {
        self.halt_untrusted();
        self.renew().await;
        self.halt_untrusted();
        self.stopping.retain(|_, task| !task.is_finished());
        self.look().await;
        self.halt_untrusted();
        let share = share(self.parts, self.view.runners);
        let held: BTreeSet<u32> = self.running.keys().copied().collect();
        let stopping: BTreeSet<u32> = self.stopping.keys().copied().collect();
        let plan = plan(self.parts, &held, &stopping, share, &self.view);
        for part in plan.give_back {
            tracing::info!(
                channel = self.channel.name(),
                part,
                share,
                "cluster: giving an intake part back (over this node's share)"
            );
            self.halt(part, true);
        }
        let started = Instant::now();
        let mut wanted = plan.room;
        for part in plan.ask {
            self.halt_untrusted();
            if wanted == 0 || started.elapsed() >= self.tick() || self.stop.is_cancelled() {
                break;
            }
            let asked = Instant::now();
            let answer = tokio::time::timeout(
                self.tick(),
                self.coordinator
                    .hold_intake(&self.name(part), self.lease_secs()),
            )
            .await;
            match answer {
                Ok(Ok(true)) => {
                    self.start(part, asked);
                    wanted -= 1;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "cluster: cannot ask for an intake part"),
                Err(_) => tracing::debug!("cluster: asking for an intake part timed out"),
            }
        }
    }

    /// When the first running part's lease stops being trusted (far away when none runs).
    fn first_untrusted(&self) -> Instant {
        self.running
            .values()
            .map(|r| r.trusted_until)
            .min()
            .unwrap_or_else(|| crate::domain::deadline::after(self.lease))
    }

    /// This node's lock may be lost: the other nodes may take its parts a second from now,
    /// so none is trusted past half of that unless renewed.
    fn distrust_soon(&mut self) {
        let soon = Instant::now() + Duration::from_millis(500);
        for running in self.running.values_mut() {
            running.trusted_until = running.trusted_until.min(soon);
        }
    }

    /// Stops the parts whose lease is no longer trusted (not renewed in time).
    fn halt_untrusted(&mut self) {
        let now = Instant::now();
        let late: Vec<u32> = self
            .running
            .iter()
            .filter(|(_, r)| r.trusted_until <= now)
            .map(|(part, _)| *part)
            .collect();
        for part in late {
            tracing::warn!(
                channel = self.channel.name(),
                part,
                "cluster: the intake part's lease could not be renewed in time; stopping it"
            );
            self.halt(part, false);
        }
    }

    /// Renews the held leases (all at once); stops the parts whose lease another node holds
    /// or could not be renewed for as long as it is trusted.
    async fn renew(&mut self) {
        let asked = Instant::now();
        let names: Vec<(u32, String)> = self.running.keys().map(|p| (*p, self.name(*p))).collect();
        let lease_s = self.lease_secs();
        let tick = self.tick();
        let coordinator = self.coordinator.clone();
        let answers = futures_util::future::join_all(names.iter().map(|(part, name)| {
            let coordinator = coordinator.clone();
            async move {
                let answer = tokio::time::timeout(tick, coordinator.hold_intake(name, lease_s));
                (*part, answer.await)
            }
        }))
        .await;
        let trust = self.lease.saturating_sub(tick);
        for (part, answer) in answers {
            let Some(running) = self.running.get_mut(&part) else {
                continue;
            };
            match answer {
                Ok(Ok(true)) => running.trusted_until = asked + trust,
                Ok(Ok(false)) => {
                    tracing::warn!(
                        channel = self.channel.name(),
                        part,
                        "cluster: another node holds this intake part now; stopping it here"
                    );
                    self.halt(part, false);
                }
                _ if Instant::now() >= running.trusted_until => {
                    tracing::warn!(
                        channel = self.channel.name(),
                        part,
                        "cluster: the intake part's lease could not be renewed in time; stopping it"
                    );
                    self.halt(part, false);
                }
                _ => tracing::debug!(part, "cluster: cannot renew an intake part's lease yet"),
            }
        }
    }

    /// Starts part `part`, whose lease was won by a request sent at `asked`.
    fn start(&mut self, part: u32, asked: Instant) {
        tracing::info!(
            channel = self.channel.name(),
            part,
            parts = self.parts,
            "cluster: this node now runs an intake part"
        );
        let token = self.stop.child_token();
        let (channel, sink, ended) = (self.channel.clone(), self.sink.clone(), self.ended.clone());
        let run_token = token.clone();
        let run = self.next_run;
        self.next_run += 1;
        let task = tokio::spawn(async move {
            let result = channel.run_part(part, sink, run_token).await;
            let _ = ended.send((part, run));
            result
        });
        let trusted_until = asked + self.lease.saturating_sub(self.tick());
        self.running.insert(
            part,
            Running {
                run,
                token,
                task,
                trusted_until,
            },
        );
    }

    /// Stops part `part`; once it ended, gives its lease back when `release`.
    fn halt(&mut self, part: u32, release: bool) {
        let Some(running) = self.running.remove(&part) else {
            return;
        };
        running.token.cancel();
        let (coordinator, name, tick) = (self.coordinator.clone(), self.name(part), self.tick());
        let done = tokio::spawn(async move {
            let _ = running.task.await;
            if release {
                give_back(coordinator.as_ref(), &name, tick).await;
            }
        });
        self.stopping.insert(part, done);
    }

    /// Run `run` of part `part` ended: when it is the part's current run and was not
    /// stopped here, it ended by itself, and its result ends the intake. (The end of an
    /// earlier run, stopped, is not taken for the end of a later one started since.)
    async fn ended_by_itself(&mut self, part: u32, run: u64) -> Option<Result<(), ChannelError>> {
        let running = self.running.get(&part)?;
        if running.run != run || running.token.is_cancelled() {
            return None;
        }
        let running = self.running.remove(&part)?;
        let result = running.task.await.unwrap_or(Ok(()));
        give_back(self.coordinator.as_ref(), &self.name(part), self.tick()).await;
        Some(result)
    }

    /// Stops every part and gives every lease back.
    async fn stop_all(&mut self) {
        let parts: Vec<u32> = self.running.keys().copied().collect();
        for part in parts {
            self.halt(part, true);
        }
        for (_, task) in std::mem::take(&mut self.stopping) {
            let _ = task.await;
        }
    }
}

/// Gives lease `name` back, waiting at most `within` (a tick): a hanging database must not
/// hold the loop that renews the other parts, nor a stop. A lease not given back expires.
async fn give_back(coordinator: &dyn Coordinator, name: &str, within: Duration) {
    match tokio::time::timeout(within, coordinator.release_intake(name)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "cluster: cannot give an intake part back"),
        Err(_) => tracing::debug!("cluster: giving an intake part back timed out; it expires"),
    }
}

#[cfg(test)]
#[path = "intake_shards_tests.rs"]
mod tests;
