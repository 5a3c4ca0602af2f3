//! Interactions, normalized: a slash command becomes an [`Inbound`] record whose text is
//! `/<name> <args>` (so the core's command parser takes it like a typed command), a button
//! press a [`Press`]; the conversation and sender are those of a message in the same channel,
//! thread or DM, and each carries the interaction id so the answer can go back privately.

use chela_channel::{ChatKind, Conversation, Inbound, Press, Sender};
use serenity::model::application::{
    CommandDataOptionValue, CommandInteraction, CommandType, ComponentInteraction,
    ComponentInteractionDataKind,
};
use serenity::model::user::User;

use crate::normalize::Place;
use crate::slash::ARGS;

/// The `message_id` of an interaction's inbound: unique, and never a message snowflake.
pub fn message_id(interaction: u64) -> String {
    format!("interaction:{interaction}")
}

/// Normalizes a slash command for `account`, given where its channel lives; `None` for
/// commands that are not chat-input commands (user and message context menus) or come from
/// bots.
pub fn normalize_command(
    command: &CommandInteraction,
    place: Place,
    account: &str,
) -> Option<Inbound> {
    if command.data.kind != CommandType::ChatInput || command.user.bot {
        return None;
    }
    Some(Inbound {
        conversation: conversation(command.channel_id.get(), place, account),
        sender: sender(&command.user),
        message_id: message_id(command.id.get()),
        text: text_of(command),
        reply_to: None,
        mentioned: true,
        timestamp_ms: u64::try_from(command.id.created_at().unix_timestamp()).unwrap_or(0) * 1000,
        interaction: Some(command.id.get().to_string()),
        attachments: Vec::new(),
    })
}

/// Normalizes a button press (or a choice in a string select menu: the chosen option's
/// value is its data) for `account`, given where its channel lives; `None` for presses by
/// bots and for other components.
pub fn normalize_press(press: &ComponentInteraction, place: Place, account: &str) -> Option<Press> {
    if press.user.bot {
        return None;
    }
    let data = match &press.data.kind {
        ComponentInteractionDataKind::Button => press.data.custom_id.clone(),
        ComponentInteractionDataKind::StringSelect { values } => values.first()?.clone(),
        _ => return None,
    };
    Some(Press {
        conversation: conversation(press.channel_id.get(), place, account),
        sender: sender(&press.user),
        message_id: press.message.id.get().to_string(),
        data,
        handle: press.id.get().to_string(),
    })
}

/// The conversation of Discord channel `channel` of `account`, sitting at `place`: a thread
/// is its parent's chat with the thread's id.
fn conversation(channel: u64, place: Place, account: &str) -> Conversation {
    let channel = channel.to_string();
    let (kind, chat_id, thread_id) = match place {
        Place::Direct => (ChatKind::Direct, channel, None),
        Place::Channel => (ChatKind::Channel, channel, None),
        Place::Thread(parent) => (ChatKind::Channel, parent.to_string(), Some(channel)),
    };
    Conversation {
        channel: "discord".into(),
        account: account.into(),
        kind,
        chat_id,
        thread_id,
    }
}

/// Who `user` is: their display name, else their username.
fn sender(user: &User) -> Sender {
    Sender {
        id: user.id.get().to_string(),
        name: user
            .global_name
            .clone()
            .unwrap_or_else(|| user.name.clone()),
        username: Some(user.name.clone()),
    }
}

