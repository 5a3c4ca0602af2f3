//! Permission questions asked in the chat (`[acp] permissions = "ask"`, SPEC 4): the request
//! is shown in the bound conversation and its owner answers `allow` or `deny` there, or with
//! the buttons under it where the channel shows buttons (the agent's own options, or Allow /
//! Deny); no answer within the timeout denies.

use std::sync::{Arc, Weak};

use super::buttons::Asked;
use super::{Desk, PendingQuestions};
use crate::acp::client::Asker;
use crate::acp::manager::AskerFor;
use crate::acp::permission::Decision;
use crate::agent::provider::BoxFuture;
use crate::store::Binding;
use agent_client_protocol::v1::schema::{PermissionOption, RequestPermissionRequest};

/// Permission questions waiting for an answer in the chat.
pub type Questions = PendingQuestions<Decision>;

/// Makes askers that ask in each binding's conversation.
pub struct ChatAskers {
    /// The desk (weak: the gateway owns the ACP manager that holds this).
    pub(super) desk: Weak<Desk>,
}

impl AskerFor for ChatAskers {
    fn asker_for(&self, binding: &Binding) -> Arc<dyn Asker> {
        Arc::new(ChatAsker {
            desk: self.desk.clone(),
            binding: binding.clone(),
        })
    }
}

struct ChatAsker {
    desk: Weak<Desk>,
    binding: Binding,
}

impl Asker for ChatAsker {
    fn ask(&self, request: RequestPermissionRequest) -> BoxFuture<'static, Option<Decision>> {
        let desk = self.desk.clone();
        let binding = self.binding.clone();
        Box::pin(async move {
            let desk = desk.upgrade()?;
            let timeout = desk.ask_timeout;
            let title = request
                .tool_call
                .fields
                .title
                .clone()
                .unwrap_or_else(|| "a tool call".to_owned());
            let options: Vec<&str> = request.options.iter().map(|o| o.name.as_str()).collect();
            let key = binding.session_key.clone();
            let (id, answer) = desk.permissions.open(&key, &title);
            let text = format!(
                "🔐 {} asks permission: {title}\nOptions: {}\nReply allow or deny (no answer in {} denies).",
                binding.harness,
                options.join(" / "),
                humantime::format_duration(timeout)
            );
            let to = binding.conversation.clone();
            let choices = choices(&request.options);
            let buttons = desk
                .permission_buttons
                .offer_to(&id, &choices, &binding.owner);
            let ledger_id = format!("permission:{id}");
            if let Some(message) = desk.notices.ask(&to, &text, &buttons).await {
                let asked = Asked { to, message, text };
                desk.ledger.add(&ledger_id, &asked).await;
                desk.permission_buttons.asked(&id, asked);
            }
            let decision = match tokio::time::timeout(timeout, answer).await {
                Ok(Ok(decision)) => Some(decision),
                _ => None,
            };
            // The buttons end while the id is still taken, so a new question cannot get it.
            let ended = desk
                .permission_buttons
                .end(&id, |by| ending(decision, by, &request.options));
            if decision.is_none() {
                desk.permissions.forget(&id);
            }
            if let Some((asked, text)) = ended {
                desk.notices.edit(&asked.to, &asked.message, &text).await;
                desk.ledger.remove(&ledger_id).await;
            }
            if decision.is_none() {
                desk.notices
                    .say(&binding.conversation, "No answer in time: denied.")
                    .await;
            }
            decision
        })
    }
}

/// chela's own buttons, when the agent's options cannot be shown as buttons.
const CHOICES: [(&str, Decision); 2] = [("Allow", Decision::Allow), ("Deny", Decision::Deny)];

/// At most this many of an agent's options become buttons (Discord's one row).
const MAX_OWN_CHOICES: usize = 5;

/// Characters of an option's name shown on its button.
const MAX_LABEL: usize = 40;

