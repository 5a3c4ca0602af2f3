//! What the fake model reads from a request: the last user text, a tool result after it, and
//! the names of the offered tools. The three wire formats fill a [`ConversationBuilder`].

use serde_json::Value;

/// The parts of a request that decide the answer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Conversation {
    /// Text of the last user message that carries text (system reminders left out).
    pub(crate) last_user_text: Option<String>,
    /// Text of the last tool result, when it comes after the last user text.
    pub(crate) tool_result_after: Option<String>,
    /// Names of the tools the request offers, in order.
    pub(crate) tools: Vec<String>,
}

/// One piece of a user-side message, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// A text part written by the user (or the agent on the user's behalf).
    Text(String),
    /// A tool result, given as its text.
    ToolResult(String),
}

/// Collects messages in order and remembers where the last user text and tool result were.
#[derive(Debug, Default)]
pub(crate) struct ConversationBuilder {
    position: usize,
    user: Option<(usize, String)>,
    tool: Option<(usize, String)>,
    tools: Vec<String>,
}

impl ConversationBuilder {
    /// Adds one user-role message made of `parts`. Text parts that are empty or are Claude
    /// Code's `<system-reminder>` blocks do not count as user text.
    pub(crate) fn user(&mut self, parts: impl IntoIterator<Item = Part>) {
        let mut texts = Vec::new();
        let mut text_position = 0;
        for part in parts {
            self.position += 1;
            match part {
                Part::Text(text) if counts_as_user_text(&text) => {
                    texts.push(text);
                    text_position = self.position;
                }
                Part::Text(_) => {}
                Part::ToolResult(text) => self.tool = Some((self.position, text)),
            }
        }
        if !texts.is_empty() {
            self.user = Some((text_position, texts.join("\n")));
        }
    }

    /// Adds a tool result that stands on its own (an OpenAI `tool` message, a Responses
    /// `function_call_output` item).
    pub(crate) fn tool_result(&mut self, text: String) {
        self.position += 1;
        self.tool = Some((self.position, text));
    }

    /// Records the offered tools from a request's `tools` array (`name` or `function.name`).
    pub(crate) fn offered_tools(&mut self, tools: &Value) {
        for tool in tools.as_array().into_iter().flatten() {
            let name = tool["name"]
                .as_str()
                .or_else(|| tool["function"]["name"].as_str());
            if let Some(name) = name {
                self.tools.push(name.to_owned());
            }
        }
    }

    /// The finished conversation.
    pub(crate) fn finish(self) -> Conversation {
        let user_position = self.user.as_ref().map_or(0, |(position, _)| *position);
        let tool_result_after = self
            .tool
            .filter(|(position, _)| *position > user_position)
            .map(|(_, text)| text);
        Conversation {
            last_user_text: self.user.map(|(_, text)| text),
            tool_result_after,
            tools: self.tools,
        }
    }
}

fn counts_as_user_text(text: &str) -> bool {
    let trimmed = text.trim();
    !trimmed.is_empty() && !trimmed.starts_with("<system-reminder>")
}

/// The text parts of a message `content`: a plain string, or an array of strings and parts
/// with a `text` field (`text`, `input_text`, `output_text` types).
pub(crate) fn text_parts(content: &Value) -> Vec<String> {
    match content {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(text.clone()),
                Value::Object(_) => {
                    let kind = item["type"].as_str().unwrap_or("text");
                    let textual = matches!(kind, "text" | "input_text" | "output_text");
                    if textual {
                        item["text"].as_str().map(str::to_owned)
                    } else {
                        None
                    }
                }
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// All text of a content value joined by newlines (used for tool results).
pub(crate) fn joined_text(content: &Value) -> String {
    text_parts(content).join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_result_after_user_text_is_reported() {
        let mut builder = ConversationBuilder::default();
        builder.user([Part::Text("run ls".into())]);
        builder.tool_result("file.txt".into());
        let conversation = builder.finish();
        assert_eq!(conversation.last_user_text.as_deref(), Some("run ls"));
        assert_eq!(conversation.tool_result_after.as_deref(), Some("file.txt"));
    }

    #[test]
    fn new_user_text_after_tool_result_wins() {
        let mut builder = ConversationBuilder::default();
        builder.user([Part::Text("run ls".into())]);
        builder.user([
            Part::ToolResult("file.txt".into()),
            Part::Text("again".into()),
        ]);
        let conversation = builder.finish();
        assert_eq!(conversation.last_user_text.as_deref(), Some("again"));
        assert_eq!(conversation.tool_result_after, None);
    }

    #[test]
    fn reminder_only_message_is_not_user_text() {
        let mut builder = ConversationBuilder::default();
        builder.user([Part::Text("run ls".into())]);
        builder.user([
            Part::ToolResult("out".into()),
            Part::Text("<system-reminder>x</system-reminder>".into()),
        ]);
        let conversation = builder.finish();
        assert_eq!(conversation.last_user_text.as_deref(), Some("run ls"));
        assert_eq!(conversation.tool_result_after.as_deref(), Some("out"));
    }
}
