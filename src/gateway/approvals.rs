//! Exec approvals asked in the chat (`tools.exec_approvals = "ask"`): the request is shown in
//! the session's conversation with a short id, and an owner answers it from any conversation
//! with `/approve <id> allow-once|allow-always|deny`. No answer in time denies; `/stop`
//! ends the wait.

use std::collections::HashMap;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Core;
use crate::agent::approval::{Approval, Approver};
use crate::agent::provider::BoxFuture;

/// One request waiting for the owner.
struct Waiting {
    session_key: String,
    command: String,
    answer: oneshot::Sender<Approval>,
}

/// Approval requests waiting for an answer, by id.
#[derive(Default)]
pub struct Approvals {
    waiting: Mutex<HashMap<String, Waiting>>,
}

impl Approvals {
    /// Opens a request and returns its id and where its answer arrives.
    fn open(&self, session_key: &str, command: &str) -> (String, oneshot::Receiver<Approval>) {
        let (tx, rx) = oneshot::channel();
        let Ok(mut waiting) = self.waiting.lock() else {
            return (String::new(), rx);
        };
        let id = loop {
            let candidate = uuid::Uuid::new_v4().simple().to_string()[..6].to_owned();
            if !waiting.contains_key(&candidate) {
                break candidate;
            }
        };
        waiting.insert(
            id.clone(),
            Waiting {
                session_key: session_key.to_owned(),
                command: command.to_owned(),
                answer: tx,
            },
        );
        (id, rx)
    }

    fn forget(&self, id: &str) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(id);
        }
    }

    /// Answers request `id`; the text says what happened, for the one who answered.
    pub fn answer(&self, id: &str, decision: Approval) -> String {
        let Some(request) = self.waiting.lock().ok().and_then(|mut w| w.remove(id)) else {
            return format!(
                "No approval {} is waiting (answered, timed out or stopped).",
                crate::inbound::commands::excerpt(id)
            );
        };
        let what = match decision {
            Approval::AllowAlways => "Allowed, and from now on without asking",
            Approval::Deny => "Denied",
            _ => "Allowed once",
        };
        if request.answer.send(decision).is_err() {
            return format!(
                "Approval {} is no longer waiting.",
                crate::inbound::commands::excerpt(id)
            );
        }
        format!("{what}: {}", request.command)
    }

    /// The waiting requests: id, session and command, oldest id first.
    pub fn list(&self) -> Vec<(String, String, String)> {
        let mut list: Vec<_> = self
            .waiting
            .lock()
            .map(|w| {
                w.iter()
                    .map(|(id, r)| (id.clone(), r.session_key.clone(), r.command.clone()))
                    .collect()
            })
            .unwrap_or_default();
        list.sort();
        list
    }
}

/// The `/approve [id decision]` command: answers a request, or lists the waiting ones.
pub fn command(core: &Core, args: &str) -> String {
    let mut words = args.split_whitespace();
    match (words.next(), words.next()) {
        (None, _) => {
            let waiting = core.approvals.list();
            if waiting.is_empty() {
                return "No command is waiting for approval.".to_owned();
            }
            let lines: Vec<String> = waiting
                .iter()
                .map(|(id, key, command)| format!("{id} ({key}): {command}"))
                .collect();
            format!("Waiting for approval:\n{}", lines.join("\n"))
        }
        (Some(id), Some(word)) => match Approval::parse(word) {
            Some(decision) => core.approvals.answer(id, decision),
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
        command: &str,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Approval> {
        let core = self.core.clone();
        let (key, command) = (session_key.to_owned(), command.to_owned());
        Box::pin(async move {
            let Some(core) = core.upgrade() else {
                return Approval::NoOneToAsk;
            };
            let Some(to) = where_to_ask(&core, &key) else {
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

/// Where to ask for session `key`: the conversation its run replies to, or for a sub-agent
/// (which replies nowhere) the conversation its parent last replied to.
fn where_to_ask(core: &Core, key: &str) -> Option<chela_channel::Conversation> {
    let own = core
        .target_of(key)
        .filter(|to| to.channel != super::subagent::INTERNAL_CHANNEL);
    own.or_else(|| {
        let parent = core.store.subagent_parent(key).ok().flatten()?;
        core.target_of(&parent)
            .or_else(|| core.store.target(&parent).ok().flatten())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_reach_the_waiting_request_once() {
        let approvals = Approvals::default();
        let (id, answer) = approvals.open("k", "ls -la");
        assert_eq!(id.len(), 6);
        assert_eq!(
            approvals.list(),
            [(id.clone(), "k".into(), "ls -la".into())]
        );
        assert_eq!(
            approvals.answer(&id, Approval::AllowAlways),
            "Allowed, and from now on without asking: ls -la"
        );
        assert_eq!(answer.await.unwrap(), Approval::AllowAlways);
        assert!(
            approvals
                .answer(&id, Approval::Deny)
                .starts_with("No approval")
        );
        assert!(approvals.list().is_empty());
    }

    #[tokio::test]
    async fn a_forgotten_request_cannot_be_answered() {
        let approvals = Approvals::default();
        let (id, _answer) = approvals.open("k", "rm x");
        approvals.forget(&id);
        assert!(
            approvals
                .answer(&id, Approval::AllowOnce)
                .starts_with("No approval")
        );
    }
}
