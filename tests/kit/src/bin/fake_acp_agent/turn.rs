//! The script language and one prompt turn.
//!
//! A turn runs in a task spawned off the connection (`ConnectionTo::spawn`),
//! never in the request handler itself: handlers run one at a time, so a
//! handler that awaited the client's answer to `fs/read_text_file` or
//! `session/request_permission` would stop the very dispatch loop that must
//! deliver that answer (and the `session/cancel` notification).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, CreateTerminalRequest, PermissionOption, PermissionOptionKind,
    Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, ReadTextFileRequest,
    ReleaseTerminalRequest, RequestPermissionOutcome, RequestPermissionRequest, SessionId,
    SessionNotification, SessionUpdate, StopReason, TerminalExitStatus, TerminalOutputRequest,
    TextContent, ToolCall, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::{Client, Error, JsonRpcRequest, UntypedMessage};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::io::{MethodLog, Output};

/// Gap between the chunks of `slow <n>`.
const SLOW_GAP: Duration = Duration::from_millis(200);
/// After `session/cancel`, how long a pending permission request may wait for
/// the client's (mandatory) `cancelled` answer before the turn ends anyway.
const PERMISSION_GRACE: Duration = Duration::from_secs(2);
/// `outputByteLimit` of `terminal/create`.
const TERMINAL_OUTPUT_LIMIT: u64 = 4096;

/// The permission options offered by `perm`: ids deliberately differ from kinds.
const PERMISSION_OPTIONS: [(&str, &str, PermissionOptionKind, &str); 4] = [
    (
        "opt-1",
        "Allow once",
        PermissionOptionKind::AllowOnce,
        "allow_once",
    ),
    (
        "opt-2",
        "Always allow",
        PermissionOptionKind::AllowAlways,
        "allow_always",
    ),
    (
        "opt-3",
        "Reject",
        PermissionOptionKind::RejectOnce,
        "reject_once",
    ),
    (
        "opt-4",
        "Always reject",
        PermissionOptionKind::RejectAlways,
        "reject_always",
    ),
];

/// Tool call ids are unique within the process.
static TOOL_CALLS: AtomicU64 = AtomicU64::new(1);

fn next_tool_call_id() -> String {
    format!("call-{}", TOOL_CALLS.fetch_add(1, Ordering::Relaxed))
}

/// One prompt, parsed from its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Anything else: `echo: <text>` in three chunks.
    Echo(String),
    /// `fs-read <path>`.
    FsRead(String),
    /// `fs-write <path> <text>`.
    FsWrite {
        /// As typed; relative paths are resolved against the session cwd.
        path: String,
        /// Everything after the path.
        text: String,
    },
    /// `term <command> [args..]`.
    Term(Vec<String>),
    /// `perm <title>`.
    Perm(String),
    /// `slow <n>`.
    Slow(u32),
    /// `plan`.
    Plan,
    /// `crash`.
    Crash,
    /// `noreply-close`.
    NoreplyClose,
    /// `unknown-update`.
    UnknownUpdate,
}

impl Command {
    /// Parses a prompt's text (see the binary's doc comment).
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        let (word, rest) = text
            .split_once(char::is_whitespace)
            .map_or((text, ""), |(word, rest)| (word, rest.trim()));
        match (word, rest) {
            ("fs-read", path) if !path.is_empty() => Self::FsRead(path.to_owned()),
            ("fs-write", rest) if !rest.is_empty() => {
                let (path, text) = rest
                    .split_once(char::is_whitespace)
                    .map_or((rest, ""), |(path, text)| (path, text.trim_start()));
                Self::FsWrite {
                    path: path.to_owned(),
                    text: text.to_owned(),
                }
            }
            ("term", command) if !command.is_empty() => {
                Self::Term(command.split_whitespace().map(str::to_owned).collect())
            }
            ("perm", title) => Self::Perm(if title.is_empty() {
                "fake tool".to_owned()
            } else {
                title.to_owned()
            }),
            ("slow", n) if n.parse::<u32>().is_ok() => Self::Slow(n.parse().unwrap_or(0)),
            ("plan", "") => Self::Plan,
            ("crash", "") => Self::Crash,
            ("noreply-close", "") => Self::NoreplyClose,
            ("unknown-update", "") => Self::UnknownUpdate,
            _ => Self::Echo(text.to_owned()),
        }
    }
}

