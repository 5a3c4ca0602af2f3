//! Strangers approved while no gateway ran (`chela pairing approve` on the store): the
//! approval notes them in the store (settings, every engine), and the next gateway to start
//! tells each of them they are in and asks them to send their message again (what they sent
//! before was not kept: a stranger's text is never stored before approval).

use chela_channel::Conversation;

use crate::delivery::Notices;
use crate::store::{PairingRequest, Store, StoreError};

/// The settings key of the strangers approved while no gateway ran.
const KEY: &str = "chela:pairing:approved-offline";
/// What they are told at the next start.
pub const IN_WHILE_OFFLINE: &str =
    "You're in: the bot's owner approved you while the bot was offline. Send your message again.";
/// Noted at most (the oldest go first): the store allows few pending requests anyway.
const NOTED_MAX: usize = 256;

/// Notes that `request` was approved while no gateway ran. Durable when it returns.
pub fn note(store: &Store, request: &PairingRequest) -> Result<(), StoreError> {
    let mut noted: Vec<PairingRequest> = store.get_settings(KEY)?.unwrap_or_default();
    noted.push(request.clone());
    let excess = noted.len().saturating_sub(NOTED_MAX);
    noted.drain(..excess);
    store.put_settings(KEY, &noted)
}

/// Tells every stranger noted by [`note`] that they are in (in their direct chat), then
/// forgets them. One who cannot be reached now (their channel does not run, or the platform
/// refuses) stays noted for the next start.
pub async fn welcome(store: &Store, notices: &Notices) {
    let noted: Vec<PairingRequest> = match store.get_settings(KEY) {
        Ok(noted) => noted.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the strangers approved while offline");
            return;
        }
    };
    if noted.is_empty() {
        return;
    }
    let mut left = Vec::new();
    for request in noted {
        match direct_chat(notices, &request).await {
            Some(to) => notices.say(&to, IN_WHILE_OFFLINE).await,
            None => left.push(request),
        }
    }
    let written = match left.is_empty() {
        true => store.clear_settings(KEY),
        false => store.put_settings(KEY, &left),
    };
    if let Err(e) = written {
        tracing::warn!(error = %e, "cannot forget the strangers told they are in");
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

    #[test]
    fn approvals_are_noted_in_order_and_bounded() {
        let store = Store::temporary().unwrap();
        for i in 0..NOTED_MAX + 2 {
            note(&store, &request(&i.to_string())).unwrap();
        }
        let noted: Vec<PairingRequest> = store.get_settings(KEY).unwrap().unwrap();
        assert_eq!(noted.len(), NOTED_MAX);
        assert_eq!(noted[0].sender_id, "2", "the oldest went first");
        assert_eq!(noted[NOTED_MAX - 1].sender_id, (NOTED_MAX + 1).to_string());
    }
}
