//! The directives: what the fake model answers, decided from the last user text.
//!
//! See the crate docs for the list. Text that does not parse as a directive is echoed.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::conversation::{Conversation, OfferedTool};
use super::long::long_text;

/// Shell-like tools `run` looks for, in order of preference.
const SHELL_TOOLS: &[&str] = &["exec", "exec_command", "shell", "Bash", "bash"];

/// The `justification` an `escalate` call gives, where the tool takes one.
const JUSTIFICATION: &str = "The fake model asks to run this outside the sandbox.";

/// Characters of a tool result quoted back in the `done:` answer.
const DONE_QUOTE: usize = 200;

/// Characters per streamed delta of a `long` answer.
const LONG_CHUNK: usize = 50;

/// The answer of `markdown <ms>`: a heading, emphasis, a list, a table and a code block.
pub(crate) const MARKDOWN_SAMPLE: &str = "# Plan\nSome **bold** and `code`.\n- first\n- second\n\n\
| name | n |\n|---|--:|\n| alpha | 1 |\n\n```rust\nfn main() { let x = 1; }\n```\nDone.";

/// Characters per streamed delta of a `markdown` answer.
const MARKDOWN_CHUNK: usize = 6;

/// Largest `long` answer, to keep a typo from eating memory.
const LONG_MAX: usize = 10_000_000;

/// What to send back for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// A normal answer: text, tool calls, or both.
    Answer(Answer),
    /// An HTTP error in the provider's shape.
    Fail(Failure),
}

/// A successful answer, as the streamed pieces.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Answer {
    /// Text deltas; their concatenation is the answer text.
    pub(crate) chunks: Vec<String>,
    /// Real delay before each text delta.
    pub(crate) delay: Duration,
    /// After the text, send nothing more and keep the connection open.
    pub(crate) stall: bool,
    /// Tool calls, after the text.
    pub(crate) tool_calls: Vec<ToolCall>,
    /// Reasoning deltas, before everything else.
    pub(crate) reasoning: Vec<String>,
}

impl Answer {
    fn text(text: &str) -> Answer {
        Answer {
            chunks: text
                .split_inclusive(char::is_whitespace)
                .map(str::to_owned)
                .collect(),
            ..Answer::default()
        }
    }

    /// The whole answer text.
    pub(crate) fn full_text(&self) -> String {
        self.chunks.concat()
    }

    /// Characters the answer is made of, for the usage count.
    pub(crate) fn output_chars(&self) -> usize {
        let text: usize = self.chunks.iter().map(|c| c.chars().count()).sum();
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum();
        text + calls
    }
}

/// One tool call the model makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolCall {
    /// `<request#>_<i>`: each wire format puts its own prefix before it (`call_`, `toolu_`).
    pub(crate) key: String,
    /// The tool's name.
    pub(crate) name: String,
    /// The arguments as JSON text.
    pub(crate) arguments: String,
}

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// HTTP status.
    pub(crate) status: StatusCode,
    /// The error message in the body.
    pub(crate) message: String,
}

/// Decides replies; holds the `ratelimit` counters shared by every endpoint.
#[derive(Debug, Default)]
pub(crate) struct Script {
    ratelimits: Mutex<HashMap<String, u64>>,
}

impl Script {
    /// The reply to request number `request` (1-based) holding `conversation`.
    pub(crate) fn reply(&self, conversation: &Conversation, request: usize) -> Reply {
        if let Some(result) = &conversation.tool_result_after {
            let quote: String = result.chars().take(DONE_QUOTE).collect();
            return Reply::Answer(Answer::text(&format!("done: {quote}")));
        }
        let user = conversation
            .last_user_text
            .as_deref()
            .unwrap_or_default()
            .trim();
        // `think <rest>`: reasoning first, then what `<rest>` answers.
        if let Some(rest) = user.strip_prefix("think ") {
            let rest = rest.trim();
            return match self.answer(conversation, request, rest) {
                Reply::Answer(mut answer) => {
                    answer.reasoning = vec!["Let me think ".to_owned(), format!("about {rest}.")];
                    Reply::Answer(answer)
                }
                fail => fail,
            };
        }
        self.answer(conversation, request, user)
    }

