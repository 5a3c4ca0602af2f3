//! Permission questions asked in the chat (`[acp] permissions = "ask"`, SPEC 4): the request
//! is shown in the bound conversation and its owner answers `allow` or `deny` there, or with
//! the Allow / Deny buttons under it where the channel shows buttons; no answer within the
//! timeout denies.

use std::sync::{Arc, Weak};

use super::buttons::Asked;
use super::{Desk, PendingQuestions};
use crate::acp::client::Asker;
use crate::acp::manager::AskerFor;
use crate::acp::permission::Decision;
use crate::agent::provider::BoxFuture;
use crate::store::Binding;
use agent_client_protocol::v1::schema::RequestPermissionRequest;

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
            let buttons = desk
                .permission_buttons
                .offer_to(&id, &CHOICES, &binding.owner);
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
            let ended = desk.permission_buttons.end(&id, |by| ending(decision, by));
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

/// The buttons under a permission question.
const CHOICES: [(&str, Decision); 2] = [("Allow", Decision::Allow), ("Deny", Decision::Deny)];

/// How a permission question ended (`None`: no answer in time), and by whom when a press
/// answered it.
fn ending(decision: Option<Decision>, by: Option<&str>) -> String {
    let how = match decision {
        Some(Decision::Allow) => "✅ allowed",
        Some(Decision::Deny) => "⛔ denied",
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

    #[test]
    fn answers_are_read_loosely() {
        assert_eq!(parse_answer(" Allow! "), Some(Decision::Allow));
        assert_eq!(parse_answer("y"), Some(Decision::Allow));
        assert_eq!(parse_answer("DENY"), Some(Decision::Deny));
        assert_eq!(parse_answer("allow it please"), None);
    }
}
