//! Exec approvals asked in the chat (`tools.exec_approvals = "ask"`): the request is shown in
//! the session's conversation with a short id, and an owner answers it from any conversation
//! with `/approve <id> allow-once|allow-always|deny`. No answer in time denies; `/stop`
//! ends the wait.

use std::sync::Weak;

use chela_channel::{ChatKind, Conversation};
use tokio_util::sync::CancellationToken;

use super::buttons::Asked;
use super::remote::{Approved, Listed, approval_tag, split_typed};
use super::{Desk, PendingQuestions};
use crate::agent::approval::{Approval, Approver};
use crate::agent::provider::BoxFuture;
use crate::cluster::peers::Answered;
use crate::domain::text::excerpt;

/// Exec approvals waiting for an owner's `/approve`.
pub type Approvals = PendingQuestions<Approval>;

/// Answers approval `id` with `decision` here; the text says what happened, for the one who
/// answered.
#[cfg(test)]
fn answer(approvals: &Approvals, id: &str, decision: Approval) -> String {
    let approved = Approved::At {
        node: None,
        outcome: super::remote::answered(approvals.answer_placed(id, decision)),
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
    let id = excerpt(id);
    match approved {
        Approved::At { node, outcome } => {
            let on = node
                .as_deref()
                .map(|n| format!(" on node {n}"))
                .unwrap_or_default();
            match outcome {
                Answered::Done { hidden: true, .. } => format!(
                    "{what}{on} (approval {id} was asked in another conversation: its command is not shown here)."
                ),
                Answered::Done { command, .. } => format!("{what}{on}: {command}"),
                Answered::Unknown => {
                    format!("No approval {id} is waiting{on} (answered, timed out or stopped).")
                }
                Answered::Gone => format!("Approval {id} is no longer waiting{on}."),
            }
        }
        Approved::Unconfirmed { node } => format!(
            "The answer to approval {id} was handed to node {node}, which holds it; it did not confirm in time (it may have been answered)."
        ),
        Approved::NotHanded { node, busy: true } => format!(
            "Node {node}, which holds approval {id}, was too busy to take the answer: nothing was answered. Try again."
        ),
        Approved::NotHanded { node, busy: false } => format!(
            "The answer to approval {id} could not be handed to node {node}, which holds it (the database could not be reached): nothing was answered."
        ),
        Approved::Missing { silent, unsent } => format!(
            "No approval {id} is waiting (answered, timed out or stopped).{}",
            silent_note(silent, *unsent)
        ),
        Approved::Ambiguous { nodes } => {
            let each: Vec<String> = nodes
                .iter()
                .map(|n| format!("/approve {id}@{n} <decision>"))
                .collect();
            format!(
                "An approval {id} is waiting on each of the nodes {}: nothing was answered. Name the node: {}.",
                nodes.join(", "),
                each.join(" or ")
            )
        }
        Approved::Unlooked => format!(
            "Approval {id} is not on this node and the other nodes could not be asked (the database could not be reached), so it was never looked for: nothing was answered. Try again."
        ),
    }
}

/// Names the nodes that did not answer, if any, and says when the others could not be
/// asked.
fn silent_note(silent: &[String], unsent: bool) -> String {
    let mut note = match silent {
        [] => String::new(),
        nodes => format!(
            " Node(s) {} did not answer (in time, or too busy): an approval asked there was not reached.",
            nodes.join(", ")
        ),
    };
    if unsent {
        note.push_str(" The other nodes could not be asked (the database could not be reached).");
    }
    note
}

/// Where an approval was asked, as approvals record it: conversation `to`'s channel,
/// account, chat and thread.
pub fn place_of(to: &Conversation) -> String {
    let thread = to.thread_id.as_deref().unwrap_or("");
    format!("{}|{}|{}|{thread}", to.channel, to.account, to.chat_id)
}

/// Which approvals a bare `/approve` lists in conversation `to`, and which answers name
/// their command there: in a direct conversation (an owner's own: only owners may
/// `/approve`) all of them (`None`); in a group or channel, where everyone reads the
/// answer, only those asked in that conversation (its [`place_of`]), whichever session
/// asked (a sub-agent's, a cron job's).
fn shown_place(to: &Conversation) -> Option<String> {
    (to.kind != ChatKind::Direct).then(|| place_of(to))
}

/// `approved` as shown where only approvals asked in `place` (when given) may show their
/// command: another conversation's answer is told without it (hidden, and dropped).
fn hide_other(approved: Approved, place: Option<&str>) -> Approved {
    match approved {
        Approved::At {
            node,
            outcome: Answered::Done { place: asked, .. },
        } if place.is_some_and(|p| p != asked) => Approved::At {
            node,
            outcome: Answered::Done {
                command: String::new(),
                place: asked,
                hidden: true,
            },
        },
        approved => approved,
    }
}

/// The `/approve [id decision]` command from conversation `to`: answers a request, or
/// lists the waiting ones ([`shown_place`]); on a cluster, those of every node
/// ([`super::remote`]).
pub async fn command(desk: &Desk, to: &Conversation, args: &str) -> String {
    let mut words = args.split_whitespace();
    let place = shown_place(to);
    match (words.next(), words.next()) {
        (None, _) => {
            let listed = super::remote::waiting_approvals(desk, place.as_deref()).await;
            list_text(&listed, place.as_deref())
        }
        (Some(typed), Some(word)) => match Approval::parse(word) {
            Some(decision) => {
                let approved = super::remote::approve(desk, typed, decision).await;
                let approved = hide_other(approved, place.as_deref());
                let (id, named) = split_typed(typed);
                let alone = desk.cluster.is_none();
                let note = alone_note(named, alone, &desk.node_id);
                format!("{}{note}", answer_text(id, decision, &approved))
            }
            None => usage(),
        },
        (Some(_), None) => usage(),
    }
}

/// On a gateway running `alone` (no cluster) as node `me`, what to add when `/approve`
/// named node `named`: that it was left out, unless it is this gateway's own id.
fn alone_note(named: Option<&str>, alone: bool, me: &str) -> String {
    match named {
        Some(node) if alone && node != me => format!(
            " (This gateway runs alone, not as a cluster: \"@{}\" was left out.)",
            excerpt(node)
        ),
        _ => String::new(),
    }
}

/// The text of a bare `/approve`: what `listed` gathered (asked in `place` only, when
/// given).
fn list_text(listed: &Listed, place: Option<&str>) -> String {
    let note = silent_note(&listed.silent, listed.unsent);
    let whose = match place {
        Some(_) => " in this conversation",
        None => "",
    };
    if listed.waiting.is_empty() && listed.unsent {
        return format!(
            "No command is waiting for approval on this node{whose}; the other nodes could not be asked (the database could not be reached), so what waits there is unknown."
        );
    }
    if listed.waiting.is_empty() {
        return format!("No command is waiting for approval{whose}.{note}");
    }
    let lines: Vec<String> = listed
        .waiting
        .iter()
        .map(|w| match place {
            Some(_) => format!("{}: {}", w.id, w.command),
            None => format!("{} ({}): {}", w.id, w.session, w.command),
        })
        .collect();
    format!("Waiting for approval{whose}:\n{}{note}", lines.join("\n"))
}

fn usage() -> String {
    "Usage: /approve <id> allow-once|allow-always|deny (or /approve to list)".to_owned()
}

/// The buttons under an exec approval, in the order of `/approve`'s answers.
const CHOICES: [(&str, Approval); 3] = [
    ("Allow once", Approval::AllowOnce),
    ("Always", Approval::AllowAlways),
    ("Deny", Approval::Deny),
];

/// Asks in the conversation of the session that wants to run a command.
pub struct ChatApprover {
    /// The desk (weak: the gateway owns the agent that holds this).
    pub(super) desk: Weak<Desk>,
}

impl Approver for ChatApprover {
    fn request(
        &self,
        session_key: &str,
        reply_to: Option<&Conversation>,
        command: &str,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Approval> {
        let desk = self.desk.clone();
        let (key, command) = (session_key.to_owned(), command.to_owned());
        let reply_to = reply_to.cloned();
        Box::pin(async move {
            let Some(desk) = desk.upgrade() else {
                return Approval::NoOneToAsk;
            };
            let Some(to) = where_to_ask(&desk, &key, reply_to) else {
                return Approval::NoOneToAsk;
            };
            if to.channel == crate::inbound::route::RPC_CHANNEL {
                // Nobody reads an RPC conversation: the request would only wait and expire.
                return Approval::NoOneToAsk;
            }
            let timeout = desk.approval_timeout;
            let tag = desk.cluster.as_ref().map(|c| approval_tag(c.node()));
            let (id, answer) = desk.approvals.open_tagged(
                tag.as_deref().unwrap_or(""),
                &key,
                &command,
                &place_of(&to),
            );
            let text = format!(
                "🔐 Approval needed to run:\n{command}\nAn owner replies /approve {id} allow-once, /approve {id} allow-always or /approve {id} deny (no answer in {} denies).",
                humantime::format_duration(timeout)
            );
            let buttons = desk.buttons.offer(&id, &CHOICES);
            let ledger_id = format!("approval:{id}");
            if let Some(message) = desk.notices.ask(&to, &text, &buttons).await {
                let to = to.clone();
                let asked = Asked { to, message, text };
                desk.ledger.add(&ledger_id, &asked).await;
                desk.buttons.asked(&id, asked);
            }
            let outcome = tokio::select! {
                _ = cancel.cancelled() => Approval::Cancelled,
                answered = tokio::time::timeout(timeout, answer) => match answered {
                    Ok(Ok(decision)) => decision,
                    Ok(Err(_)) => Approval::Cancelled,
                    Err(_) => Approval::TimedOut,
                },
            };
            // The buttons end while the id is still taken, so a new approval cannot get it
            // and lose its own buttons.
            let ended = desk
                .buttons
                .end(&id, |by| super::buttons::ending(outcome, by));
            desk.approvals.forget(&id);
            if let Some((asked, text)) = ended {
                desk.notices.edit(&asked.to, &asked.message, &text).await;
                desk.ledger.remove(&ledger_id).await;
            }
            if outcome == Approval::TimedOut {
                let told = format!("No answer to approval {id} in time: denied.");
                desk.notices.say(&to, &told).await;
            }
            outcome
        })
    }
}

/// Where to ask for session `key`: the conversation its run replies to (`reply_to`), or for
/// a sub-agent (which replies nowhere) the conversation its parent last replied to.
fn where_to_ask(desk: &Desk, key: &str, reply_to: Option<Conversation>) -> Option<Conversation> {
    let own = reply_to.filter(|to| to.channel != crate::runner::INTERNAL_CHANNEL);
    own.or_else(|| {
        let link = desk.store.subagent(key).ok().flatten()?;
        link.parent_target
            .filter(|to| to.channel != crate::runner::INTERNAL_CHANNEL)
            .or_else(|| desk.store.target(&link.parent).ok().flatten())
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

    fn conversation(kind: ChatKind) -> Conversation {
        Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind,
            chat_id: "-100".into(),
            thread_id: None,
        }
    }

    #[test]
    fn a_bare_approve_in_a_group_lists_only_what_was_asked_there() {
        let group = conversation(ChatKind::Group);
        assert_eq!(shown_place(&group), Some(place_of(&group)));
        let channel = conversation(ChatKind::Channel);
        assert_eq!(shown_place(&channel), Some(place_of(&channel)));
        assert_eq!(shown_place(&conversation(ChatKind::Direct)), None);
        let mut thread = conversation(ChatKind::Group);
        thread.thread_id = Some("5".into());
        assert_ne!(
            place_of(&thread),
            place_of(&group),
            "a thread is a place of its own"
        );
        let waiting = |id: &str, session: &str| crate::cluster::peers::WaitingApproval {
            id: id.into(),
            session: session.into(),
            command: "ls".into(),
        };
        let listed = Listed {
            waiting: vec![waiting("ab1234", "g")],
            silent: vec!["n2".into()],
            unsent: false,
        };
        let here = place_of(&group);
        let text = list_text(&listed, Some(&here));
        assert!(
            text.starts_with("Waiting for approval in this conversation:\nab1234: ls"),
            "{text}"
        );
        assert!(text.contains("n2 did not answer"), "{text}");
        let all = list_text(&listed, None);
        assert!(
            all.starts_with("Waiting for approval:\nab1234 (g): ls"),
            "{all}"
        );
        let none = list_text(&Listed::default(), Some(&here));
        assert_eq!(
            none,
            "No command is waiting for approval in this conversation."
        );
    }

    #[test]
    fn an_answer_in_a_group_shows_no_other_conversations_command() {
        let group = place_of(&conversation(ChatKind::Group));
        let done = |place: &str| Approved::At {
            node: None,
            outcome: Answered::Done {
                command: "cat secrets".into(),
                place: place.into(),
                hidden: false,
            },
        };
        let text = |approved| answer_text("ab1234", Approval::AllowOnce, &approved);
        let elsewhere = text(hide_other(done("telegram|default|42|"), Some(&group)));
        assert!(!elsewhere.contains("cat secrets"), "{elsewhere}");
        assert!(elsewhere.starts_with("Allowed once"), "{elsewhere}");
        let here = text(hide_other(done(&group), Some(&group)));
        assert_eq!(here, "Allowed once: cat secrets");
        let direct = text(hide_other(done("telegram|default|42|"), None));
        assert_eq!(direct, "Allowed once: cat secrets", "an owner's own chat");
    }

    #[test]
    fn a_list_that_could_not_reach_the_other_nodes_does_not_read_as_empty() {
        let listed = Listed {
            unsent: true,
            ..Listed::default()
        };
        let text = list_text(&listed, None);
        assert!(
            !text.starts_with("No command is waiting for approval."),
            "{text}"
        );
        assert!(text.contains("unknown"), "{text}");
        let failed = answer_text("ab1234", Approval::Deny, &Approved::Unlooked);
        assert!(
            failed.contains("is not on this node and the other nodes could not be asked"),
            "{failed}"
        );
        assert!(failed.contains("nothing was answered"), "{failed}");
    }

    #[test]
    fn a_node_named_on_a_lone_gateway_is_left_out_and_said_so() {
        assert!(alone_note(Some("n1"), true, "").contains("\"@n1\" was left out"));
        assert_eq!(alone_note(Some("n1"), true, "n1"), "");
        assert_eq!(alone_note(Some("n1"), false, ""), "", "on a cluster");
        assert_eq!(alone_note(None, true, ""), "");
    }

    #[test]
    fn every_outcome_names_what_happened() {
        let text = |approved: Approved| answer_text("ab1234", Approval::Deny, &approved);
        assert_eq!(
            text(Approved::At {
                node: Some("n1".into()),
                outcome: Answered::Done {
                    command: "ls".into(),
                    place: String::new(),
                    hidden: false,
                }
            }),
            "Denied on node n1: ls"
        );
        assert!(
            text(Approved::Unconfirmed { node: "n1".into() }).contains("did not confirm in time")
        );
        let unsent = text(Approved::NotHanded {
            node: "n1".into(),
            busy: false,
        });
        assert!(
            unsent.contains("could not be handed to node n1"),
            "{unsent}"
        );
        assert!(unsent.contains("nothing was answered"), "{unsent}");
        let ambiguous = text(Approved::Ambiguous {
            nodes: vec!["n1".into(), "n2".into()],
        });
        assert!(ambiguous.contains("/approve ab1234@n2"), "{ambiguous}");
        let missing = text(Approved::Missing {
            silent: Vec::new(),
            unsent: true,
        });
        assert!(missing.contains("could not be asked"), "{missing}");
    }
}
