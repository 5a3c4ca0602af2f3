//! Strangers approved while no gateway ran (`chela pairing approve` on the embedded store,
//! which only one process opens at a time): the approval notes them in the store, and the
//! next gateway to start tells each of them they are in and asks them to send their message
//! again (what they sent before was not kept: a stranger's text is never stored before
//! approval). Each is forgotten as soon as they were told, so a crash part-way tells none
//! twice but the one being told; one whose send fails stays noted for the next start.

use chela_channel::Conversation;

use crate::delivery::Notices;
use crate::store::{PairingRequest, Store, StoreError};

/// What they are told at the next start.
pub const IN_WHILE_OFFLINE: &str =
    "You're in: the bot's owner approved you while the bot was offline. Send your message again.";
/// Noted at most (the oldest go first): the store allows few pending requests anyway.
const NOTED_MAX: usize = 256;

/// Notes that `request` was approved while no gateway ran (the caller holds the embedded
/// store: no gateway can read or write the list meanwhile). Durable when it returns.
pub async fn note(store: &Store, request: &PairingRequest) -> Result<(), StoreError> {
    let mut noted = store.approved_offline()?;
    noted.push(request.clone());
    let excess = noted.len().saturating_sub(NOTED_MAX);
    noted.drain(..excess);
    store.put_approved_offline(&noted)?;
    store.flush().await
}

/// Tells every stranger noted by [`note`] that they are in (in their direct chat),
/// forgetting each once told. One who cannot be reached now (their channel does not run, or
/// the platform refuses) stays noted for the next start.
pub async fn welcome(store: &Store, notices: &Notices) {
    let mut noted = match store.approved_offline() {
        Ok(noted) => noted,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the strangers approved while offline");
            return;
        }
    };
    let mut at = 0;
    while at < noted.len() {
        if !told(notices, &noted[at]).await {
            at += 1;
            continue;
        }
        noted.remove(at);
        let written = store.put_approved_offline(&noted);
        if let Err(e) = written.and(store.flush().await) {
            tracing::warn!(error = %e, "cannot forget a stranger told they are in");
        }
    }
}

/// Tells the stranger of `request` they are in; whether that went out.
async fn told(notices: &Notices, request: &PairingRequest) -> bool {
    let Some(to) = direct_chat(notices, request).await else {
        return false;
    };
    match notices.send_text(&to, IN_WHILE_OFFLINE).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, channel = %request.channel, "cannot tell a stranger approved while offline that they are in; trying at the next start");
            false
        }
    }
}

/// The direct chat with the stranger of `request`, when their channel runs and opens it.
async fn direct_chat(notices: &Notices, request: &PairingRequest) -> Option<Conversation> {
    let channel = notices.channel(&request.channel)?;
    match channel.direct(&request.sender_id).await {
        Ok(to) => Some(to),
        Err(e) => {
            tracing::warn!(error = %e, channel = %request.channel, "cannot tell a stranger approved while offline that they are in");
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn request(sender: &str) -> PairingRequest {
        PairingRequest {
            code: "ABCD2345".into(),
            channel: "telegram".into(),
            account: "default".into(),
            sender_id: sender.into(),
            sender_name: "Zed".into(),
            created_ms: 0,
        }
    }

    #[tokio::test]
    async fn approvals_are_noted_in_order_and_bounded() {
        let store = Store::temporary().unwrap();
        for i in 0..NOTED_MAX + 2 {
            note(&store, &request(&i.to_string())).await.unwrap();
        }
        let noted = store.approved_offline().unwrap();
        assert_eq!(noted.len(), NOTED_MAX);
        assert_eq!(noted[0].sender_id, "2", "the oldest went first");
        assert_eq!(noted[NOTED_MAX - 1].sender_id, (NOTED_MAX + 1).to_string());
    }
}
