//! Carrying a route out: a command on the fast path, an answer to its question, a refusal
//! answered, or the message queued as a turn (`queue.rs`). On several nodes the node running
//! a session carries out what was queued for it ([`route_queued`]).

use std::sync::Arc;

use chela_channel::{ChatKind, Inbound, SinkError};

use super::queue::{self, Durable};
use super::{Intake, IntakePort};
use crate::cluster::Cluster;
use crate::inbound::commands;
use crate::inbound::route::{self, Accepted, Route, queued_turn};
use crate::store::PendingTurn;

/// The private answer to a native command its sender may not run (it must not go unanswered).
pub(super) const NOT_ALLOWED: &str = "Not allowed.";

/// How a message's handling is ordered with the ones after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// A chat: a command runs at once, beside the session's queue (it may overtake turns).
    Free,
    /// A sequential input (a piped script): a command is answered before the next line is
    /// read, and one that changes what later turns do waits for the earlier turns first.
    Input,
}

/// What carrying a route out left to do.
enum Carried {
    /// Nothing more: it was answered, refused or handed to a command.
    Done(Accepted),
    /// Run it as a turn of session `.0`.
    Turn(String, Box<Inbound>),
}

/// Whether a message must still be marked seen before it acts (a command is answered once),
/// or came through the pending queue under this seq (marked when it was accepted; the
/// queue entry goes once it is carried out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Once {
    Check,
    Queued(u64),
}

/// Routes `inbound` and carries the route out; with [`Order::Input`] a command is answered
/// before this returns. On several nodes most messages are only queued here (see
/// [`routed_where_it_runs`]).
pub(super) async fn route_and_take(
    intake: &Arc<Intake>,
    key: String,
    inbound: Inbound,
    order: Order,
    durable: Durable,
) -> Result<Accepted, SinkError> {
    if intake.placement.routes_where_it_runs() && routed_where_it_runs(&inbound) {
        // Several nodes: the node that runs the session routes the message and carries
        // it out ([`route_queued`]); its commands and answers act there.
        return Ok(match queue::enqueue(intake, key, inbound, durable).await? {
            Some(seq) => Accepted::Queued(seq),
            None => Accepted::Ignored,
        });
    }
    let port = intake.port()?;
    let route = route::route(&key, &inbound, port.as_ref()).await;
    match carry_out(intake, &port, key, inbound, route, order, Once::Check).await? {
        Carried::Done(accepted) => Ok(accepted),
        Carried::Turn(key, inbound) => Ok(
            match queue::enqueue(intake, key, *inbound, durable).await? {
                Some(seq) => Accepted::Queued(seq),
                None => Accepted::Ignored,
            },
        ),
    }
}

/// Carries out `route` for `inbound` in session `key`, except running it as a turn.
async fn carry_out(
    intake: &Arc<Intake>,
    port: &Arc<dyn IntakePort>,
    key: String,
    inbound: Inbound,
    route: Route,
    order: Order,
    once: Once,
) -> Result<Carried, SinkError> {
    let done = match route {
        Route::Answer(decision) if port.answer_question(&key, decision) => Accepted::Command,
        Route::Command(command) => {
            run_command(intake, port, key, inbound, command, order, once).await?
        }
        Route::Refused { native, why } => {
            tracing::info!(sender = %inbound.sender.id, ?why, "command refused");
            if native {
                port.answer(&inbound, NOT_ALLOWED).await;
            } else if inbound.conversation.kind == ChatKind::Direct
                && first_time(intake, &inbound, once)?
            {
                // In a direct chat the sender is told why; a group stays quiet.
                let command = inbound.text.split_whitespace().next().unwrap_or("/");
                let who = format!("{}:{}", inbound.conversation.channel, inbound.sender.id);
                port.answer(&inbound, &why.explain(&commands::excerpt(command), &who))
                    .await;
            }
            Accepted::Ignored
        }
        Route::Unknown(name) => {
            if first_time(intake, &inbound, once)? {
                port.answer(&inbound, &commands::unknown_answer(&name))
                    .await;
            }
            Accepted::Command
        }
        Route::Unsupported(name) => {
            port.answer(&inbound, &format!("{name} is not available yet."))
                .await;
            Accepted::Ignored
        }
        // The question was answered or withdrawn meanwhile: an ordinary message then.
        Route::Answer(_) | Route::Turn => return Ok(Carried::Turn(key, Box::new(inbound))),
    };
    Ok(Carried::Done(done))
}

/// On several nodes, whether `inbound` is routed by the node that runs its session: every
/// message but the RPC's (its answers go to this node's RPC clients) and native commands
/// (an interaction is answered with a token only this node holds, never stored).
fn routed_where_it_runs(inbound: &Inbound) -> bool {
    inbound.interaction.is_none() && inbound.conversation.channel != route::RPC_CHANNEL
}

