//! The `message` tool's actions beyond sending (docs/tools.md): react to a message, edit or
//! delete one the agent sent, pin one, start a poll. This file reads them from the call's
//! arguments; the gateway carries them out (the sessions port's `act`), and the tool policy
//! knows each by a name of its own (`message:react`, ...).

use chela_channel::Poll;
use serde_json::{Map, Value};

use super::args::{self, ArgError};

/// The `action` values the tool takes.
pub const ACTIONS: &[&str] = &["send", "react", "edit", "delete", "pin", "poll"];

/// One action of the `message` tool other than sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageAction {
    /// React with `emoji` to a message (`None`: the message the run answers).
    React {
        /// The platform message id.
        message_id: Option<String>,
        /// The emoji.
        emoji: String,
    },
    /// Replace the text of a message the agent sent.
    Edit {
        /// The platform message id.
        message_id: String,
        /// The new text.
        text: String,
    },
    /// Delete a message the agent sent.
    Delete {
        /// The platform message id.
        message_id: String,
    },
    /// Pin a message (`None`: the message the run answers).
    Pin {
        /// The platform message id.
        message_id: Option<String>,
    },
    /// Send a native poll.
    Poll(Poll),
}

impl MessageAction {
    /// The action's word, as the model names it (`react`, ...).
    pub fn word(&self) -> &'static str {
        match self {
            MessageAction::React { .. } => "react",
            MessageAction::Edit { .. } => "edit",
            MessageAction::Delete { .. } => "delete",
            MessageAction::Pin { .. } => "pin",
            MessageAction::Poll(_) => "poll",
        }
    }
}

/// The action the arguments ask for; `None` for sending (no `action`, or `send`).
pub(crate) fn parse(m: &Map<String, Value>) -> Result<Option<MessageAction>, ArgError> {
    let action = args::optional_str(m, "action")?
        .map(str::trim)
        .unwrap_or("");
    let action = match action {
        "" | "send" => return Ok(None),
        "react" => MessageAction::React {
            message_id: message_id(m)?,
            emoji: required(m, "emoji")?,
        },
        "edit" => MessageAction::Edit {
            message_id: message_id(m)?.ok_or_else(|| needs_id("edit"))?,
            text: required(m, "text")?,
        },
        "delete" => MessageAction::Delete {
            message_id: message_id(m)?.ok_or_else(|| needs_id("delete"))?,
        },
        "pin" => MessageAction::Pin {
            message_id: message_id(m)?,
        },
        "poll" => MessageAction::Poll(poll(m)?),
        other => {
            return Err(ArgError::invalid(format!(
                "unknown action {other:?}; expected one of {}",
                ACTIONS.join(", ")
            )));
        }
    };
    Ok(Some(action))
}

/// A required string argument that is not blank, trimmed.
fn required(m: &Map<String, Value>, key: &str) -> Result<String, ArgError> {
    let value = args::required_str(m, key)?.trim();
    if value.is_empty() {
        return Err(ArgError::invalid(format!(
            "argument `{key}` must not be empty"
        )));
    }
    Ok(value.to_owned())
}

fn needs_id(action: &str) -> ArgError {
    ArgError::invalid(format!(
        "{action} needs `message_id`: the id a send of yours reported (\"message id ...\")"
    ))
}

/// The `message_id` argument, a string or a number; `None` when absent or blank.
fn message_id(m: &Map<String, Value>) -> Result<Option<String>, ArgError> {
    match m.get("message_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        Some(_) => Err(ArgError::invalid(
            "argument `message_id` must be a message id (a string or a number)",
        )),
    }
}

/// The poll of `question`, `options` and `multiple`, checked against the platforms' limits.
fn poll(m: &Map<String, Value>) -> Result<Poll, ArgError> {
    let options = match m.get("options") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(|s| s.trim().to_owned())
                    .ok_or_else(|| ArgError::invalid("argument `options` must list strings"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(ArgError::invalid(
                "poll needs `options`: an array of 2 to 10 answers",
            ));
        }
    };
    let poll = Poll {
        question: required(m, "question")?,
        options,
        multiple: args::optional_bool(m, "multiple")?.unwrap_or(false),
    };
    match poll.problem() {
        Some(problem) => Err(ArgError::invalid(problem)),
        None => Ok(poll),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(args: Value) -> Result<Option<MessageAction>, String> {
        let Value::Object(m) = args else {
            panic!("not an object")
        };
        parse(&m).map_err(|e| e.to_string())
    }

    #[test]
    fn actions_are_read_with_their_arguments() {
        assert_eq!(parsed(json!({"text": "hi"})), Ok(None));
        assert_eq!(parsed(json!({"action": "send", "text": "hi"})), Ok(None));
        assert_eq!(
            parsed(json!({"action": "react", "emoji": "👍", "message_id": 17})),
            Ok(Some(MessageAction::React {
                message_id: Some("17".into()),
                emoji: "👍".into()
            }))
        );
        assert_eq!(
            parsed(json!({"action": "pin", "message_id": " "})),
            Ok(Some(MessageAction::Pin { message_id: None }))
        );
        assert_eq!(
            parsed(json!({"action": "edit", "message_id": "5", "text": "new"})),
            Ok(Some(MessageAction::Edit {
                message_id: "5".into(),
                text: "new".into()
            }))
        );
        let poll = parsed(
            json!({"action": "poll", "question": "Lunch?", "options": ["a", "b"], "multiple": true}),
        );
        assert_eq!(poll.unwrap().unwrap().word(), "poll");
    }

    #[test]
    fn what_is_missing_or_wrong_is_said() {
        let no_id = parsed(json!({"action": "delete"})).unwrap_err();
        assert!(no_id.contains("needs `message_id`"), "{no_id}");
        let no_emoji = parsed(json!({"action": "react"})).unwrap_err();
        assert!(no_emoji.contains("emoji"), "{no_emoji}");
        let one = parsed(json!({"action": "poll", "question": "q", "options": ["a"]})).unwrap_err();
        assert!(one.contains("2 to 10 options"), "{one}");
        let unknown = parsed(json!({"action": "shout"})).unwrap_err();
        assert!(unknown.contains("expected one of send, react"), "{unknown}");
        let bad_id = parsed(json!({"action": "pin", "message_id": [1]})).unwrap_err();
        assert!(bad_id.contains("message_id"), "{bad_id}");
    }
}
