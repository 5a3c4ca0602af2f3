//! A Slack `message` event (or a message of `conversations.history`) as an [`Inbound`]: who,
//! where (a DM, a group DM, a channel; a thread is a conversation of its own), the text as
//! plain text, the files, and whether the bot is addressed.

use chela_channel::{Attachment, AttachmentKind, ChatKind, Conversation, Inbound, Sender};
use serde_json::Value;

use crate::markup;
use crate::ts;

/// What a message is read against.
pub struct Context<'a> {
    /// The channel's account id.
    pub account: &'a str,
    /// The bot's user id (`auth.test`'s `user_id`).
    pub bot_user: &'a str,
    /// The channels taken (empty: all).
    pub channels: &'a [String],
}

/// Message subtypes that are something a person said; every other one (joins, edits,
/// deletions, topics, bots' messages) is not taken.
const SAID: [&str; 3] = ["file_share", "thread_broadcast", "me_message"];

/// The parts of a message chela takes, or `None` when it takes none of it: not a person's
/// message, the bot's own, or in a channel outside `channels`. `channel_type` is the event's
/// (`im`, `mpim`, `channel`, `group`); history messages pass their channel's.
pub fn message(event: &Value, channel_type: &str, cx: &Context<'_>) -> Option<Parts> {
    if event.get("bot_id").is_some_and(|b| !b.is_null()) {
        return None;
    }
    if let Some(subtype) = event["subtype"].as_str()
        && !SAID.contains(&subtype)
    {
        return None;
    }
    let user = event["user"].as_str().filter(|u| !u.is_empty())?;
    if user == cx.bot_user {
        return None;
    }
    let channel = event["channel"].as_str().filter(|c| !c.is_empty())?;
    let kind = match channel_type {
        "im" => ChatKind::Direct,
        "mpim" => ChatKind::Group,
        _ => ChatKind::Channel,
    };
    if kind != ChatKind::Direct
        && !cx.channels.is_empty()
        && !cx.channels.iter().any(|c| c == channel)
    {
        return None;
    }
    let message_ts = event["ts"]
        .as_str()
        .filter(|t| ts::to_micros(t).is_some())?;
    // History lists a thread's parent with `thread_ts` equal to its own `ts`: it is a
    // top-level message (as its live event was).
    let thread_ts = event["thread_ts"]
        .as_str()
        .filter(|t| *t != message_ts && ts::to_micros(t).is_some());
    Some(Parts {
        channel: channel.to_string(),
        kind,
        user: user.to_string(),
        ts: message_ts.to_string(),
        thread_ts: thread_ts.map(str::to_string),
        raw_text: event["text"].as_str().unwrap_or_default().to_string(),
        attachments: files(&event["files"]),
    })
}

/// A taken message, before its sender's name is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// Channel id (`C…`, `G…`, `D…`).
    pub channel: String,
    /// What kind of conversation.
    pub kind: ChatKind,
    /// Sender's user id.
    pub user: String,
    /// The message's timestamp (its id).
    pub ts: String,
    /// The thread it is in, if any.
    pub thread_ts: Option<String>,
    /// Its text as Slack wrote it.
    pub raw_text: String,
    /// Its files.
    pub attachments: Vec<Attachment>,
}

impl Parts {
    /// Where the answer goes: a DM's own thread only when the person wrote in one; in a
    /// channel or group DM always a thread, the one written in or one under this message,
    /// so each thread is a session of its own.
    pub fn conversation(&self, account: &str) -> Conversation {
        let thread = match (&self.thread_ts, self.kind) {
            (Some(thread), _) => Some(thread.clone()),
            (None, ChatKind::Direct) => None,
            (None, _) => Some(self.ts.clone()),
        };
        Conversation {
            channel: "slack".into(),
            account: account.to_string(),
            kind: self.kind,
            chat_id: self.channel.clone(),
            thread_id: thread,
        }
    }

