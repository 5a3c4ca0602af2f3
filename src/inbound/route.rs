//! Routing of normalized inbound messages: dedupe -> command fast path -> session key ->
//! durable pending queue -> lane.

use std::sync::Arc;

use chela_channel::{BoxFuture, Inbound, InboundSink, SinkError};

use crate::gateway::Core;
use crate::inbound::commands;
use crate::lane::QueuedTurn;
use crate::store::PendingTurn;

/// The [`InboundSink`] every channel feeds.
#[derive(Clone)]
pub struct Router {
    core: Arc<Core>,
}

impl Router {
    /// A router over the gateway's core.
    pub fn new(core: Arc<Core>) -> Self {
        Router { core }
    }

    /// Accepts `inbound` for an explicit session key (as `chela agent --session` does).
    /// Returns false when the message was a duplicate.
    pub async fn accept_for(&self, key: String, inbound: Inbound) -> Result<bool, SinkError> {
        let core = &self.core;
        let dedupe = crate::store::dedupe_key(&inbound);
        if let Some(command) = commands::parse(&inbound.text, None) {
            let fresh = core
                .store
                .mark_seen(&dedupe, inbound.timestamp_ms)
                .map_err(|e| SinkError(e.to_string()))?;
            if fresh {
                let core = core.clone();
                core.tasks.clone().spawn(async move {
                    let first =
                        crate::gateway::commands::handle(&core, &key, &inbound, command).await;
                    if let Some(first) = first
                        && let Err(e) = enqueue(&core, key, first).await
                    {
                        core.say(
                            &inbound.conversation,
                            &format!("Cannot queue your message: {e}"),
                        )
                        .await;
                    }
                });
            }
            return Ok(fresh);
        }
        enqueue(core, key, inbound).await
    }
}

/// Durably queues an ordinary message and hands it to its lane; false for a duplicate.
async fn enqueue(core: &Arc<Core>, key: String, inbound: Inbound) -> Result<bool, SinkError> {
    let dedupe = crate::store::dedupe_key(&inbound);
    {
        let pending = PendingTurn {
            session_key: key.clone(),
            inbound,
            queued_ms: crate::agent::message::now_ms(),
        };
        let Some(seq) = core
            .store
            .enqueue_unique(&dedupe, &pending)
            .await
            .map_err(|e| SinkError(e.to_string()))?
        else {
            tracing::debug!(session = %key, "duplicate inbound dropped");
            return Ok(false);
        };
        core.lanes
            .submit(&key, queued_turn(seq, &pending))
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        Ok(true)
    }
}

impl InboundSink for Router {
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            let key = self.core.session_key(&inbound);
            self.accept_for(key, inbound).await.map(|_| ())
        })
    }

    fn cursor<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<i64>> {
        Box::pin(async move { self.core.store.get_cursor(name).ok().flatten() })
    }

    fn save_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            self.core
                .store
                .set_cursor(name, value)
                .await
                .map_err(|e| SinkError(e.to_string()))
        })
    }
}

/// The lane turn for a durable pending entry.
pub fn queued_turn(seq: u64, pending: &PendingTurn) -> QueuedTurn {
    let inbound = &pending.inbound;
    let conv = &inbound.conversation;
    QueuedTurn {
        seqs: vec![seq],
        text: inbound.text.clone(),
        sender: if inbound.sender.name.is_empty() {
            inbound.sender.id.clone()
        } else {
            inbound.sender.name.clone()
        },
        // Collect merges only within one reply target (and, once admission has roles, one
        // authorization level).
        context: format!(
            "{}|{}|{}|{}",
            conv.channel,
            conv.account,
            conv.chat_id,
            conv.thread_id.as_deref().unwrap_or("")
        ),
        target: conv.clone(),
    }
}