/// On a node of several (`[cluster] enabled`), carries out a message queued for a session
/// this node runs, as intake does on a single node: an ordinary message goes to its lane,
/// the answer to a question reaches it, and a command (or a refusal, or an unknown command
/// answered) runs here, where the session's lane and questions are (a `/stop` sent through
/// another node stops the run here). A command runs in a task of its own and holds its
/// session meanwhile: the session's later messages wait for it ([`Cluster::hold`]), as they
/// would come after it on a single node. Its pending entry goes once it finished (a node
/// dying on the way leaves it to the next owner).
pub async fn route_queued(
    intake: &Arc<Intake>,
    cluster: &Arc<Cluster>,
    seq: u64,
    turn: &PendingTurn,
) {
    let Ok(port) = intake.port() else {
        tracing::warn!(
            seq,
            "cluster: the gateway is stopping; a queued message waits for the next owner"
        );
        return;
    };
    let key = turn.session_key.clone();
    let route = route::route(&key, &turn.inbound, port.as_ref()).await;
    let route = match route {
        Route::Answer(decision) if port.answer_question(&key, decision) => {
            settle_queued(intake, seq);
            return;
        }
        Route::Answer(_) | Route::Turn => {
            if let Err(e) = intake.lanes.submit(&key, queued_turn(seq, turn)).await {
                tracing::error!(error = %e, "cluster: cannot hand a turn to its lane");
            }
            return;
        }
        route => route,
    };
    let held = HeldCommand {
        intake: intake.clone(),
        cluster: cluster.clone(),
        key: cluster.hold(&key),
        seq,
    };
    let inbound = turn.inbound.clone();
    intake.tasks.spawn(async move {
        let intake = held.intake.clone();
        let once = Once::Queued(seq);
        let carried = carry_out(
            &intake,
            &port,
            key.clone(),
            inbound,
            route,
            Order::Free,
            once,
        );
        if let Err(e) = carried.await {
            tracing::error!(error = %e, session = %key, "cluster: cannot carry out a command");
        }
        drop(held);
    });
}

/// A queued command being carried out: when it ends (or its task is dropped), its pending
/// entry goes and its session's later messages may run.
struct HeldCommand {
    intake: Arc<Intake>,
    cluster: Arc<Cluster>,
    key: String,
    seq: u64,
}

impl Drop for HeldCommand {
    fn drop(&mut self) {
        settle_queued(&self.intake, self.seq);
        self.cluster.release(&self.key);
    }
}

/// Removes the pending entry `seq` of a message carried out without a run.
fn settle_queued(intake: &Intake, seq: u64) {
    if let Err(e) = intake.store.remove_pending(seq) {
        tracing::warn!(error = %e, seq, "cannot remove a carried-out message from the queue");
    }
}

/// Whether `command` changes what the session's turns do (its model, queue, window), or
/// reports what they did (`/usage`), so that from a sequential input it must apply only
/// after the turns before it have run.
fn acts_on_later_turns(command: &commands::Command) -> bool {
    use commands::Command as C;
    matches!(
        command,
        C::Model(_) | C::Queue(_) | C::New(_) | C::Reset { .. } | C::Compact | C::Usage
    )
}

/// Runs `command` on the fast path (once: a command has its own dedupe mark); with
/// [`Order::Input`], or when it came through the queue ([`Once::Queued`]: the caller's task
/// holds its session), waits until it has answered.
async fn run_command(
    intake: &Arc<Intake>,
    port: &Arc<dyn IntakePort>,
    key: String,
    inbound: Inbound,
    command: commands::Command,
    order: Order,
    once: Once,
) -> Result<Accepted, SinkError> {
    if !first_time(intake, &inbound, once)? {
        tracing::debug!(session = %key, "duplicate command dropped");
        return Ok(Accepted::Ignored);
    }
    let (intake, port) = (intake.clone(), port.clone());
    let in_order = order == Order::Input;
    let task = intake.tasks.clone().spawn(async move {
        if in_order && acts_on_later_turns(&command) {
            // The lines before it are in the lane: let them run first.
            let _ = intake.lanes.wait_idle(&key).await;
        }
        let to = inbound.conversation.clone();
        let first = port
            .clone()
            .run_command(key.clone(), inbound, command)
            .await;
        // The turn a command leaves (`/new <text>`) was counted with the command.
        if let Some(first) = first
            && let Err(e) = queue::enqueue_counted(&intake, key, first, false, Durable::Now).await
        {
            port.say(&to, &format!("Cannot queue your message: {e}"))
                .await;
        }
    });
    if in_order || once != Once::Check {
        let _ = task.await;
    }
    Ok(Accepted::Command)
}

/// Marks `inbound` seen; false when it was seen before (a command is answered once). A
/// message from the queue was marked when it was accepted: it is new.
fn first_time(intake: &Intake, inbound: &Inbound, once: Once) -> Result<bool, SinkError> {
    if let Once::Queued(_) = once {
        return Ok(true);
    }
    let dedupe = crate::store::dedupe_key(inbound);
    let new = intake
        .store
        .mark_seen(&dedupe, inbound.timestamp_ms)
        .map_err(|e| SinkError(e.to_string()))?;
    if new {
        crate::metrics::global().inbound(&inbound.conversation.channel);
    }
    Ok(new)
}
