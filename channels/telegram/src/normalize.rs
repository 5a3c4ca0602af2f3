//! Telegram messages -> normalized [`Inbound`] records (SPEC 1.1, 1.2).

use chela_channel::{ChatKind, Conversation, Inbound, ReplyTo, Sender};
use teloxide::types::{
    ChatKind as TgChatKind, Me, Message, MessageEntityKind, PublicChatKind, PublicChatSupergroup,
    User,
};

/// The General topic of a forum: messages without a topic id belong to it.
pub const GENERAL_TOPIC: &str = "1";

/// Normalizes a message for account `account`; `None` for what chela does not answer
/// (channel posts, other bots, messages with neither text nor a file). A file's caption is the
/// text.
pub fn normalize(message: &Message, me: &Me, account: &str) -> Option<Inbound> {
    let attachments = crate::media::attachments(message);
    let text = match message.text().or_else(|| message.caption()) {
        Some(text) => text,
        None if !attachments.is_empty() => "",
        None => return None,
    };
    let from = message.from.as_ref()?;
    if from.is_bot {
        return None;
    }
    let conversation = conversation(message, account)?;
    let bot_name = me.user.username.as_deref().unwrap_or_default();
    if addressed_to_another_bot(text, bot_name) {
        return None;
    }
    let reply = explicit_reply(message);
    Some(Inbound {
        conversation,
        sender: sender(from),
        message_id: message.id.0.to_string(),
        text: strip_leading_mention(text, bot_name),
        reply_to: reply.map(|r| ReplyTo {
            message_id: r.id.0.to_string(),
            text: r
                .text()
                .or_else(|| r.caption())
                .unwrap_or_default()
                .to_string(),
            sender_id: r
                .from
                .as_ref()
                .map(|u| u.id.0.to_string())
                .unwrap_or_default(),
        }),
        mentioned: mentions_bot(message, me),
        timestamp_ms: u64::try_from(message.date.timestamp_millis()).unwrap_or(0),
        interaction: None,
        attachments,
    })
}

/// The conversation `message` is in, for account `account`; `None` for a channel post.
pub(crate) fn conversation(message: &Message, account: &str) -> Option<Conversation> {
    let (kind, thread_id) = place(message)?;
    Some(Conversation {
        channel: "telegram".into(),
        account: account.into(),
        kind,
        chat_id: message.chat.id.0.to_string(),
        thread_id,
    })
}

/// `user` as a sender.
pub(crate) fn sender(user: &User) -> Sender {
    Sender {
        id: user.id.0.to_string(),
        name: user.full_name(),
        username: user.username.clone(),
    }
}

/// The kind of chat `message` is in and its forum topic, if any; `None` for a channel post.
fn place(message: &Message) -> Option<(ChatKind, Option<String>)> {
    Some(match &message.chat.kind {
        TgChatKind::Private(_) => (ChatKind::Direct, None),
        TgChatKind::Public(public) => match &public.kind {
            PublicChatKind::Channel(_) => return None,
            PublicChatKind::Group => (ChatKind::Group, None),
            PublicChatKind::Supergroup(PublicChatSupergroup { is_forum, .. }) => {
                let topic = is_forum.then(|| {
                    message
                        .thread_id
                        .filter(|_| message.is_topic_message)
                        .map_or_else(|| GENERAL_TOPIC.to_string(), |t| t.0.0.to_string())
                });
                (ChatKind::Group, topic)
            }
        },
    })
}

/// True when the message mentions the bot (`@name`, a text mention, `/cmd@name`) or replies
/// to one of its messages.
pub fn mentions_bot(message: &Message, me: &Me) -> bool {
    let replied_to_bot = explicit_reply(message)
        .and_then(|r| r.from.as_ref())
        .is_some_and(|u| u.id == me.user.id);
    if replied_to_bot {
        return true;
    }
    let Some(name) = me.user.username.as_deref() else {
        return false;
    };
    let handle = format!("@{}", name.to_lowercase());
    let entities = message
        .parse_entities()
        .or_else(|| message.parse_caption_entities());
    entities.unwrap_or_default().iter().any(|e| match e.kind() {
        MessageEntityKind::Mention => e.text().to_lowercase() == handle,
        MessageEntityKind::TextMention { user } => user.id == me.user.id,
        MessageEntityKind::BotCommand => e.text().to_lowercase().ends_with(&handle),
        _ => false,
    })
}