/// `/<name>` followed by the `args` option's text, if any.
fn text_of(command: &CommandInteraction) -> String {
    let args = command
        .data
        .options
        .iter()
        .find(|o| o.name == ARGS)
        .and_then(|o| match &o.value {
            CommandDataOptionValue::String(text) => Some(text.trim()),
            _ => None,
        })
        .filter(|text| !text.is_empty());
    match args {
        Some(args) => format!("/{} {args}", command.data.name),
        None => format!("/{}", command.data.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An INTERACTION_CREATE payload as Discord sends it for a guild slash command.
    fn interaction(extra: serde_json::Value) -> CommandInteraction {
        let mut i = serde_json::json!({
            "id": "1300000000000000001", "application_id": "99", "type": 2,
            "data": {"id": "55", "name": "queue", "type": 1,
                     "options": [{"name": "args", "type": 3, "value": " collect cap:5 "}]},
            "guild_id": "300", "channel_id": "200",
            "channel": {"id": "200", "type": 0, "name": "general"},
            "member": {"user": {"id": "7", "username": "ann", "global_name": "Ann",
                                "discriminator": "0"},
                       "roles": [], "joined_at": "2026-01-01T00:00:00+00:00",
                       "deaf": false, "mute": false, "flags": 0, "permissions": "0"},
            "token": "tok", "version": 1, "app_permissions": "0", "locale": "en-US",
            "guild_locale": "en-US", "entitlements": [], "authorizing_integration_owners": {"0": "300"},
            "context": 0, "attachment_size_limit": 10485760
        });
        if let (Some(i), Some(extra)) = (i.as_object_mut(), extra.as_object()) {
            i.extend(extra.clone());
        }
        serde_json::from_value(i).unwrap()
    }

    #[test]
    fn a_guild_command_reads_like_the_typed_command_from_its_user() {
        let inbound = normalize_command(
            &interaction(serde_json::json!({})),
            Place::Channel,
            "default",
        )
        .unwrap();
        assert_eq!(inbound.text, "/queue collect cap:5");
        assert_eq!(inbound.conversation.kind, ChatKind::Channel);
        assert_eq!(inbound.conversation.chat_id, "200");
        assert_eq!(inbound.conversation.thread_id, None);
        assert_eq!(inbound.sender.id, "7");
        assert_eq!(inbound.sender.name, "Ann");
        assert!(inbound.mentioned);
        assert_eq!(inbound.message_id, "interaction:1300000000000000001");
        assert_eq!(inbound.interaction.as_deref(), Some("1300000000000000001"));
        assert!(
            inbound.timestamp_ms > 1_420_070_400_000,
            "from the snowflake"
        );
    }

    #[test]
    fn a_thread_keeps_its_parent_and_no_args_is_the_bare_command() {
        let bare = serde_json::json!({"data": {"id": "55", "name": "status", "type": 1}});
        let inbound = normalize_command(&interaction(bare), Place::Thread(150), "d").unwrap();
        assert_eq!(inbound.text, "/status");
        assert_eq!(inbound.conversation.chat_id, "150");
        assert_eq!(inbound.conversation.thread_id.as_deref(), Some("200"));
    }

    #[test]
    fn a_dm_command_comes_from_its_user() {
        let dm = serde_json::json!({
            "guild_id": null, "member": null, "channel": {"id": "200", "type": 1},
            "user": {"id": "8", "username": "bob", "discriminator": "0"}
        });
        let inbound = normalize_command(&interaction(dm), Place::Direct, "d").unwrap();
        assert_eq!(inbound.conversation.kind, ChatKind::Direct);
        assert_eq!(inbound.sender.id, "8");
        assert_eq!(inbound.sender.name, "bob");
    }

    #[test]
    fn context_menu_commands_are_not_chat() {
        let menu =
            serde_json::json!({"data": {"id": "55", "name": "Ask", "type": 2, "target_id": "7"}});
        assert!(normalize_command(&interaction(menu), Place::Channel, "d").is_none());
    }

    /// A button press as Discord sends it: the interaction, with the message the button is on.
    fn press(extra: serde_json::Value) -> ComponentInteraction {
        let mut i = serde_json::json!({
            "id": "1300000000000000002", "application_id": "99", "type": 3,
            "data": {"custom_id": "tok-1", "component_type": 2},
            "guild_id": "300", "channel_id": "200",
            "channel": {"id": "200", "type": 0, "name": "general"},
            "member": {"user": {"id": "7", "username": "ann", "global_name": "Ann",
                                "discriminator": "0"},
                       "roles": [], "joined_at": "2026-01-01T00:00:00+00:00",
                       "deaf": false, "mute": false, "flags": 0, "permissions": "0"},
            "message": {"id": "555", "channel_id": "200", "content": "Run `ls`?", "type": 0,
                        "author": {"id": "99", "username": "chela", "discriminator": "0",
                                   "bot": true},
                        "timestamp": "2026-01-01T00:00:00+00:00", "edited_timestamp": null,
                        "tts": false, "mention_everyone": false, "mentions": [],
                        "mention_roles": [], "attachments": [], "embeds": [], "pinned": false,
                        "components": []},
            "token": "tok", "version": 1, "app_permissions": "0", "locale": "en-US",
            "guild_locale": "en-US", "entitlements": [], "authorizing_integration_owners": {"0": "300"},
            "context": 0, "attachment_size_limit": 10485760
        });
        if let (Some(i), Some(extra)) = (i.as_object_mut(), extra.as_object()) {
            i.extend(extra.clone());
        }
        serde_json::from_value(i).unwrap()
    }

    #[test]
    fn a_press_names_its_message_data_presser_and_thread() {
        let p = normalize_press(&press(serde_json::json!({})), Place::Thread(150), "d").unwrap();
        assert_eq!(p.data, "tok-1");
        assert_eq!(p.message_id, "555");
        assert_eq!(p.handle, "1300000000000000002");
        assert_eq!(p.sender.id, "7");
        assert_eq!(p.sender.name, "Ann");
        assert_eq!(p.conversation.chat_id, "150");
        assert_eq!(p.conversation.thread_id.as_deref(), Some("200"));
    }

    #[test]
    fn a_choice_in_a_select_menu_is_a_press_of_its_value() {
        let menu = serde_json::json!({"data": {"custom_id": "menu:a", "component_type": 3,
                                               "values": ["b"]}});
        let p = normalize_press(&press(menu), Place::Channel, "d").unwrap();
        assert_eq!(p.data, "b");
        let none = serde_json::json!({"data": {"custom_id": "menu:a", "component_type": 3,
                                               "values": []}});
        assert!(normalize_press(&press(none), Place::Channel, "d").is_none());
        let users = serde_json::json!({"data": {"custom_id": "u", "component_type": 5,
                                                "values": ["1"]}});
        assert!(normalize_press(&press(users), Place::Channel, "d").is_none());
    }
}
