//! Building Discord `Message` objects, for simulated users and for the bot alike, and storing
//! them in their channel.

use serde_json::{Value, json};

use super::json::iso_now;
use super::state::{State, Stored};

/// What a new message is made of.
#[derive(Debug, Clone, Default)]
pub(crate) struct Draft {
    pub(crate) id: u64,
    pub(crate) channel_id: u64,
    pub(crate) author: Value,
    pub(crate) content: String,
    pub(crate) mentions: Vec<Value>,
    pub(crate) mention_everyone: bool,
    /// Role ids mentioned.
    pub(crate) mention_roles: Vec<u64>,
    /// The replied-to message: its id and current JSON.
    pub(crate) reply: Option<(u64, Value)>,
    pub(crate) attachments: Vec<Value>,
    pub(crate) embeds: Vec<Value>,
    pub(crate) nonce: Option<Value>,
    pub(crate) tts: bool,
    /// Action rows of buttons.
    pub(crate) components: Vec<Value>,
}

impl Draft {
    /// The REST `Message` JSON (no `guild_id`/`member`; dispatches add them).
    pub(crate) fn to_json(&self, guild_id: Option<u64>) -> Value {
        let mut message = json!({
            "id": self.id.to_string(),
            "channel_id": self.channel_id.to_string(),
            "author": self.author,
            "content": self.content,
            "timestamp": iso_now(),
            "edited_timestamp": null,
            "tts": self.tts,
            "mention_everyone": self.mention_everyone,
            "mentions": self.mentions,
            "mention_roles": self.mention_roles.iter().map(u64::to_string).collect::<Vec<_>>(),
            "attachments": self.attachments,
            "embeds": self.embeds,
            "components": self.components,
            "pinned": false,
            "type": if self.reply.is_some() { 19 } else { 0 },
            "flags": 0,
        });
        if let Some(nonce) = &self.nonce {
            message["nonce"] = nonce.clone();
        }
        if let Some((id, referenced)) = &self.reply {
            let mut reference = json!({
                "type": 0,
                "message_id": id.to_string(),
                "channel_id": self.channel_id.to_string(),
            });
            if let Some(guild) = guild_id {
                reference["guild_id"] = json!(guild.to_string());
            }
            message["message_reference"] = reference;
            message["referenced_message"] = nested(referenced);
        }
        message
    }
}

/// A message as nested in `referenced_message`: one level deep only.
fn nested(message: &Value) -> Value {
    let mut message = message.clone();
    if let Some(map) = message.as_object_mut() {
        map.remove("referenced_message");
    }
    message
}

/// An `Attachment` object served (in name only) by the fake at `base_url`.
pub(crate) fn attachment(
    base_url: &str,
    id: u64,
    channel: u64,
    filename: &str,
    size: u64,
    content_type: Option<&str>,
) -> Value {
    let url = format!("{base_url}/attachments/{channel}/{id}/{filename}");
    json!({
        "id": id.to_string(),
        "filename": filename,
        "size": size,
        "url": url,
        "proxy_url": url,
        "content_type": content_type,
    })
}

impl State {
    /// Stores a new message in its channel (which must be known): a thread counts it.
    pub(crate) fn store_message(&mut self, channel: u64, stored: Stored) -> bool {
        let Some(ch) = self.channels.get_mut(&channel) else {
            return false;
        };
        if let Some(meta) = &mut ch.thread {
            meta.message_count += 1;
        }
        let id = super::json::snowflake(&stored.json["id"]).unwrap_or_default();
        ch.messages.insert(id, stored);
        true
    }
}
