//! Exec approvals asked in the chat (`tools.exec_approvals = "ask"`): the request is shown in
//! the session's conversation with a short id, and an owner answers it from any conversation
//! with `/approve <id> allow-once|allow-always|deny`. No answer in time denies; `/stop`
//! ends the wait.

use std::sync::{Arc, Weak};
use std::time::Duration;

use chela_channel::Conversation;
use tokio_util::sync::CancellationToken;

use super::Core;
use super::peers::Answered;
use super::questions::PendingQuestions;
use super::remote::Approved;
use crate::agent::approval::{Approval, Approver};
use crate::agent::provider::BoxFuture;
use crate::domain::text::excerpt;

/// Exec approvals waiting for an owner's `/approve`.
pub type Approvals = PendingQuestions<Approval>;

/// Answers approval `id` with `decision` here; the text says what happened, for the one who
/// answered.
#[cfg(test)]
fn answer(approvals: &Approvals, id: &str, decision: Approval) -> String {
    let approved = Approved {
        outcome: super::remote::answered(approvals.answer(id, decision)),
        silent: Vec::new(),
    };
    answer_text(id, decision, &approved)
}

/// What answering approval `id` with `decision` did, for the one who answered.
fn answer_text(id: &str, decision: Approval, approved: &Approved) -> String {
    let what = match decision {
        Approval::AllowAlways => "Allowed, and from now on without asking",
        Approval::Deny => "Denied",
        _ => "Allowed once",
    };
    match &approved.outcome {
        Answered::Done { command } => format!("{what}: {command}"),
        Answered::Unknown => {
            let mut text = format!(
                "No approval {} is waiting (answered, timed out or stopped).",
                excerpt(id)
            );
            text.push_str(&silent_note(&approved.silent));
            text
        }
        Answered::Gone => format!("Approval {} is no longer waiting.", excerpt(id)),
    }
}

/// Names the nodes that did not answer, if any.
fn silent_note(silent: &[String]) -> String {
    match silent {
        [] => String::new(),
        nodes => format!(
            " Node(s) {} did not answer in time: an approval asked there was not reached.",
            nodes.join(", ")
        ),
    }
}

/// The `/approve [id decision]` command: answers a request, or lists the waiting ones; on a
/// cluster, those of every node ([`super::remote`]).
pub async fn command(core: &Arc<Core>, args: &str) -> String {
    let mut words = args.split_whitespace();
    match (words.next(), words.next()) {
        (None, _) => {
            let (waiting, silent) = super::remote::waiting_approvals(core).await;
            let note = silent_note(&silent);
            if waiting.is_empty() {
                return format!("No command is waiting for approval.{note}");
            }
            let lines: Vec<String> = waiting
                .iter()
                .map(|w| format!("{} ({}): {}", w.id, w.session, w.command))
                .collect();
            format!("Waiting for approval:\n{}{note}", lines.join("\n"))
        }
        (Some(id), Some(word)) => match Approval::parse(word) {
            Some(decision) => {
                let approved = super::remote::approve(core, id, decision).await;
                answer_text(id, decision, &approved)
            }
            None => usage(),
        },
        (Some(_), None) => usage(),
    }
}

fn usage() -> String {
    "Usage: /approve <id> allow-once|allow-always|deny (or /approve to list)".to_owned()
}

/// Asks in the conversation of the session that wants to run a command.
pub struct ChatApprover {
    /// The core (weak: the core owns the agent that holds this).
    pub core: Weak<Core>,
}

impl Approver for ChatApprover {
    fn request(
        &self,
        session_key: &str,
        reply_to: Option<&Conversation>,
        command: &str,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Approval> {
        let core = self.core.clone();
        let (key, command) = (session_key.to_owned(), command.to_owned());
        let reply_to = reply_to.cloned();
        Box::pin(async move {
            let Some(core) = core.upgrade() else {
                return Approval::NoOneToAsk;
            };
            let Some(to) = where_to_ask(&core, &key, reply_to) else {
                return Approval::NoOneToAsk;
            };
            if to.channel == crate::rpc::channel::NAME {
                // Nobody reads an RPC conversation: the request would only wait and expire.
                return Approval::NoOneToAsk;
            }
            let timeout = Duration::from_secs(core.config.tools.approval_timeout_s);
            let (id, answer) = core.approvals.open(&key, &command);
            let text = format!(
                "🔐 Approval needed to run:\n{command}\nAn owner replies /approve {id} allow-once, /approve {id} allow-always or /approve {id} deny (no answer in {} denies).",
                humantime::format_duration(timeout)
            );
            core.say(&to, &text).await;
            let outcome = tokio::select! {
                _ = cancel.cancelled() => Approval::Cancelled,
                answered = tokio::time::timeout(timeout, answer) => match answered {
                    Ok(Ok(decision)) => decision,
                    Ok(Err(_)) => Approval::Cancelled,
                    Err(_) => Approval::TimedOut,
                },
            };
            core.approvals.forget(&id);
            if outcome == Approval::TimedOut {
                core.say(&to, &format!("No answer to approval {id} in time: denied."))
                    .await;
            }
            outcome
        })
    }
}

/// Where to ask for session `key`: the conversation its run replies to (`reply_to`), or for
/// a sub-agent (which replies nowhere) the conversation its parent last replied to.
fn where_to_ask(core: &Core, key: &str, reply_to: Option<Conversation>) -> Option<Conversation> {
    let own = reply_to.filter(|to| to.channel != super::subagent::INTERNAL_CHANNEL);
    own.or_else(|| {
        let link = core.store.subagent(key).ok().flatten()?;
        link.parent_target
            .filter(|to| to.channel != super::subagent::INTERNAL_CHANNEL)
            .or_else(|| core.store.target(&link.parent).ok().flatten())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_reach_the_waiting_request_once() {
        let approvals = Approvals::default();
        let (id, answered) = approvals.open("k", "ls -la");
        assert_eq!(id.len(), 6);
        assert_eq!(
            approvals.list(),
            [(id.clone(), "k".into(), "ls -la".into())]
        );
        assert_eq!(
            answer(&approvals, &id, Approval::AllowAlways),
            "Allowed, and from now on without asking: ls -la"
        );
        assert_eq!(answered.await.unwrap(), Approval::AllowAlways);
        assert!(answer(&approvals, &id, Approval::Deny).starts_with("No approval"));
        assert!(approvals.list().is_empty());
    }

    #[tokio::test]
    async fn a_forgotten_request_cannot_be_answered() {
        let approvals = Approvals::default();
        let (id, _answered) = approvals.open("k", "rm x");
        approvals.forget(&id);
        assert!(answer(&approvals, &id, Approval::AllowOnce).starts_with("No approval"));
    }
}
