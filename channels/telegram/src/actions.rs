//! The agent's message actions on Telegram: `setMessageReaction`, `pinChatMessage` and
//! `sendPoll`, over the same plain HTTP calls as the reply path (`api`), so their errors map
//! the same way (a 429's wait, a 5xx retryable, a refusal with Telegram's words).

use chela_channel::{ChannelError, Poll, SentMessage};
use serde_json::{Value, json};

use super::api::Api;

/// Reacts to message `message` of chat `chat` with `emoji`, replacing the bot's earlier
/// reaction there (a bot has one reaction per message). Telegram takes only the emoji of its
/// reaction list; another is refused with `REACTION_INVALID`.
pub(crate) async fn react(
    api: &Api,
    chat: i64,
    message: i32,
    emoji: &str,
) -> Result<(), ChannelError> {
    let params = json!({
        "chat_id": chat,
        "message_id": message,
        "reaction": [{ "type": "emoji", "emoji": emoji }],
    });
    api.call("setMessageReaction", &params).await?;
    Ok(())
}

/// Pins message `message` of chat `chat` without notifying the members (the bot needs the
/// right to pin in groups).
pub(crate) async fn pin(api: &Api, chat: i64, message: i32) -> Result<(), ChannelError> {
    let params = json!({
        "chat_id": chat,
        "message_id": message,
        "disable_notification": true,
    });
    api.call("pinChatMessage", &params).await?;
    Ok(())
}

/// Sends `poll` into chat `chat` (forum topic `topic`, if any): a regular poll whose voters
/// are shown (chela takes no Telegram channels, where polls must be anonymous).
pub(crate) async fn send_poll(
    api: &Api,
    chat: i64,
    topic: Option<i32>,
    poll: &Poll,
) -> Result<SentMessage, ChannelError> {
    let mut params = poll_params(chat, poll);
    if let Some(topic) = topic {
        params["message_thread_id"] = json!(topic);
    }
    let sent = api.call("sendPoll", &params).await?;
    match sent["message_id"].as_i64() {
        Some(id) => Ok(SentMessage {
            message_id: id.to_string(),
        }),
        None => Err(ChannelError::Transport(
            "sendPoll answered without a message_id".into(),
        )),
    }
}

/// The `sendPoll` parameters of `poll` into `chat`.
fn poll_params(chat: i64, poll: &Poll) -> Value {
    let options: Vec<Value> = poll
        .options
        .iter()
        .map(|option| json!({ "text": option.trim() }))
        .collect();
    json!({
        "chat_id": chat,
        "question": poll.question.trim(),
        "options": options,
        "allows_multiple_answers": poll.multiple,
        "is_anonymous": false,
    })
}

/// A Telegram message id from its text.
pub(crate) fn message_id(text: &str) -> Result<i32, ChannelError> {
    text.trim()
        .parse()
        .map_err(|_| ChannelError::Rejected(format!("bad telegram message id {text}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_becomes_send_poll_parameters() {
        let poll = Poll {
            question: " Lunch? ".into(),
            options: vec!["pizza".into(), " soup ".into()],
            multiple: true,
        };
        assert_eq!(
            poll_params(-100, &poll),
            json!({
                "chat_id": -100,
                "question": "Lunch?",
                "options": [{"text": "pizza"}, {"text": "soup"}],
                "allows_multiple_answers": true,
                "is_anonymous": false,
            })
        );
        assert_eq!(message_id(" 17 ").ok(), Some(17));
        assert!(message_id("x").is_err());
    }
}
