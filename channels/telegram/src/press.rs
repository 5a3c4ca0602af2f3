//! A press on an inline keyboard button (a `callback_query` update) as a [`Press`].

use chela_channel::Press;
use teloxide::types::CallbackQuery;

use crate::normalize::{conversation, sender};

/// The press `query` is, when it came from a button under a message the bot can still read
/// (a press on a message too old to read, or from an inline query, is left out).
pub fn press(query: &CallbackQuery, account: &str) -> Option<Press> {
    let message = query.message.as_ref()?.regular_message()?;
    Some(Press {
        conversation: conversation(message, account)?,
        sender: sender(&query.from),
        message_id: message.id.0.to_string(),
        data: query.data.clone()?,
        handle: query.id.0.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn query(data: Option<&str>) -> CallbackQuery {
        serde_json::from_value(serde_json::json!({
            "id": "q1",
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
            "chat_instance": "ci",
            "data": data,
            "message": {
                "message_id": 7, "date": 1_700_000_000,
                "chat": {"id": 42, "type": "private", "first_name": "Ann"},
                "from": {"id": 1, "is_bot": true, "first_name": "Bot", "username": "bot"},
                "text": "Approve?"
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_press_in_a_dm_names_the_chat_the_presser_and_the_message() {
        let press = press(&query(Some("tok")), "main").unwrap();
        assert_eq!(press.conversation.chat_id, "42");
        assert_eq!(press.conversation.kind, chela_channel::ChatKind::Direct);
        assert_eq!(press.sender.id, "42");
        assert_eq!(press.message_id, "7");
        assert_eq!(press.data, "tok");
        assert_eq!(press.handle, "q1");
    }

    #[test]
    fn a_press_without_data_is_left_out() {
        assert!(press(&query(None), "main").is_none());
    }
}
