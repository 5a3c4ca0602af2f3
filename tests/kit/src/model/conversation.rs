//! What the fake model reads from a request: the last user text, a tool result after it, and
//! the offered tools (names and argument schemas). The three wire formats fill a
//! [`ConversationBuilder`].

use serde_json::Value;

/// The parts of a request that decide the answer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Conversation {
    /// Text of the last user message that carries text (system reminders left out).
    pub(crate) last_user_text: Option<String>,
    /// Text of the last tool result, when it comes after the last user text.
    pub(crate) tool_result_after: Option<String>,
    /// The tools the request offers, in order.
    pub(crate) tools: Vec<OfferedTool>,
}

/// One tool a request offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OfferedTool {
    /// The tool's name.
    pub(crate) name: String,
    /// Its argument JSON schema (`parameters`, `function.parameters` or `input_schema`), or
    /// `null` when the request gives none.
    pub(crate) schema: Value,
}

impl OfferedTool {
    /// A tool with no schema.
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> OfferedTool {
        OfferedTool {
            name: name.to_owned(),
            schema: Value::Null,
        }
    }
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
    tools: Vec<OfferedTool>,
}

impl ConversationBuilder {
    /// Adds one user-role message made of `parts`. Text parts that are empty, are Claude
    /// Code's `<system-reminder>` blocks, or are its `[Request interrupted by user]` marker
    /// (sent as the first part of the next message after a cancel) do not count as user text.
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

    /// Records the offered tools from a request's `tools` array: `name` with `parameters`
    /// (Responses) or `input_schema` (Anthropic), or `function.name` with
    /// `function.parameters` (Chat Completions). Tools without a name (built-ins such as
    /// `web_search`) are left out.
    pub(crate) fn offered_tools(&mut self, tools: &Value) {
        for tool in tools.as_array().into_iter().flatten() {
            let (name, schema) = match tool["name"].as_str() {
                Some(name) => {
                    let schema = match &tool["parameters"] {
                        Value::Null => &tool["input_schema"],
                        parameters => parameters,
                    };
                    (name, schema)
                }
                None => match tool["function"]["name"].as_str() {
                    Some(name) => (name, &tool["function"]["parameters"]),
                    None => continue,
                },
            };
            self.tools.push(OfferedTool {
                name: name.to_owned(),
                schema: schema.clone(),
            });
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

/// Claude Code's marker at the start of the user message after a cancelled turn.
const INTERRUPTED: &str = "[Request interrupted by user";

fn counts_as_user_text(text: &str) -> bool {
    let trimmed = text.trim();
    !trimmed.is_empty()
        && !trimmed.starts_with("<system-reminder>")
        && !trimmed.starts_with(INTERRUPTED)
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
    fn interrupt_marker_is_not_user_text() {
        let mut builder = ConversationBuilder::default();
        builder.user([Part::Text("slow 200 100".into())]);
        builder.user([
            Part::Text("[Request interrupted by user]\n".into()),
            Part::Text("run ls".into()),
        ]);
        let conversation = builder.finish();
        assert_eq!(conversation.last_user_text.as_deref(), Some("run ls"));
    }

    #[test]
    fn offered_tools_keep_their_schema_in_every_shape() {
        let schema = serde_json::json!({ "type": "object", "properties": { "cmd": {} } });
        let mut builder = ConversationBuilder::default();
        builder.offered_tools(&serde_json::json!([
            { "type": "function", "name": "exec_command", "parameters": schema },
            { "name": "Bash", "input_schema": schema },
            { "type": "function", "function": { "name": "shell", "parameters": schema } },
            { "type": "web_search" },
            { "type": "custom", "name": "apply_patch" },
        ]));
        let tools = builder.finish().tools;
        let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["exec_command", "Bash", "shell", "apply_patch"]);
        assert!(tools[..3].iter().all(|t| t.schema == schema));
        assert_eq!(tools[3].schema, Value::Null);
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