/// What a request to the client came to.
enum Asked<T> {
    Answer(T),
    Failed(Error),
    /// The turn was cancelled first; the request was dropped, which makes the
    /// SDK send `$/cancel_request` for it.
    Cancelled,
}

/// One running prompt turn.
#[derive(Debug)]
pub struct Turn {
    cx: ConnectionTo<Client>,
    session_id: SessionId,
    cwd: PathBuf,
    cancel: CancellationToken,
    log: MethodLog,
    output: Output,
    /// The text of every message chunk sent so far (stored as the reply).
    reply: String,
}

impl Turn {
    /// A turn of `session_id`, cancelled through `cancel`.
    pub fn new(
        cx: ConnectionTo<Client>,
        session_id: SessionId,
        cwd: PathBuf,
        cancel: CancellationToken,
        log: MethodLog,
        output: Output,
    ) -> Self {
        Self {
            cx,
            session_id,
            cwd,
            cancel,
            log,
            output,
            reply: String::new(),
        }
    }

    /// The text of the message chunks sent so far.
    pub fn reply(&self) -> &str {
        &self.reply
    }

    /// Runs `command` to its stop reason. `Err` only when the connection can
    /// no longer carry notifications.
    pub async fn run(&mut self, command: Command) -> Result<StopReason, Error> {
        match command {
            Command::Echo(text) => {
                for part in thirds(&format!("echo: {text}")) {
                    self.say(part)?;
                }
                Ok(StopReason::EndTurn)
            }
            Command::FsRead(path) => self.fs_read(&path).await,
            Command::FsWrite { path, text } => self.fs_write(&path, text).await,
            Command::Term(command) => self.term(command).await,
            Command::Perm(title) => self.perm(title).await,
            Command::Slow(n) => self.slow(n).await,
            Command::Plan => self.plan(),
            Command::Crash => std::process::exit(3),
            Command::NoreplyClose => self.noreply_close().await,
            Command::UnknownUpdate => self.unknown_update(),
        }
    }

    fn update(&self, update: SessionUpdate) -> Result<(), Error> {
        self.cx
            .send_notification(SessionNotification::new(self.session_id.clone(), update))
    }