    /// The reply to `user`'s text (the directives).
    fn answer(&self, conversation: &Conversation, request: usize, user: &str) -> Reply {
        let calls = |list: Vec<(String, Value)>| {
            let tool_calls = list
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    key: format!("{request}_{}", i + 1),
                    name,
                    arguments: arguments.to_string(),
                })
                .collect();
            Reply::Answer(Answer {
                tool_calls,
                ..Answer::default()
            })
        };
        if let Some(reply) = super::summary::reply(user) {
            return reply;
        }
        match Directive::parse(user) {
            Some(Directive::Tool(name, arguments)) => calls(vec![(name, arguments)]),
            Some(Directive::Tools(list)) => calls(list),
            Some(Directive::Run(command, escalate)) => {
                match shell_call(&conversation.tools, command, escalate) {
                    Some(call) => calls(vec![call]),
                    None => Reply::Answer(Answer::text("no shell tool offered")),
                }
            }
            Some(Directive::Slow(ms, n)) => Reply::Answer(Answer {
                chunks: (1..=n).map(|i| format!("tick {i} ")).collect(),
                delay: Duration::from_millis(ms),
                ..Answer::default()
            }),
            Some(Directive::Markdown(ms)) => Reply::Answer(Answer {
                chunks: MARKDOWN_SAMPLE
                    .chars()
                    .collect::<Vec<_>>()
                    .chunks(MARKDOWN_CHUNK)
                    .map(|chunk| chunk.iter().collect())
                    .collect(),
                delay: Duration::from_millis(ms),
                ..Answer::default()
            }),
            Some(Directive::After(ms, text)) => Reply::Answer(Answer {
                chunks: vec![format!("ok: {text}")],
                delay: Duration::from_millis(ms),
                ..Answer::default()
            }),
            Some(Directive::Stall) => Reply::Answer(Answer {
                chunks: vec!["thinking...".to_owned()],
                stall: true,
                ..Answer::default()
            }),
            Some(Directive::Error(status)) => Reply::Fail(Failure {
                status,
                message: format!("fake error {}", status.as_u16()),
            }),
            Some(Directive::RateLimit(n)) => self.ratelimit(user, n),
            Some(Directive::Long(n)) => Reply::Answer(Answer {
                chunks: chunk(&long_text(n), LONG_CHUNK),
                ..Answer::default()
            }),
            Some(Directive::Verbatim(text)) => Reply::Answer(Answer::text(text)),
            None => Reply::Answer(Answer::text(&format!("ok: {user}"))),
        }
    }

    fn ratelimit(&self, text: &str, limit: u64) -> Reply {
        let mut counters = self
            .ratelimits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let seen = counters.entry(text.to_owned()).or_insert(0);
        if *seen < limit {
            *seen += 1;
            Reply::Fail(Failure {
                status: StatusCode::TOO_MANY_REQUESTS,
                message: format!("fake rate limit {} of {limit}", *seen),
            })
        } else {
            Reply::Answer(Answer::text("ok: recovered"))
        }
    }
}

