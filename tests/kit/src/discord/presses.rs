//! Button presses and menu choices: a simulated user presses a button (or chooses an option
//! of a select menu) under one of the bot's messages, which dispatches a component
//! interaction (type 3) the bot answers like a command's
//! ([`super::interactions`]).

use serde_json::json;

use super::FakeDiscord;
use super::interactions::Start;
use super::types::{ChannelSpec, UserSpec};

impl FakeDiscord {
    /// `user` presses the button with `custom_id` under the bot's message `message_id` in
    /// `channel`: dispatches `INTERACTION_CREATE` of type 3 (`data.custom_id`,
    /// `data.component_type` 2, and the whole `message`) and returns the interaction id;
    /// `None` if the message is not the bot's or was deleted. The button need not be there any
    /// more: a client still showing an old message sends its press all the same.
    pub fn user_presses(
        &self,
        channel: ChannelSpec,
        user: UserSpec,
        message_id: u64,
        custom_id: &str,
    ) -> Option<u64> {
        let data = json!({ "custom_id": custom_id, "component_type": 2 });
        self.component_interaction(channel, user, message_id, data)
    }

    /// `user` chooses the option with `value` in the select menu under the bot's message
    /// `message_id` in `channel`: dispatches `INTERACTION_CREATE` of type 3 with the menu's
    /// `custom_id`, `data.component_type` 3 and `data.values` `[value]`; `None` if the message
    /// is not the bot's, was deleted, has no select menu any more or no option `value`.
    pub fn user_chooses(
        &self,
        channel: ChannelSpec,
        user: UserSpec,
        message_id: u64,
        value: &str,
    ) -> Option<u64> {
        let message = self
            .sent(channel.id)
            .into_iter()
            .find(|m| m.id == message_id)?;
        // Discord refuses a value the menu does not offer.
        let (custom_id, options) = message.menu?;
        options.iter().find(|(_, v)| v == value)?;
        let data = json!({ "custom_id": custom_id, "component_type": 3, "values": [value] });
        self.component_interaction(channel, user, message_id, data)
    }

    /// Dispatches a component interaction with `data` on the bot's message `message_id`.
    fn component_interaction(
        &self,
        channel: ChannelSpec,
        user: UserSpec,
        message_id: u64,
        data: serde_json::Value,
    ) -> Option<u64> {
        let mut guard = self.shared.lock();
        let state = &mut *guard;
        let message = state
            .channels
            .get(&channel.id)
            .and_then(|c| c.messages.get(&message_id))
            .filter(|m| m.from_bot && !m.deleted)?
            .json
            .clone();
        let start = Start {
            kind: 3,
            name: data["custom_id"].as_str().unwrap_or("").to_owned(),
            data,
            message: Some((message_id, message)),
        };
        let id = state.start_interaction(&channel, &user, start);
        drop(guard);
        self.shared.touch();
        Some(id)
    }
}
