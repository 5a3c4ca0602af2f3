//! Discord messages -> normalized [`Inbound`] records (SPEC 1.1, 1.2): guild channels,
//! threads (the conversation keeps the parent; replies go to the thread), DMs, mentions.

use chela_channel::{Attachment, AttachmentKind, ChatKind, Conversation, Inbound, ReplyTo, Sender};
use serenity::model::channel::Message;
use serenity::model::id::UserId;

/// Where a guild message lives: a plain channel, or a thread under `parent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A direct message.
    Direct,
    /// A guild text channel.
    Channel,
    /// A thread whose parent channel is given.
    Thread(u64),
}

/// Normalizes `message` for account `account`, given where it lives; `None` for bots.
pub fn normalize(message: &Message, bot: UserId, place: Place, account: &str) -> Option<Inbound> {
    if message.author.bot {
        return None;
    }
    let channel = message.channel_id.get().to_string();
    let (kind, chat_id, thread_id) = match place {
        Place::Direct => (ChatKind::Direct, channel, None),
        Place::Channel => (ChatKind::Channel, channel, None),
        Place::Thread(parent) => (ChatKind::Channel, parent.to_string(), Some(channel)),
    };
    let replied_to_bot = message
        .referenced_message
        .as_ref()
        .is_some_and(|r| r.author.id == bot);
    Some(Inbound {
        conversation: Conversation {
            channel: "discord".into(),
            account: account.into(),
            kind,
            chat_id,
            thread_id,
        },
        sender: Sender {
            id: message.author.id.get().to_string(),
            name: message
                .author
                .global_name
                .clone()
                .unwrap_or_else(|| message.author.name.clone()),
            username: Some(message.author.name.clone()),
        },
        message_id: message.id.get().to_string(),
        text: strip_bot_mention(&message.content, bot),
        reply_to: message.referenced_message.as_ref().map(|r| ReplyTo {
            message_id: r.id.get().to_string(),
            text: r.content.clone(),
            sender_id: r.author.id.get().to_string(),
        }),
        mentioned: message.mentions_user_id(bot)
            || mentions_in_text(&message.content, bot)
            || replied_to_bot,
        timestamp_ms: u64::try_from(message.timestamp.unix_timestamp()).unwrap_or(0) * 1000,
        interaction: None,
        attachments: message.attachments.iter().map(attachment).collect(),
    })
}

/// A Discord attachment: its kind from the content type (images, audio, video, voice
/// messages; anything else is a document), fetched later from its CDN URL.
fn attachment(a: &serenity::model::channel::Attachment) -> Attachment {
    let mime = a
        .content_type
        .as_deref()
        .map(|m| m.split(';').next().unwrap_or(m).trim().to_owned());
    let top = mime.as_deref().and_then(|m| m.split('/').next());
    let kind = match top {
        Some("image") => AttachmentKind::Image,
        Some("audio") if a.waveform.is_some() => AttachmentKind::Voice,
        Some("audio") => AttachmentKind::Audio,
        Some("video") => AttachmentKind::Video,
        _ => AttachmentKind::Document,
    };
    Attachment {
        kind,
        file_ref: a.url.clone(),
        mime_type: mime,
        size: Some(u64::from(a.size)),
        file_name: Some(a.filename.clone()),
    }
}

fn mentions_in_text(content: &str, bot: UserId) -> bool {
    let id = bot.get();
    content.contains(&format!("<@{id}>")) || content.contains(&format!("<@!{id}>"))
}

/// Drops a leading `<@bot>` mention so the model sees what was said to it.
fn strip_bot_mention(content: &str, bot: UserId) -> String {
    let id = bot.get();
    let trimmed = content.trim_start();
    for prefix in [format!("<@{id}>"), format!("<@!{id}>")] {
        if let Some(rest) = trimmed.strip_prefix(&prefix) {
            return rest.trim_start_matches([',', ':']).trim_start().to_string();
        }
    }
    content.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(extra: serde_json::Value) -> Message {
        let mut m = serde_json::json!({
            "id": "100", "channel_id": "200", "guild_id": "300",
            "author": {"id": "7", "username": "ann", "global_name": "Ann", "discriminator": "0"},
            "content": "<@99> hello there", "timestamp": "2026-01-01T00:00:00+00:00",
            "tts": false, "mention_everyone": false,
            "mentions": [{"id": "99", "username": "chela", "discriminator": "0", "bot": true}],
            "mention_roles": [], "attachments": [], "embeds": [], "pinned": false, "type": 0
        });
        if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(extra.clone());
        }
        serde_json::from_value(m).unwrap()
    }

    #[test]
    fn a_guild_mention_is_normalized_and_stripped() {
        let inbound = normalize(
            &message(serde_json::json!({})),
            UserId::new(99),
            Place::Channel,
            "default",
        )
        .unwrap();
        assert_eq!(inbound.conversation.kind, ChatKind::Channel);
        assert_eq!(inbound.conversation.chat_id, "200");
        assert!(inbound.mentioned);
        assert_eq!(inbound.text, "hello there");
        assert_eq!(inbound.sender.name, "Ann");
    }

    #[test]
    fn attachments_keep_url_type_size_and_name() {
        let m = message(serde_json::json!({"content": "", "attachments": [
            {"id": "1", "filename": "cat.png", "size": 2048, "content_type": "image/png",
             "url": "https://cdn.example/a/cat.png", "proxy_url": "https://media.example/cat.png"},
            {"id": "2", "filename": "notes.txt", "size": 10,
             "url": "https://cdn.example/a/notes.txt", "proxy_url": "https://m/n.txt"}
        ]}));
        let inbound = normalize(&m, UserId::new(99), Place::Direct, "default").unwrap();
        let [image, doc] = inbound.attachments.as_slice() else {
            panic!("two attachments: {:?}", inbound.attachments);
        };
        assert_eq!(image.kind, AttachmentKind::Image);
        assert_eq!(image.file_ref, "https://cdn.example/a/cat.png");
        assert_eq!(image.mime_type.as_deref(), Some("image/png"));
        assert_eq!(image.size, Some(2048));
        assert_eq!(doc.kind, AttachmentKind::Document);
        assert_eq!(doc.file_name.as_deref(), Some("notes.txt"));
    }

    #[test]
    fn a_thread_keeps_its_parent() {
        let inbound = normalize(
            &message(serde_json::json!({})),
            UserId::new(99),
            Place::Thread(150),
            "default",
        )
        .unwrap();
        assert_eq!(inbound.conversation.chat_id, "150");
        assert_eq!(inbound.conversation.thread_id.as_deref(), Some("200"));
    }

    #[test]
    fn unmentioned_and_bot_messages() {
        let plain = message(serde_json::json!({"content": "hi all", "mentions": []}));
        assert!(
            !normalize(&plain, UserId::new(99), Place::Channel, "d")
                .unwrap()
                .mentioned
        );
        let bot = message(
            serde_json::json!({"author": {"id": "8", "username": "b", "discriminator": "0", "bot": true}}),
        );
        assert!(normalize(&bot, UserId::new(99), Place::Direct, "d").is_none());
    }
}