/// A parsed directive.
#[derive(Debug, Clone, PartialEq)]
enum Directive<'a> {
    Tool(String, Value),
    Tools(Vec<(String, Value)>),
    /// `run` (false) or `escalate` (true) with the command.
    Run(&'a str, bool),
    Slow(u64, u64),
    /// `markdown <ms>`: [`MARKDOWN_SAMPLE`] in small deltas, each after a real delay of `ms`.
    Markdown(u64),
    /// `after <ms> <text>`: `ok: <text>` in one delta, after a real delay of `ms`.
    After(u64, &'a str),
    Stall,
    Error(StatusCode),
    RateLimit(u64),
    Long(usize),
    /// `verbatim <text>`: answer exactly `<text>`.
    Verbatim(&'a str),
}

impl<'a> Directive<'a> {
    /// The directive at the start of `text`, or `None` when the text is to be echoed.
    fn parse(text: &'a str) -> Option<Directive<'a>> {
        let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let rest = rest.trim();
        match word {
            "tool" => {
                let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let arguments = match arguments.trim() {
                    "" => Value::Object(Map::new()),
                    json => serde_json::from_str::<Value>(json)
                        .ok()
                        .filter(Value::is_object)?,
                };
                (!name.is_empty()).then(|| Directive::Tool(name.to_owned(), arguments))
            }
            "tools" => {
                let list = serde_json::from_str::<Vec<Value>>(rest).ok()?;
                let calls = list.iter().map(|call| {
                    let name = call["name"].as_str()?.to_owned();
                    let arguments = match &call["arguments"] {
                        Value::Null => Value::Object(Map::new()),
                        object @ Value::Object(_) => object.clone(),
                        _ => return None,
                    };
                    Some((name, arguments))
                });
                calls.collect::<Option<Vec<_>>>().map(Directive::Tools)
            }
            "run" if !rest.is_empty() => Some(Directive::Run(rest, false)),
            "escalate" if !rest.is_empty() => Some(Directive::Run(rest, true)),
            "slow" => {
                let (ms, n) = rest.split_once(char::is_whitespace)?;
                Some(Directive::Slow(ms.parse().ok()?, n.trim().parse().ok()?))
            }
            "after" => {
                let (ms, text) = rest.split_once(char::is_whitespace)?;
                Some(Directive::After(ms.parse().ok()?, text.trim()))
            }
            "markdown" => rest.parse().ok().map(Directive::Markdown),
            "stall" => Some(Directive::Stall),
            "verbatim" if !rest.is_empty() => Some(Directive::Verbatim(rest)),
            "error" => {
                let status = StatusCode::from_u16(rest.parse().ok()?).ok()?;
                (status.is_client_error() || status.is_server_error())
                    .then_some(Directive::Error(status))
            }
            "ratelimit" => rest.parse().ok().map(Directive::RateLimit),
            "long" => rest
                .parse()
                .ok()
                .filter(|n| *n <= LONG_MAX)
                .map(Directive::Long),
            _ => None,
        }
    }
}

/// The call `run <command>` (or `escalate <command>`) makes: the first shell-like tool offered,
/// with the arguments its schema asks for.
///
/// The command goes into `cmd` when the schema has it (Codex `exec_command`), into `command` as
/// `["bash", "-lc", command]` when that property is an array (Codex `shell`), else into
/// `command` as a string (Claude `Bash`). `escalate` adds the sandbox escape the schema offers:
/// `sandbox_permissions: "require_escalated"` or `with_escalated_permissions: true`, plus a
/// `justification`; a tool with no such property gets the same call as `run`. A tool offered
/// without a schema is shaped by its name (`exec_command` as above, `shell` as above, others a
/// string `command`).
fn shell_call(tools: &[OfferedTool], command: &str, escalate: bool) -> Option<(String, Value)> {
    let tool = SHELL_TOOLS
        .iter()
        .find_map(|shell| tools.iter().find(|tool| tool.name == *shell))?;
    let by_name = match tool.name.as_str() {
        "exec_command" => &["cmd", "sandbox_permissions", "justification"][..],
        "shell" => &["command[]", "with_escalated_permissions", "justification"][..],
        _ => &["command"][..],
    };
    let properties = tool.schema["properties"].as_object();
    let has = |key: &str| match properties {
        Some(properties) => match key.strip_suffix("[]") {
            Some(key) => properties
                .get(key)
                .is_some_and(|p| p["type"].as_str() == Some("array")),
            None => properties.contains_key(key),
        },
        None => by_name.contains(&key),
    };
    let mut arguments = Map::new();
    if has("cmd") {
        arguments.insert("cmd".into(), json!(command));
    } else if has("command[]") {
        arguments.insert("command".into(), json!(["bash", "-lc", command]));
    } else {
        arguments.insert("command".into(), json!(command));
    }
    if escalate {
        let mut escalated = false;
        if has("sandbox_permissions") {
            arguments.insert("sandbox_permissions".into(), json!("require_escalated"));
            escalated = true;
        } else if has("with_escalated_permissions") {
            arguments.insert("with_escalated_permissions".into(), json!(true));
            escalated = true;
        }
        if escalated && has("justification") {
            arguments.insert("justification".into(), json!(JUSTIFICATION));
        }
    }
    Some((tool.name.clone(), Value::Object(arguments)))
}

/// Splits `text` into pieces of `size` characters (the last may be shorter).
pub(crate) fn chunk(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|piece| piece.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &str, tools: &[&str]) -> Reply {
        reply_with(text, tools.iter().map(|t| OfferedTool::named(t)).collect())
    }

    fn reply_with(text: &str, tools: Vec<OfferedTool>) -> Reply {
        let conversation = Conversation {
            last_user_text: Some(text.to_owned()),
            tool_result_after: None,
            tools,
        };
        Script::default().reply(&conversation, 3)
    }

    fn schema_tool(name: &str, properties: Value) -> OfferedTool {
        OfferedTool {
            name: name.to_owned(),
            schema: json!({ "type": "object", "properties": properties }),
        }
    }

    fn calls(reply: Reply) -> Vec<(String, String)> {
        match reply {
            Reply::Answer(answer) => answer
                .tool_calls
                .into_iter()
                .map(|c| (c.name, c.arguments))
                .collect(),
            Reply::Fail(failure) => panic!("unexpected failure {failure:?}"),
        }
    }

    #[test]
    fn run_picks_the_first_offered_shell_tool_in_its_shape() {
        let cases = [
            (&["Read", "Bash"][..], "Bash", r#"{"command":"ls -l"}"#),
            (
                &["shell", "bash"][..],
                "shell",
                r#"{"command":["bash","-lc","ls -l"]}"#,
            ),
            (&["exec_command"][..], "exec_command", r#"{"cmd":"ls -l"}"#),
            (&["bash", "exec"][..], "exec", r#"{"command":"ls -l"}"#),
        ];
        for (tools, name, arguments) in cases {
            assert_eq!(
                calls(reply("run ls -l", tools)),
                [(name.into(), arguments.into())]
            );
        }
    }

    #[test]
    fn run_follows_the_offered_schema() {
        let exec = schema_tool(
            "exec_command",
            json!({ "cmd": { "type": "string" }, "sandbox_permissions": {}, "justification": {} }),
        );
        let shell = schema_tool(
            "shell",
            json!({ "command": { "type": "array" }, "with_escalated_permissions": {} }),
        );
        let bash = schema_tool("Bash", json!({ "command": { "type": "string" } }));
        let odd = schema_tool("exec_command", json!({ "command": { "type": "string" } }));
        let cases = [
            (exec.clone(), r#"{"cmd":"ls"}"#),
            (shell.clone(), r#"{"command":["bash","-lc","ls"]}"#),
            (bash.clone(), r#"{"command":"ls"}"#),
            (odd, r#"{"command":"ls"}"#),
        ];
        for (tool, arguments) in cases {
            let name = tool.name.clone();
            assert_eq!(
                calls(reply_with("run ls", vec![tool])),
                [(name, arguments.into())]
            );
        }
    }

    #[test]
    fn escalate_adds_the_sandbox_escape_the_schema_offers() {
        let exec = schema_tool(
            "exec_command",
            json!({ "cmd": {}, "sandbox_permissions": {}, "justification": {} }),
        );
        let shell = schema_tool(
            "shell",
            json!({ "command": { "type": "array" }, "with_escalated_permissions": {} }),
        );
        let bash = schema_tool("Bash", json!({ "command": {} }));
        let expected = [
            json!({ "cmd": "touch x", "sandbox_permissions": "require_escalated",
                    "justification": JUSTIFICATION }),
            json!({ "command": ["bash", "-lc", "touch x"], "with_escalated_permissions": true }),
            json!({ "command": "touch x" }),
        ];
        for (tool, expected) in [exec, shell, bash].into_iter().zip(expected) {
            let got = calls(reply_with("escalate touch x", vec![tool]));
            let arguments: Value = serde_json::from_str(&got[0].1).unwrap();
            assert_eq!(arguments, expected);
        }
        let unnamed = calls(reply("escalate touch x", &["exec_command"]));
        let arguments: Value = serde_json::from_str(&unnamed[0].1).unwrap();
        assert_eq!(arguments["sandbox_permissions"], "require_escalated");
    }

    #[test]
    fn escalate_without_a_shell_tool_says_so() {
        let Reply::Answer(answer) = reply("escalate ls", &["Read"]) else {
            panic!("no answer")
        };
        assert_eq!(answer.full_text(), "no shell tool offered");
    }

    #[test]
    fn malformed_directives_are_echoed() {
        for text in [
            "tool",
            "tool x [1]",
            "tools {}",
            "slow 5",
            "after 5",
            "after x y",
            "error 200",
            "long x",
            "escalate",
        ] {
            let Reply::Answer(answer) = reply(text, &[]) else {
                panic!("{text}")
            };
            assert_eq!(answer.full_text(), format!("ok: {text}"));
        }
    }

    #[test]
    fn after_answers_its_text_in_one_delta_after_the_delay() {
        let Reply::Answer(answer) = reply("after 250 c1 m02", &[]) else {
            panic!("no answer")
        };
        assert_eq!(answer.chunks, ["ok: c1 m02"]);
        assert_eq!(answer.delay, Duration::from_millis(250));
    }

    #[test]
    fn tool_ids_carry_request_number_and_index() {
        let Reply::Answer(answer) = reply(r#"tools [{"name":"a"},{"name":"b"}]"#, &[]) else {
            panic!("no answer")
        };
        let keys: Vec<_> = answer.tool_calls.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["3_1", "3_2"]);
    }
}
