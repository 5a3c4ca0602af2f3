//! Pairing from the chat, on the gateway's side: a stranger's new request goes to the DMs of
//! the owners configured for that channel (`commands.owner_allow_from`), and an approved
//! stranger is told they are in, then their messages from before the approval are taken in
//! again, now as an approved sender's, and answered.

use std::sync::Arc;

use chela_channel::Inbound;

use super::Core;
use crate::questions::pairing::Paired;
use crate::store::PairingRequest;

/// A stranger was given `code` by `inbound`: the message is held (a new request is opened
/// with it), then a new request is asked in the owners' DMs on a task of its own.
pub(super) fn asked(core: &Arc<Core>, inbound: Inbound, code: String, new: bool) {
    let channel = inbound.conversation.channel.clone();
    if !new {
        core.desk.pairing().hold(&channel, &code, inbound);
        return;
    }
    let owners = owners_on(&core.config.commands.owner_allow_from, &channel);
    let request = PairingRequest {
        code,
        channel,
        account: inbound.conversation.account.clone(),
        sender_id: inbound.sender.id.clone(),
        sender_name: inbound.sender.name.clone(),
        created_ms: crate::domain::message::now_ms(),
    };
    let Some(buttons) = core.desk.pairing().open(&request, inbound) else {
        return;
    };
    if owners.is_empty() {
        tracing::info!(channel = %request.channel, "a pairing request waits; no owner is configured to ask (commands.owner_allow_from)");
        return;
    }
    let desk = core.desk.clone();
    core.tasks.spawn(async move {
        desk.ask_owners(&request, &buttons, &owners).await;
    });
}

/// Tells the approved stranger of `paired` they are in, then takes their held messages in
/// again (in order), to be answered.
pub(super) async fn welcome(core: &Core, paired: Paired) {
    let router = crate::intake::Router::new(core.intake.clone());
    crate::questions::pairing::welcome(&core.notices, &router, paired).await;
}

/// The sender ids of the owners on `channel` among `owner_allow_from` (`channel:id`).
fn owners_on(owner_allow_from: &[String], channel: &str) -> Vec<String> {
    owner_allow_from
        .iter()
        .filter_map(|entry| entry.strip_prefix(channel)?.strip_prefix(':'))
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_those_listed_for_the_channel() {
        let list = [
            "telegram:42".to_owned(),
            "discord:7".to_owned(),
            "telegramx:9".to_owned(),
            "telegram:".to_owned(),
        ];
        assert_eq!(owners_on(&list, "telegram"), ["42"]);
        assert_eq!(owners_on(&list, "discord"), ["7"]);
        assert!(owners_on(&list, "slack").is_empty());
    }
}
