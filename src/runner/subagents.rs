//! Sub-agents: `sessions_spawn` with `runtime: "subagent"` (SPEC 4, 7).
//!
//! The child is chela's own agent in session `agent:<id>:subagent:<uuid>`: its own transcript
//! and its own lane, so it is serialized, durable and recovered like any session. Its link to
//! the parent and its first turn are written in one store step. When its run ends, its result
//! becomes a system-message turn in the parent's lane, queued in the same store step that
//! settles the child, so the parent hears of it exactly once, across crashes too. `/stop` in
//! the parent stops its running sub-agents, and then their end is not reported.

use chela_channel::{ChatKind, Conversation, Inbound, Sender};

use crate::agent::run::{RunOutcome, RunStatus};
use crate::agent::tools::refusal::ToolRefusal;
use crate::agent::tools::spawn::SpawnRequest;
use crate::cluster::Placement;
use crate::domain::session_key::{KeyBase, SessionKey};
use crate::inbound::route::{SYSTEM_SENDER, queued_turn};
use crate::lane::{Lanes, QueuedTurn};
use crate::store::{PendingTurn, Store, SubagentLink, SubagentState};

use super::INTERNAL_CHANNEL;

/// How often, and how many times, [`wait_settled`] re-checks a result being handed over.
const HANDOFF_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// See [`HANDOFF_POLL`] (100 x 50 ms: 5 s).
const HANDOFF_CHECKS: u32 = 100;

/// Chars of the task shown in a generated label.
const LABEL_CHARS: usize = 40;

/// Starts a sub-agent for `request` (of agent `default_agent` when the parent's key names
/// none), recorded in `store` and run where `placement` says; the text is the tool result.
pub async fn spawn(
    store: &Store,
    placement: &dyn Placement,
    default_agent: &str,
    request: &SpawnRequest,
) -> Result<String, ToolRefusal> {
    let parent = &request.parent_session;
    let id = uuid::Uuid::new_v4().to_string();
    let child = SessionKey {
        // The parent's agent, so the child is `agent:<same id>:subagent:<uuid>`.
        agent: SessionKey::parse(parent)
            .map(|k| k.agent)
            .unwrap_or_else(|_| crate::domain::session_key::normalize_agent_id(default_agent)),
        base: KeyBase::Subagent { id: id.clone() },
        thread: None,
    }
    .to_string();
    let link = SubagentLink {
        parent: parent.clone(),
        label: request.label.clone(),
        parent_target: request.parent_target.clone(),
        created_ms: crate::domain::message::now_ms(),
        state: SubagentState::Running,
    };
    let first = PendingTurn {
        session_key: child.clone(),
        inbound: system_inbound(internal(&id), format!("subagent-{id}"), &request.task),
        queued_ms: link.created_ms,
    };
    let seq = store
        .spawn_subagent(&child, &link, &first)
        .await
        .map_err(|e| ToolRefusal::Failed(format!("cannot start the subagent: {e}")))?;
    // On a cluster the node holding the child's partition runs it (its next poll).
    placement
        .hand_over(&child, queued_turn(seq, &first))
        .await
        .map_err(|e| {
            ToolRefusal::Failed(format!(
                "the subagent was recorded but cannot start now: {e}"
            ))
        })?;
    tracing::info!(parent = %parent, child = %child, "subagent started");
    let name = request
        .label
        .clone()
        .unwrap_or_else(|| id.chars().take(8).collect());
    Ok(format!(
        "Started subagent {name} (session {child}). Its result will arrive as a system message."
    ))
}