/// The message this one really replies to. In a forum topic every message carries an
/// implicit reply to the topic's creation message (whose id is the topic id); that is not a
/// reply, least of all "to the bot" when the bot created the topic.
fn explicit_reply(message: &Message) -> Option<&Message> {
    let reply = message.reply_to_message()?;
    let implicit = message.is_topic_message && message.thread_id.is_some_and(|t| t.0 == reply.id);
    (!implicit).then_some(reply)
}

/// True for `/command@otherbot`: a command meant for another bot in the same group.
fn addressed_to_another_bot(text: &str, bot_name: &str) -> bool {
    let Some(command) = text.trim_start().strip_prefix('/') else {
        return false;
    };
    let head = command.split_whitespace().next().unwrap_or_default();
    match head.split_once('@') {
        Some((_, target)) => !target.eq_ignore_ascii_case(bot_name),
        None => false,
    }
}

/// Drops a leading `@botname` so the model sees what was said to it.
fn strip_leading_mention(text: &str, bot_name: &str) -> String {
    let trimmed = text.trim_start();
    if !bot_name.is_empty()
        && let Some(rest) = trimmed.strip_prefix('@')
        && rest.len() >= bot_name.len()
        && rest.is_char_boundary(bot_name.len())
        && rest[..bot_name.len()].eq_ignore_ascii_case(bot_name)
    {
        let after = &rest[bot_name.len()..];
        if after.is_empty()
            || after.starts_with(|c: char| c.is_whitespace() || c == ',' || c == ':')
        {
            return after
                .trim_start_matches([',', ':'])
                .trim_start()
                .to_string();
        }
    }
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Me {
        serde_json::from_value(serde_json::json!({
            "id": 99, "is_bot": true, "first_name": "chela", "username": "chela_bot",
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false
        }))
        .unwrap()
    }

    fn message(chat: serde_json::Value, text: &str, extra: serde_json::Value) -> Message {
        let mut m = serde_json::json!({
            "message_id": 5, "date": 1700000000, "chat": chat, "text": text,
            "from": {"id": 7, "is_bot": false, "first_name": "Ann", "last_name": "Lee", "username": "ann"}
        });
        if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(extra.clone());
        }
        serde_json::from_value(m).unwrap()
    }

    #[test]
    fn a_photo_without_a_caption_is_kept_with_its_file() {
        let chat = serde_json::json!({"id": 7, "type": "private", "first_name": "Ann"});
        let mut json = serde_json::to_value(message(chat, "x", serde_json::json!({}))).unwrap();
        let map = json.as_object_mut().unwrap();
        map.remove("text");
        map.insert(
            "photo".into(),
            serde_json::json!([{"file_id": "p1", "file_unique_id": "u", "width": 10, "height": 10}]),
        );
        let photo: Message = serde_json::from_value(json).unwrap();
        let inbound = normalize(&photo, &me(), "default").unwrap();
        assert_eq!(inbound.text, "");
        assert_eq!(inbound.attachments.len(), 1);
        assert_eq!(inbound.attachments[0].file_ref, "p1");
        // Without text or a file there is nothing to answer.
        let chat = serde_json::json!({"id": 7, "type": "private", "first_name": "Ann"});
        let mut json = serde_json::to_value(message(chat, "x", serde_json::json!({}))).unwrap();
        json.as_object_mut().unwrap().remove("text");
        json["location"] = serde_json::json!({"latitude": 1.0, "longitude": 2.0});
        let bare: Message = serde_json::from_value(json).unwrap();
        assert!(normalize(&bare, &me(), "default").is_none());
    }

    #[test]
    fn a_private_message_is_a_direct_inbound() {
        let m = message(
            serde_json::json!({"id": 7, "type": "private", "first_name": "Ann"}),
            "hi",
            serde_json::json!({}),
        );
        let inbound = normalize(&m, &me(), "default").unwrap();
        assert_eq!(inbound.conversation.kind, ChatKind::Direct);
        assert_eq!(inbound.conversation.chat_id, "7");
        assert_eq!(inbound.sender.name, "Ann Lee");
        assert_eq!(inbound.timestamp_ms, 1_700_000_000_000);
        assert!(!inbound.mentioned);
    }

    #[test]
    fn a_forum_message_without_topic_belongs_to_general() {
        let chat =
            serde_json::json!({"id": -1001, "type": "supergroup", "title": "f", "is_forum": true});
        let general = normalize(
            &message(chat.clone(), "x", serde_json::json!({})),
            &me(),
            "default",
        )
        .unwrap();
        assert_eq!(general.conversation.thread_id.as_deref(), Some("1"));
        let topic = message(
            chat,
            "x",
            serde_json::json!({"message_thread_id": 42, "is_topic_message": true}),
        );
        assert_eq!(
            normalize(&topic, &me(), "default")
                .unwrap()
                .conversation
                .thread_id
                .as_deref(),
            Some("42")
        );
    }

    #[test]
    fn commands_for_another_bot_are_not_ours() {
        let group = serde_json::json!({"id": -5, "type": "group", "title": "g"});
        assert!(
            normalize(
                &message(group.clone(), "/help@other_bot", serde_json::json!({})),
                &me(),
                "d"
            )
            .is_none()
        );
        assert!(
            normalize(
                &message(group.clone(), "/help@chela_bot", serde_json::json!({})),
                &me(),
                "d"
            )
            .is_some()
        );
        assert!(normalize(&message(group, "/help", serde_json::json!({})), &me(), "d").is_some());
    }

    #[test]
    fn the_implicit_reply_to_a_topic_the_bot_created_is_not_a_mention() {
        let chat =
            serde_json::json!({"id": -1001, "type": "supergroup", "title": "f", "is_forum": true});
        let m = message(
            chat.clone(),
            "hello",
            serde_json::json!({
            "message_thread_id": 40, "is_topic_message": true,
            "reply_to_message": {"message_id": 40, "date": 1700000000, "chat": chat,
                "from": {"id": 99, "is_bot": true, "first_name": "chela"},
                "forum_topic_created": {"name": "t", "icon_color": 7322096}}}),
        );
        let inbound = normalize(&m, &me(), "default").unwrap();
        assert!(!inbound.mentioned);
        assert!(inbound.reply_to.is_none());
    }

    #[test]
    fn mentions_replies_and_commands_address_the_bot() {
        let group = serde_json::json!({"id": -5, "type": "group", "title": "g"});
        let mention = message(
            group.clone(),
            "@Chela_Bot what time is it",
            serde_json::json!({"entities": [{"type": "mention", "offset": 0, "length": 10}]}),
        );
        let inbound = normalize(&mention, &me(), "default").unwrap();
        assert!(inbound.mentioned);
        assert_eq!(inbound.text, "what time is it");
        let other = message(
            group.clone(),
            "@someone hi",
            serde_json::json!({"entities": [{"type": "mention", "offset": 0, "length": 8}]}),
        );
        assert!(!normalize(&other, &me(), "default").unwrap().mentioned);
        let reply = message(
            group.clone(),
            "and?",
            serde_json::json!({"reply_to_message": {
            "message_id": 4, "date": 1700000000, "chat": {"id": -5, "type": "group", "title": "g"},
            "text": "earlier", "from": {"id": 99, "is_bot": true, "first_name": "chela"}}}),
        );
        assert!(normalize(&reply, &me(), "default").unwrap().mentioned);
        let command = message(
            group,
            "/status@chela_bot",
            serde_json::json!({"entities": [{"type": "bot_command", "offset": 0, "length": 17}]}),
        );
        assert!(normalize(&command, &me(), "default").unwrap().mentioned);
    }
}