    /// The [`Inbound`]: `name` is the sender's display name; `in_known_thread` says the bot
    /// took a message of this thread before (a thread it is in answers without a mention).
    pub fn inbound(
        &self,
        cx: &Context<'_>,
        name: &str,
        in_known_thread: bool,
        name_of: impl Fn(&str) -> Option<String>,
    ) -> Inbound {
        let mention = format!("<@{}>", cx.bot_user);
        let mentioned = self.kind == ChatKind::Direct
            || self.raw_text.contains(&mention)
            || (self.thread_ts.is_some() && in_known_thread);
        Inbound {
            conversation: self.conversation(cx.account),
            sender: Sender {
                id: self.user.clone(),
                name: name.to_string(),
                username: None,
            },
            message_id: self.ts.clone(),
            text: markup::to_plain(&self.raw_text, cx.bot_user, name_of),
            reply_to: None,
            mentioned,
            timestamp_ms: ts::to_millis(&self.ts),
            interaction: None,
            attachments: self.attachments.clone(),
        }
    }
}

/// A message's `files` as attachments (fetched later with the bot token).
fn files(files: &Value) -> Vec<Attachment> {
    let Some(files) = files.as_array() else {
        return Vec::new();
    };
    files
        .iter()
        .filter_map(|file| {
            // A remote file's URLs point wherever its maker said: never fetched.
            if file["is_external"] == true || file["mode"] == "external" {
                return None;
            }
            let url = file["url_private_download"].as_str()?;
            let mime = file["mimetype"].as_str().map(str::to_string);
            let kind = match mime.as_deref().and_then(|m| m.split('/').next()) {
                Some("image") => AttachmentKind::Image,
                Some("audio") if file["subtype"] == "slack_audio" => AttachmentKind::Voice,
                Some("audio") => AttachmentKind::Audio,
                Some("video") => AttachmentKind::Video,
                _ => AttachmentKind::Document,
            };
            Some(Attachment {
                kind,
                file_ref: url.to_string(),
                mime_type: mime,
                size: file["size"].as_u64(),
                file_name: file["name"].as_str().map(str::to_string),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CX: Context<'static> = Context {
        account: "default",
        bot_user: "UBOT",
        channels: &[],
    };

    #[test]
    fn a_channel_message_opens_a_thread_of_its_own_and_a_reply_stays_in_it() {
        let top = json!({"type":"message","channel":"C1","user":"U1","text":"<@UBOT> hi","ts":"1700000000.000100"});
        let parts = message(&top, "channel", &CX).unwrap();
        let inbound = parts.inbound(&CX, "ann", false, |_| None);
        assert_eq!(
            inbound.conversation.thread_id.as_deref(),
            Some("1700000000.000100")
        );
        assert_eq!(inbound.conversation.kind, ChatKind::Channel);
        assert!(inbound.mentioned);
        assert_eq!(inbound.text, "hi");
        assert_eq!(inbound.timestamp_ms, 1_700_000_000_000);
        let reply = json!({"channel":"C1","user":"U1","text":"more","ts":"1700000001.000100","thread_ts":"1700000000.000100"});
        let parts = message(&reply, "channel", &CX).unwrap();
        assert!(!parts.inbound(&CX, "ann", false, |_| None).mentioned);
        let inbound = parts.inbound(&CX, "ann", true, |_| None);
        assert!(inbound.mentioned, "a thread the bot is in needs no mention");
        assert_eq!(
            inbound.conversation.thread_id.as_deref(),
            Some("1700000000.000100")
        );
    }

    #[test]
    fn a_dm_is_direct_without_a_thread_and_always_addressed() {
        let dm = json!({"channel":"D1","user":"U1","text":"hello","ts":"1.000001"});
        let inbound = message(&dm, "im", &CX)
            .unwrap()
            .inbound(&CX, "ann", false, |_| None);
        assert_eq!(inbound.conversation.kind, ChatKind::Direct);
        assert_eq!(inbound.conversation.thread_id, None);
        assert!(inbound.mentioned);
        let group = json!({"channel":"G1","user":"U1","text":"hello","ts":"1.000001"});
        assert_eq!(message(&group, "mpim", &CX).unwrap().kind, ChatKind::Group);
    }

    #[test]
    fn a_thread_parent_read_from_history_is_a_top_level_message() {
        let parent = json!({"channel":"D1","user":"U1","text":"hi","ts":"1.000100",
            "thread_ts":"1.000100","reply_count":2,"latest_reply":"1.000300"});
        let parts = message(&parent, "im", &CX).unwrap();
        assert_eq!(parts.thread_ts, None);
        let inbound = parts.inbound(&CX, "ann", false, |_| None);
        assert_eq!(
            inbound.conversation.thread_id, None,
            "the DM's own conversation, as its live copy"
        );
        let parent = json!({"channel":"C1","user":"U1","text":"<@UBOT> hi","ts":"1.000100","thread_ts":"1.000100"});
        let parts = message(&parent, "channel", &CX).unwrap();
        assert_eq!(parts.thread_ts, None);
        assert_eq!(
            parts.conversation("default").thread_id.as_deref(),
            Some("1.000100")
        );
    }

    #[test]
    fn bots_edits_joins_and_other_channels_are_not_taken() {
        let ignored = [
            json!({"channel":"C1","user":"UBOT","text":"mine","ts":"1.1"}),
            json!({"channel":"C1","user":"U2","bot_id":"B2","text":"a bot","ts":"1.1"}),
            json!({"channel":"C1","user":"U1","subtype":"channel_join","text":"joined","ts":"1.1"}),
            json!({"channel":"C1","subtype":"message_changed","message":{"text":"x"},"ts":"1.1"}),
            json!({"channel":"C1","user":"U1","text":"no ts"}),
        ];
        for event in ignored {
            assert_eq!(message(&event, "channel", &CX), None, "{event}");
        }
        let only = ["C2".to_string()];
        let cx = Context {
            channels: &only,
            ..CX
        };
        let event = json!({"channel":"C1","user":"U1","text":"x","ts":"1.1"});
        assert_eq!(message(&event, "channel", &cx), None);
        let dm = json!({"channel":"D1","user":"U1","text":"x","ts":"1.1"});
        assert!(
            message(&dm, "im", &cx).is_some(),
            "DMs are not limited by channels"
        );
    }

    #[test]
    fn files_become_attachments_but_remote_ones_are_never_fetched() {
        let event = json!({"channel":"D1","user":"U1","text":"look","ts":"1.1","subtype":"file_share","files":[
            {"id":"F1","name":"a.png","mimetype":"image/png","size":3,"url_private_download":"https://files.slack.com/files-pri/T1-F1/a.png"},
            {"id":"F2","name":"n.txt","mimetype":"text/plain","url_private":"https://files.slack.com/files-pri/T1-F2/n.txt","url_private_download":"https://files.slack.com/files-pri/T1-F2/download/n.txt"},
            {"id":"F3","name":"gone"},
            {"id":"F4","name":"r","is_external":true,"url_private_download":"https://slack.com/api/conversations.history"},
            {"id":"F5","name":"only-private","url_private":"https://files.slack.com/files-pri/T1-F5/x"}]});
        let parts = message(&event, "im", &CX).unwrap();
        assert_eq!(parts.attachments.len(), 2);
        assert_eq!(parts.attachments[0].kind, AttachmentKind::Image);
        assert_eq!(parts.attachments[0].size, Some(3));
        assert_eq!(parts.attachments[1].kind, AttachmentKind::Document);
        assert_eq!(
            parts.attachments[1].file_ref,
            "https://files.slack.com/files-pri/T1-F2/download/n.txt"
        );
    }
}
