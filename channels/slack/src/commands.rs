//! Slash commands (`/new`, `/stop`, … registered in the Slack app): each becomes an
//! [`Inbound`] whose text is the command, answered privately through its `response_url`
//! ([`crate::SlackChannel`]'s `answer_command`). Slack runs slash commands outside threads
//! only; in a thread, `@bot /new` does the same.

use chela_channel::{ChatKind, Conversation, Inbound, Sender};
use serde_json::Value;

use crate::intake::Intake;

/// Slash commands and button presses.
#[derive(Clone)]
pub struct Commands {
    /// Where commands go.
    pub intake: Intake,
}

impl Commands {
    /// Takes a slash command; `false` when the sink did not have it (Slack sends it again).
    pub async fn command(&self, payload: &Value) -> bool {
        let Some(inbound) = command_inbound(payload, &self.intake.account) else {
            return true;
        };
        // `channels` limits commands as it limits messages (DMs are not limited).
        let channels = &self.intake.channels;
        let chat = &inbound.conversation.chat_id;
        if inbound.conversation.kind != ChatKind::Direct
            && !channels.is_empty()
            && !channels.iter().any(|c| c == chat)
        {
            return true;
        }
        match self.intake.sink.accept(inbound).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "a Slack command was not taken");
                false
            }
        }
    }

    /// A button press: chela sends no buttons on Slack yet, so there is nothing to do.
    pub async fn press(&self, payload: &Value) {
        tracing::debug!(kind = ?payload["type"].as_str(), "a Slack interaction was ignored");
    }
}

/// The inbound of a slash command payload; `None` when it lacks what a command needs.
fn command_inbound(payload: &Value, account: &str) -> Option<Inbound> {
    let command = payload["command"].as_str().filter(|c| c.starts_with('/'))?;
    let channel = payload["channel_id"].as_str().filter(|c| !c.is_empty())?;
    let user = payload["user_id"].as_str().filter(|u| !u.is_empty())?;
    let response_url = payload["response_url"].as_str().filter(|u| !u.is_empty())?;
    let trigger = payload["trigger_id"].as_str().unwrap_or(response_url);
    // A group DM's id starts with `G` or (newer ones) `C`, like a channel's: its name
    // (`mpdm-ann--bob-1`) tells it apart.
    let group_dm = payload["channel_name"]
        .as_str()
        .is_some_and(|n| n == "mpdm" || n.starts_with("mpdm-"));
    let kind = match channel.as_bytes().first() {
        Some(b'D') => ChatKind::Direct,
        _ if group_dm => ChatKind::Group,
        _ => ChatKind::Channel,
    };
    let args = payload["text"].as_str().unwrap_or_default().trim();
    let text = if args.is_empty() {
        command.to_string()
    } else {
        format!("{command} {args}")
    };
    Some(Inbound {
        conversation: Conversation {
            channel: "slack".into(),
            account: account.to_string(),
            kind,
            chat_id: channel.to_string(),
            thread_id: None,
        },
        sender: Sender {
            id: user.to_string(),
            name: payload["user_name"].as_str().unwrap_or(user).to_string(),
            username: payload["user_name"].as_str().map(str::to_string),
        },
        message_id: format!("command-{trigger}"),
        text,
        reply_to: None,
        mentioned: true,
        timestamp_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0)),
        interaction: Some(response_url.to_string()),
        attachments: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_slash_command_is_an_addressed_message_answered_privately() {
        let payload = json!({"command":"/new","text":" fast ","user_id":"U1","user_name":"ann","channel_id":"D1",
            "response_url":"https://hooks.slack.com/commands/1","trigger_id":"t1"});
        let inbound = command_inbound(&payload, "default").unwrap();
        assert_eq!(inbound.text, "/new fast");
        assert_eq!(inbound.conversation.kind, ChatKind::Direct);
        assert_eq!(
            inbound.interaction.as_deref(),
            Some("https://hooks.slack.com/commands/1")
        );
        assert_eq!(inbound.message_id, "command-t1");
        assert!(inbound.mentioned);
        let channel = json!({"command":"/stop","user_id":"U1","channel_id":"C1","response_url":"https://hooks.slack.com/x"});
        let inbound = command_inbound(&channel, "default").unwrap();
        assert_eq!(
            (inbound.text.as_str(), inbound.conversation.kind),
            ("/stop", ChatKind::Channel)
        );
        assert_eq!(command_inbound(&json!({"command":"/x"}), "default"), None);
    }

    #[test]
    fn a_group_dm_is_a_group_whatever_its_id_starts_with() {
        for id in ["G1", "C1"] {
            let payload = json!({"command":"/new","user_id":"U1","channel_id":id,
                "channel_name":"mpdm-ann--bob--chela-1","response_url":"https://hooks.slack.com/x"});
            let inbound = command_inbound(&payload, "default").unwrap();
            assert_eq!(inbound.conversation.kind, ChatKind::Group, "{id}");
        }
        let private = json!({"command":"/new","user_id":"U1","channel_id":"G2",
            "channel_name":"privategroup","response_url":"https://hooks.slack.com/x"});
        let inbound = command_inbound(&private, "default").unwrap();
        assert_eq!(inbound.conversation.kind, ChatKind::Channel);
    }
}