/// Ends sub-agent `key`'s turn: settles the child and, unless its parent stopped it, queues
/// the result into the parent's lane as a system message. A run cut by shutdown is left
/// pending (it runs again at the next start).
pub async fn finish(
    store: &Store,
    placement: &dyn Placement,
    key: &str,
    link: SubagentLink,
    turn: &QueuedTurn,
    outcome: &RunOutcome,
) {
    let mut seqs = turn.seqs.clone();
    seqs.extend(&outcome.steered_seqs);
    let id = key.rsplit(':').next().unwrap_or(key);
    let to = link
        .parent_target
        .clone()
        .unwrap_or_else(|| internal(&link.parent));
    let text = report(key, &link, outcome, &turn.text);
    let inbound = system_inbound(to, format!("subagent-result-{id}"), &text);
    let dedupe = crate::store::dedupe_key(&inbound);
    let follow = PendingTurn {
        session_key: link.parent.clone(),
        inbound,
        queued_ms: crate::domain::message::now_ms(),
    };
    match store
        .finish_subagent(key, &seqs, Some((&dedupe, &follow)))
        .await
    {
        // On a cluster the parent's node runs it.
        Ok(Some(seq)) => {
            if let Err(e) = placement
                .hand_over(&link.parent, queued_turn(seq, &follow))
                .await
            {
                tracing::warn!(error = %e, "subagent result queued; it runs at the next start");
            }
        }
        Ok(None) => tracing::info!(child = %key, "subagent ended; nothing to report"),
        Err(e) => {
            tracing::error!(error = %e, child = %key, "cannot hand the subagent's result over")
        }
    }
}

/// `/stop` in `parent`: stops each of its running sub-agents (their end is then not
/// reported); returns how many.
pub async fn stop_children(store: &Store, lanes: &Lanes, parent: &str) -> usize {
    let children = match store.subagents_of(parent) {
        Ok(children) => children,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list subagents");
            return 0;
        }
    };
    let mut stopped = 0;
    for (child, link) in children {
        if link.state != SubagentState::Running {
            continue;
        }
        if !store.stop_subagent(&child).unwrap_or(false) {
            continue;
        }
        stopped += 1;
        if let Err(e) = lanes.stop(&child).await {
            tracing::warn!(error = %e, child = %child, "cannot stop a subagent");
        }
        // A child stopped before its turn ever ran still needs settling.
        let seqs: Vec<u64> = store
            .pending_for(&child)
            .unwrap_or_default()
            .into_iter()
            .map(|(seq, _)| seq)
            .collect();
        if let Err(e) = store.finish_subagent(&child, &seqs, None).await {
            tracing::warn!(error = %e, child = %child, "cannot settle a stopped subagent");
        }
    }
    stopped
}

/// Resolves once session `key` is idle and none of its sub-agents has a turn left, so their
/// results (and the parent's follow-up turns) have run. For `chela chat` and `chela agent`,
/// which exit when their session is done.
pub async fn wait_settled(store: &Store, lanes: &Lanes, key: &str) {
    // A child's result is durable (a pending turn of `key`) a moment before it reaches the
    // lane; an idle lane with pending turns is re-checked a while, not forever.
    let mut handoff_checks = 0;
    loop {
        let busy = busy_children(store, key);
        if !busy.is_empty() {
            for child in busy {
                // Once a child's lane is idle its result is already in the parent's lane.
                if lanes.wait_idle(&child).await.is_err() {
                    return;
                }
            }
            // A child whose turn is not in its lane yet is idle at once: let it get there.
            tokio::task::yield_now().await;
            continue;
        }
        if lanes.wait_idle(key).await.is_err() {
            return;
        }
        // The turns just waited for may have spawned sub-agents of their own. Children are
        // looked at before the session's pending turns: a child's hand-over marks it done
        // and queues the follow-up in one transaction, so a child seen done here already
        // has its follow-up pending.
        if !busy_children(store, key).is_empty() {
            continue;
        }
        let pending = store
            .pending_for(key)
            .is_ok_and(|pending| !pending.is_empty());
        if !pending || handoff_checks >= HANDOFF_CHECKS {
            return;
        }
        handoff_checks += 1;
        tokio::time::sleep(HANDOFF_POLL).await;
    }
}

/// The running sub-agents of `parent` that still have a turn to run.
fn busy_children(store: &Store, parent: &str) -> Vec<String> {
    store
        .subagents_of(parent)
        .unwrap_or_default()
        .into_iter()
        .filter(|(child, link)| {
            link.state == SubagentState::Running
                && store
                    .pending_for(child)
                    .is_ok_and(|pending| !pending.is_empty())
        })
        .map(|(child, _)| child)
        .collect()
}

