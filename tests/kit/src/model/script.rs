//! The directives: what the fake model answers, decided from the last user text.
//!
//! See the crate docs for the list. Text that does not parse as a directive is echoed.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::conversation::Conversation;
use super::long::long_text;

/// Shell-like tools `run` looks for, in order of preference, with the argument shape each takes.
const SHELL_TOOLS: &[&str] = &["exec", "exec_command", "shell", "Bash", "bash"];

/// Characters of a tool result quoted back in the `done:` answer.
const DONE_QUOTE: usize = 200;

/// Characters per streamed delta of a `long` answer.
const LONG_CHUNK: usize = 50;

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
        match Directive::parse(user) {
            Some(Directive::Tool(name, arguments)) => calls(vec![(name, arguments)]),
            Some(Directive::Tools(list)) => calls(list),
            Some(Directive::Run(command)) => match shell_call(&conversation.tools, command) {
                Some(call) => calls(vec![call]),
                None => Reply::Answer(Answer::text("no shell tool offered")),
            },
            Some(Directive::Slow(ms, n)) => Reply::Answer(Answer {
                chunks: (1..=n).map(|i| format!("tick {i} ")).collect(),
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
    Run(&'a str),
    Slow(u64, u64),
    Stall,
    Error(StatusCode),
    RateLimit(u64),
    Long(usize),
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
            "run" if !rest.is_empty() => Some(Directive::Run(rest)),
            "slow" => {
                let (ms, n) = rest.split_once(char::is_whitespace)?;
                Some(Directive::Slow(ms.parse().ok()?, n.trim().parse().ok()?))
            }
            "stall" => Some(Directive::Stall),
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

/// The call `run <command>` makes: the first shell-like tool offered, with its argument shape.
fn shell_call(tools: &[String], command: &str) -> Option<(String, Value)> {
    let name = SHELL_TOOLS
        .iter()
        .find(|shell| tools.iter().any(|tool| tool == *shell))?;
    let arguments = match *name {
        "exec_command" => json!({ "cmd": command }),
        "shell" => json!({ "command": ["bash", "-lc", command] }),
        _ => json!({ "command": command }),
    };
    Some(((*name).to_owned(), arguments))
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
        let conversation = Conversation {
            last_user_text: Some(text.to_owned()),
            tool_result_after: None,
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        };
        Script::default().reply(&conversation, 3)
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
    fn malformed_directives_are_echoed() {
        for text in [
            "tool",
            "tool x [1]",
            "tools {}",
            "slow 5",
            "error 200",
            "long x",
        ] {
            let Reply::Answer(answer) = reply(text, &[]) else {
                panic!("{text}")
            };
            assert_eq!(answer.full_text(), format!("ok: {text}"));
        }
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