    fn say(&mut self, text: &str) -> Result<(), Error> {
        self.reply.push_str(text);
        self.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::Text(TextContent::new(text)),
        )))
    }

    fn absolute(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        }
    }

    /// Sends a request to the client and waits for its answer or the cancel.
    async fn ask<Req: JsonRpcRequest>(&self, request: Req) -> Asked<Req::Response> {
        let answer = self.cx.send_request(request).block_task();
        tokio::select! {
            result = answer => match result {
                Ok(response) => Asked::Answer(response),
                Err(error) => Asked::Failed(error),
            },
            () = self.cancel.cancelled() => Asked::Cancelled,
        }
    }

    async fn fs_read(&mut self, path: &str) -> Result<StopReason, Error> {
        let request = ReadTextFileRequest::new(self.session_id.clone(), self.absolute(path));
        match self.ask(request).await {
            Asked::Answer(response) => self.say(&format!("read: {}", response.content))?,
            Asked::Failed(error) => self.say(&format!("read error: {}", error.message))?,
            Asked::Cancelled => return Ok(StopReason::Cancelled),
        }
        Ok(StopReason::EndTurn)
    }

    async fn fs_write(&mut self, path: &str, text: String) -> Result<StopReason, Error> {
        let request = WriteTextFileRequest::new(self.session_id.clone(), self.absolute(path), text);
        match self.ask(request).await {
            Asked::Answer(_) => self.say(&format!("wrote {path}"))?,
            Asked::Failed(error) => self.say(&format!("write error: {}", error.message))?,
            Asked::Cancelled => return Ok(StopReason::Cancelled),
        }
        Ok(StopReason::EndTurn)
    }

    async fn term(&mut self, mut command: Vec<String>) -> Result<StopReason, Error> {
        let program = command.remove(0);
        let create = CreateTerminalRequest::new(self.session_id.clone(), program)
            .args(command)
            .cwd(self.cwd.clone())
            .output_byte_limit(TERMINAL_OUTPUT_LIMIT);
        let terminal = match self.ask(create).await {
            Asked::Answer(response) => response.terminal_id,
            Asked::Failed(error) => {
                self.say(&format!("term error: {}", error.message))?;
                return Ok(StopReason::EndTurn);
            }
            Asked::Cancelled => return Ok(StopReason::Cancelled),
        };
        let wait = WaitForTerminalExitRequest::new(self.session_id.clone(), terminal.clone());
        let status = match self.ask(wait).await {
            Asked::Answer(response) => Ok(response.exit_status),
            Asked::Failed(error) => Err(error),
            Asked::Cancelled => {
                // Release kills the command; nobody waits for the answer.
                let release = ReleaseTerminalRequest::new(self.session_id.clone(), terminal);
                self.cx.send_request(release).detach();
                return Ok(StopReason::Cancelled);
            }
        };
        let output = match status {
            Ok(status) => {
                let request = TerminalOutputRequest::new(self.session_id.clone(), terminal.clone());
                match self.ask(request).await {
                    Asked::Answer(response) => Ok((status, response.output)),
                    Asked::Failed(error) => Err(error),
                    Asked::Cancelled => Err(Error::request_cancelled()),
                }
            }
            Err(error) => Err(error),
        };
        let release = ReleaseTerminalRequest::new(self.session_id.clone(), terminal);
        let released = self.ask(release).await;
        match (output, released) {
            (Ok((status, output)), Asked::Answer(_)) => {
                let output = output.trim_end_matches('\n');
                self.say(&format!("exit {}: {output}", exit_code(&status)))?;
            }
            (Err(error), _) | (Ok(_), Asked::Failed(error)) => {
                self.say(&format!("term error: {}", error.message))?;
            }
            (Ok(_), Asked::Cancelled) => {}
        }
        Ok(if self.cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        })
    }

    async fn perm(&mut self, title: String) -> Result<StopReason, Error> {
        let id = next_tool_call_id();
        self.update(SessionUpdate::ToolCall(
            ToolCall::new(id.clone(), title.clone())
                .kind(ToolKind::Execute)
                .status(ToolCallStatus::Pending),
        ))?;
        let options = PERMISSION_OPTIONS
            .iter()
            .map(|(id, name, kind, _)| PermissionOption::new(*id, *name, *kind))
            .collect();
        let fields = ToolCallUpdateFields::new()
            .title(title)
            .kind(ToolKind::Execute)
            .status(ToolCallStatus::Pending);
        let request = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(id.clone(), fields),
            options,
        );
        let answer = self.cx.send_request(request).block_task();
        tokio::pin!(answer);
        let answer = tokio::select! {
            result = &mut answer => Some(result),
            () = self.cancel.cancelled() => {
                // ACP: after session/cancel the client must answer every
                // pending permission request with the `cancelled` outcome.
                tokio::time::timeout(PERMISSION_GRACE, &mut answer).await.ok()
            }
        };
        let outcome = match answer {
            Some(Ok(response)) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => PERMISSION_OPTIONS
                    .iter()
                    .find(|(id, ..)| *id == &*selected.option_id.0)
                    .map_or_else(
                        || format!("unknown option {}", selected.option_id),
                        |(.., kind)| (*kind).to_owned(),
                    ),
                _ => "cancelled".to_owned(),
            },
            Some(Err(error)) => format!("error: {}", error.message),
            None => "no answer".to_owned(),
        };
        self.log
            .record_reply("session/request_permission", &self.session_id.0, &outcome);
        self.say(&format!("permission: {outcome}"))?;
        let status = if outcome.starts_with("allow") {
            ToolCallStatus::Completed
        } else {
            ToolCallStatus::Failed
        };
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new().status(status),
        )))?;
        Ok(if self.cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        })
    }

    async fn slow(&mut self, n: u32) -> Result<StopReason, Error> {
        for i in 1..=n {
            if self.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            self.say(&format!("chunk {i}/{n}\n"))?;
            if i < n {
                tokio::select! {
                    () = tokio::time::sleep(SLOW_GAP) => {}
                    () = self.cancel.cancelled() => return Ok(StopReason::Cancelled),
                }
            }
        }
        Ok(StopReason::EndTurn)
    }

    fn plan(&mut self) -> Result<StopReason, Error> {
        self.update(SessionUpdate::Plan(Plan::new(vec![
            PlanEntry::new(
                "Read the code",
                PlanEntryPriority::High,
                PlanEntryStatus::Completed,
            ),
            PlanEntry::new(
                "Write the fix",
                PlanEntryPriority::Medium,
                PlanEntryStatus::InProgress,
            ),
        ])))?;
        let id = next_tool_call_id();
        self.update(SessionUpdate::ToolCall(
            ToolCall::new(id.clone(), "Inspect files")
                .kind(ToolKind::Read)
                .status(ToolCallStatus::InProgress),
        ))?;
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new().status(ToolCallStatus::Completed),
        )))?;
        self.update(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
            ContentBlock::Text(TextContent::new("thinking about the plan")),
        )))?;
        self.say("planned")?;
        Ok(StopReason::EndTurn)
    }

    /// Writes a chunk straight to stdout (so it is flushed), then exits 0
    /// without answering the prompt.
    async fn noreply_close(&mut self) -> Result<StopReason, Error> {
        let chunk = SessionNotification::new(
            self.session_id.clone(),
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                TextContent::new("closing without a reply"),
            ))),
        );
        let line = json!({ "jsonrpc": "2.0", "method": "session/update", "params": chunk });
        if let Err(error) = self.output.write_line(&line.to_string()).await {
            eprintln!("fake-acp-agent: noreply-close: {error}");
        }
        std::process::exit(0)
    }

    fn unknown_update(&mut self) -> Result<StopReason, Error> {
        let update = UntypedMessage::new(
            "session/update",
            json!({
                "sessionId": self.session_id,
                "update": {
                    "sessionUpdate": "fake_unknown_update",
                    "content": { "type": "text", "text": "from a future protocol" },
                },
            }),
        )?;
        self.cx.send_notification(update)?;
        self.say("after unknown update")?;
        Ok(StopReason::EndTurn)
    }
}