/// The system message telling the parent how its sub-agent ended.
fn report(key: &str, link: &SubagentLink, outcome: &RunOutcome, task: &str) -> String {
    let name = link.label.clone().unwrap_or_else(|| {
        let short: String = task.chars().take(LABEL_CHARS).collect();
        if short.len() < task.len() {
            format!("{short}…")
        } else {
            short
        }
    });
    let head = format!("[System message] Subagent \"{name}\" ({key})");
    match &outcome.status {
        RunStatus::Ok if outcome.text.trim().is_empty() => {
            format!("{head} finished with no text.")
        }
        RunStatus::Ok => format!("{head} finished:\n\n{}", outcome.text.trim()),
        RunStatus::Error(e) => format!("{head} failed: {e}"),
        RunStatus::Aborted => format!("{head} failed: it was stopped before it finished."),
    }
}

/// A conversation no platform carries, named `chat`.
fn internal(chat: &str) -> Conversation {
    Conversation {
        channel: INTERNAL_CHANNEL.to_owned(),
        account: "default".to_owned(),
        kind: ChatKind::Direct,
        chat_id: chat.to_owned(),
        thread_id: None,
    }
}

/// A message chela itself puts into a session.
fn system_inbound(conversation: Conversation, message_id: String, text: &str) -> Inbound {
    Inbound {
        conversation,
        sender: Sender {
            id: SYSTEM_SENDER.to_owned(),
            name: SYSTEM_SENDER.to_owned(),
            username: None,
        },
        message_id,
        text: text.to_owned(),
        reply_to: None,
        mentioned: true,
        interaction: None,
        attachments: Vec::new(),
        timestamp_ms: crate::domain::message::now_ms(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn outcome(status: RunStatus, text: &str) -> RunOutcome {
        RunOutcome {
            status,
            text: text.into(),
            steered_seqs: Vec::new(),
            leftover: Vec::new(),
            usage: Default::default(),
            context_tokens: 0,
            cost_usd: None,
        }
    }

    fn link(label: Option<&str>) -> SubagentLink {
        SubagentLink {
            parent: "agent:main:main".into(),
            label: label.map(str::to_owned),
            parent_target: None,
            created_ms: 0,
            state: SubagentState::Running,
        }
    }

    #[test]
    fn the_report_is_marked_and_names_the_child() {
        let key = "agent:main:subagent:abc";
        let ok = report(
            key,
            &link(Some("sum")),
            &outcome(RunStatus::Ok, " 42 \n"),
            "t",
        );
        assert_eq!(
            ok,
            "[System message] Subagent \"sum\" (agent:main:subagent:abc) finished:\n\n42"
        );
        let failed = report(
            key,
            &link(None),
            &outcome(
                RunStatus::Error(crate::domain::run::RunError::Model("model down".into())),
                "",
            ),
            "add the numbers",
        );
        assert_eq!(
            failed,
            "[System message] Subagent \"add the numbers\" (agent:main:subagent:abc) failed: model down"
        );
        let stopped = report(key, &link(None), &outcome(RunStatus::Aborted, ""), "t");
        assert!(stopped.ends_with("failed: it was stopped before it finished."));
        let long = "x".repeat(100);
        let named = report(key, &link(None), &outcome(RunStatus::Ok, ""), &long);
        assert!(
            named.contains(&format!("\"{}…\"", "x".repeat(40))),
            "{named}"
        );
        assert!(named.ends_with("finished with no text."));
    }

    #[test]
    fn system_messages_come_from_chela() {
        let inbound = system_inbound(internal("p"), "m1".into(), "hi");
        assert_eq!(inbound.sender.id, SYSTEM_SENDER);
        assert_eq!(inbound.conversation.channel, INTERNAL_CHANNEL);
        assert!(inbound.mentioned);
    }
}
