//! Who a run reaches through the tools that name another session (SPEC 7, docs/tools.md):
//! one rule, [`Reach`], used by `message`, `sessions_list`, `sessions_history` and `cron`.
//!
//! A run always reaches its own session and the sub-agent sessions its session started.
//! Another session it reaches only when it acts for an owner (the message that started it
//! and every message of its session queued since came from an owner, the local terminal or
//! the RPC's operator token) or when the operator opened the other sessions in the config
//! (`[tools] sessions = "all"`, per agent `[[agents]] tools_sessions`); and then only its own
//! agent's sessions, unless `[tools] cross_agent_sessions`.

use std::collections::BTreeSet;

use chela_channel::Inbound;

use super::Handles;
use crate::agent::tools::refusal::ToolRefusal;
use crate::config::SessionsReach;
use crate::inbound::route::{RPC_CHANNEL, RPC_OPERATOR_SENDER, SYSTEM_SENDER, TERMINAL_CHANNEL};
use crate::store::PendingTurn;

/// What one run may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// The run's session.
    own: String,
    /// The agent of that session.
    agent: String,
    /// The sub-agent sessions the run's session started.
    children: BTreeSet<String>,
    /// Whether the run acts for owners only.
    owner: bool,
    /// Whether the operator opened the agent's other sessions (`sessions = "all"`).
    open: bool,
    /// `[tools] cross_agent_sessions`.
    cross_agent: bool,
}

impl Reach {
    /// The reach of run `run_id` of session `own`, from the store and the config (a run id
    /// that names no pending turn acts for nobody).
    pub fn of_run(host: &Handles, own: &str, run_id: &str) -> Result<Reach, ToolRefusal> {
        let agent = host.agents.for_key(own).id.clone();
        let children = host
            .store
            .subagents_of(own)?
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        Ok(Reach {
            own: own.to_owned(),
            open: host.config.sessions_reach(&agent) == SessionsReach::All,
            agent,
            children,
            owner: asked_by_owner(host, own, run_id),
            cross_agent: host.config.tools.cross_agent_sessions,
        })
    }

    /// Whether the run reaches session `key` (of the agent it runs with).
    pub fn reaches(&self, host: &Handles, key: &str) -> bool {
        self.check(host, key).is_ok()
    }

    /// [`Reach::reaches`] as a refusal saying why not.
    pub fn check(&self, host: &Handles, key: &str) -> Result<(), ToolRefusal> {
        self.check_agent(key, &host.agents.for_key(key).id)
    }

    /// Whether the run reaches session `key`, whose agent is `agent`.
    fn check_agent(&self, key: &str, agent: &str) -> Result<(), ToolRefusal> {
        if key == self.own || self.children.contains(key) {
            return Ok(());
        }
        if !self.owner && !self.open {
            return Err(ToolRefusal::Refused(format!(
                "not your conversation: session {key} is neither this run's own session nor \
                 a subagent it started. Other sessions are reached only by a run whose \
                 every message came from an owner, or where the operator sets \
                 [tools] sessions = \"all\""
            )));
        }
        if agent != self.agent && !self.cross_agent {
            return Err(ToolRefusal::Refused(format!(
                "session {key} belongs to agent {agent:?}; this agent reaches only its own \
                 sessions ([tools] cross_agent_sessions is off)"
            )));
        }
        Ok(())
    }
}

/// Whether run `run_id` of session `from` acts for owners only: the message that started it
/// and every message of the session queued since (steered into the run, or waiting behind
/// it) came from an owner. A stranger's message steered into an owner's run takes the
/// owner's rights away from it.
pub fn asked_by_owner(host: &Handles, from: &str, run_id: &str) -> bool {
    let Some(seq) = crate::domain::run::seq_of_run_id(run_id) else {
        return false;
    };
    let Ok(pending) = host.store.all_pending() else {
        return false;
    };
    owners_only(&pending, from, seq, |inbound| acts_for_owner(host, inbound))
}

/// Whether `inbound` came from an owner: an owner of its channel (`owner_allow_from`, or
/// made by pairing), the local terminal's user, or the RPC's operator token; never the
/// gateway's own sender, never the RPC's client token.
fn acts_for_owner(host: &Handles, inbound: &Inbound) -> bool {
    let channel = inbound.conversation.channel.as_str();
    let sender = inbound.sender.id.as_str();
    match channel {
        _ if sender == SYSTEM_SENDER => false,
        RPC_CHANNEL => sender == RPC_OPERATOR_SENDER,
        TERMINAL_CHANNEL => true,
        _ => host.is_owner(channel, sender),
    }
}

/// Whether `pending` holds turn `seq` of session `from` and it and every later turn of that
/// session came from a sender `is_owner` accepts.
fn owners_only(
    pending: &[(u64, PendingTurn)],
    from: &str,
    seq: u64,
    is_owner: impl Fn(&Inbound) -> bool,
) -> bool {
    let mut turns = pending
        .iter()
        .filter(|(s, turn)| *s >= seq && turn.session_key == from)
        .peekable();
    turns.peek().is_some_and(|(s, _)| *s == seq) && turns.all(|(_, turn)| is_owner(&turn.inbound))
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