/// `s` cut into three non-empty parts when it has three characters or more.
fn thirds(s: &str) -> [&str; 3] {
    let starts: Vec<usize> = s.char_indices().map(|(at, _)| at).collect();
    let cut = |k: usize| starts.get(k * starts.len() / 3).copied().unwrap_or(s.len());
    let (first, second) = (cut(1), cut(2));
    [&s[..first], &s[first..second], &s[second..]]
}

fn exit_code(status: &TerminalExitStatus) -> String {
    match (status.exit_code, &status.signal) {
        (Some(code), _) => code.to_string(),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_script_words() {
        assert_eq!(
            Command::parse("  hi there "),
            Command::Echo("hi there".into())
        );
        assert_eq!(
            Command::parse("fs-read a.txt"),
            Command::FsRead("a.txt".into())
        );
        assert_eq!(
            Command::parse("fs-write out.txt hello  world"),
            Command::FsWrite {
                path: "out.txt".into(),
                text: "hello  world".into()
            }
        );
        assert_eq!(
            Command::parse("term echo hi"),
            Command::Term(vec!["echo".into(), "hi".into()])
        );
        assert_eq!(
            Command::parse("perm rm -rf"),
            Command::Perm("rm -rf".into())
        );
        assert_eq!(Command::parse("slow 5"), Command::Slow(5));
        assert_eq!(Command::parse("slow x"), Command::Echo("slow x".into()));
        assert_eq!(Command::parse("plan"), Command::Plan);
        assert_eq!(
            Command::parse("plan more"),
            Command::Echo("plan more".into())
        );
        assert_eq!(Command::parse("crash"), Command::Crash);
        assert_eq!(Command::parse("noreply-close"), Command::NoreplyClose);
        assert_eq!(Command::parse("unknown-update"), Command::UnknownUpdate);
        assert_eq!(Command::parse("fs-read"), Command::Echo("fs-read".into()));
    }

    #[test]
    fn thirds_cover_the_text() {
        let text = "echo: héllo";
        let parts = thirds(text);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|part| !part.is_empty()));
    }
}