/// The buttons under a permission question: the agent's own options (their names, cut to
/// [`MAX_LABEL`], after ✅ for an option that lets the tool run and ⛔ for one that refuses
/// it, so a name cannot pass one for the other), each answering with itself; chela's Allow /
/// Deny when the agent offered none, more than [`MAX_OWN_CHOICES`], or one without a name.
fn choices(options: &[PermissionOption]) -> Vec<(String, Decision)> {
    let named = options.iter().all(|o| !o.name.trim().is_empty());
    if options.is_empty() || options.len() > MAX_OWN_CHOICES || !named {
        return CHOICES.map(|(label, d)| (label.to_owned(), d)).to_vec();
    }
    options
        .iter()
        .enumerate()
        .map(|(at, o)| {
            (
                format!("{} {}", mark(o), cut(&o.name)),
                Decision::Chosen(at),
            )
        })
        .collect()
}

/// ✅ for an option that lets the tool run, ⛔ for one that refuses it.
fn mark(option: &PermissionOption) -> &'static str {
    match crate::acp::permission::allows(option) {
        true => "✅",
        false => "⛔",
    }
}

/// An option's name as shown: trimmed, at most [`MAX_LABEL`] characters (the agent's text).
fn cut(name: &str) -> String {
    name.trim().chars().take(MAX_LABEL).collect()
}

/// How a permission question ended (`None`: no answer in time), and by whom when a press
/// answered it; a chosen option is named as the agent named it.
fn ending(decision: Option<Decision>, by: Option<&str>, options: &[PermissionOption]) -> String {
    let chosen;
    let how = match decision {
        Some(Decision::Allow) => "✅ allowed",
        Some(Decision::Deny) => "⛔ denied",
        Some(Decision::Chosen(at)) => {
            let Some(option) = options.get(at) else {
                return "⛔ denied".to_owned();
            };
            chosen = format!("{} {}", mark(option), cut(&option.name));
            &chosen
        }
        None => "⌛ no answer in time: denied",
    };
    match by {
        Some(who) => format!("{how} by {who}"),
        None => how.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::inbound::route::parse_answer;

    use agent_client_protocol::v1::schema::PermissionOptionKind;

    fn option(name: &str, kind: PermissionOptionKind) -> PermissionOption {
        PermissionOption::new(format!("id-{name}"), name.to_owned(), kind)
    }

    #[test]
    fn the_agents_own_options_become_the_buttons_when_they_fit() {
        let options = vec![
            option("Always allow", PermissionOptionKind::AllowAlways),
            option("Reject", PermissionOptionKind::RejectOnce),
        ];
        let labels: Vec<(String, Decision)> = choices(&options);
        assert_eq!(
            labels,
            [
                ("✅ Always allow".to_owned(), Decision::Chosen(0)),
                ("⛔ Reject".to_owned(), Decision::Chosen(1))
            ]
        );
        let chela = |options: &[PermissionOption]| {
            choices(options).iter().map(|(_, d)| *d).collect::<Vec<_>>()
        };
        let allow_deny = [Decision::Allow, Decision::Deny];
        assert_eq!(chela(&[]), allow_deny, "none offered");
        let six = vec![option("Allow", PermissionOptionKind::AllowOnce); 6];
        assert_eq!(chela(&six), allow_deny, "more than a row");
        let unnamed = [option(" ", PermissionOptionKind::AllowOnce)];
        assert_eq!(chela(&unnamed), allow_deny, "a blank name");
        let long = [option(&"x".repeat(90), PermissionOptionKind::AllowOnce)];
        assert_eq!(choices(&long)[0].0.chars().count(), MAX_LABEL + 2);
        // A name cannot pass an allowing option for a refusing one.
        let forged = [option("Deny", PermissionOptionKind::AllowAlways)];
        assert_eq!(choices(&forged)[0].0, "✅ Deny");
        assert_eq!(
            ending(Some(Decision::Chosen(0)), Some("Ann"), &options),
            "✅ Always allow by Ann"
        );
        assert_eq!(
            ending(Some(Decision::Chosen(1)), None, &options),
            "⛔ Reject"
        );
        assert_eq!(
            ending(Some(Decision::Chosen(7)), None, &options),
            "⛔ denied"
        );
    }

    #[test]
    fn answers_are_read_loosely() {
        assert_eq!(parse_answer(" Allow! "), Some(Decision::Allow));
        assert_eq!(parse_answer("y"), Some(Decision::Allow));
        assert_eq!(parse_answer("DENY"), Some(Decision::Deny));
        assert_eq!(parse_answer("allow it please"), None);
    }
}
