//! `fake-acp-agent`: a scripted ACP agent (Agent Client Protocol v1, JSON-RPC
//! over stdio) for testing ACP clients without a model.
//!
//! Built on the `agent-client-protocol` crate's agent side. It answers
//! `initialize` (protocol version 1, `loadSession: true`, `sessionCapabilities.close`,
//! agentInfo name `fake-acp-agent`), `session/new`, `session/load`,
//! `session/prompt`, `session/close` and the `session/cancel` notification.
//!
//! # Environment
//! - `FAKE_ACP_STATE`: directory holding one JSON file per session (default
//!   `$TMPDIR/fake-acp-agent`), so a new process can `session/load` it.
//! - `FAKE_ACP_LOG`: if set, every received request or notification is appended
//!   as one JSON line `{"method": .., "sessionId": ..}` (`sessionId` null when
//!   the params have none), and each answer to a permission request as
//!   `{"reply": "session/request_permission", "sessionId": .., "outcome": ..}`
//!   (outcome: an option kind, `cancelled`, `error: ..` or `no answer`). `session/new` and
//!   `session/load` lines also carry the request's `mcpServers`.
//! - `FAKE_ACP_MCP_HTTP=1`: advertise `mcpCapabilities.http` (it takes HTTP MCP servers).
//! - `FAKE_ACP_NO_LOAD=1`: advertise `loadSession: false` and refuse
//!   `session/load` with method-not-found.
//! - `FAKE_ACP_IMAGES=1`: advertise `promptCapabilities.image`.
//!
//! With `FAKE_ACP_LOG`, each `session/prompt` also logs its content blocks as one line
//! `{"prompt": sessionId, "blocks": [..]}`: text blocks as `{"type": "text", "text": ..}`,
//! image blocks as `{"type": "image", "mimeType": .., "data": ..}`, others by type.
//!
//! # Script language
//! The prompt's text blocks, joined with newlines and trimmed, are one command;
//! its first word picks the behaviour. Anything that does not parse is plain text.
//!
//! | prompt | behaviour |
//! |---|---|
//! | plain text | `agent_message_chunk` `echo: <text>` in 3 chunks; `end_turn` |
//! | `fs-read <path>` | client `fs/read_text_file` (relative paths joined to the session cwd); reply `read: <content>` or `read error: <message>` |
//! | `fs-write <path> <text>` | client `fs/write_text_file`; reply `wrote <path>` or `write error: <message>` |
//! | `term <command> [args..]` | `terminal/create` (cwd, `outputByteLimit` 4096), `terminal/wait_for_exit`, `terminal/output`, `terminal/release`; reply `exit <code>: <output>` (trailing newlines trimmed) or `term error: <message>` |
//! | `perm <title>` | `tool_call` (pending, execute, title), then `session/request_permission` with options `opt-1` allow_once, `opt-2` allow_always, `opt-3` reject_once, `opt-4` reject_always; reply `permission: <kind>` or `permission: cancelled`; then `tool_call_update` completed (allowed) or failed |
//! | `slow <n>` | `n` chunks `chunk <i>/<n>\n`, 200 ms apart; `session/cancel` stops it at once with `cancelled` |
//! | `plan` | a `plan` (2 entries), a `tool_call` + `tool_call_update`, an `agent_thought_chunk`, then the chunk `planned`; `end_turn` |
//! | `crash` | the process exits with code 3, no answer |
//! | `noreply-close` | one chunk, then exit 0 without answering the prompt |
//! | `unknown-update` | a `session/update` whose `sessionUpdate` is `fake_unknown_update`, then the chunk `after unknown update`; `end_turn` |
//!
//! Cancel: `session/cancel` (or `$/cancel_request` for the prompt) ends the
//! running turn with stop reason `cancelled` as soon as it arrives. A pending
//! client request is dropped (the SDK then sends `$/cancel_request` for it),
//! except a permission request, whose answer (ACP requires `cancelled`) is
//! awaited for up to 2 s. The agent calls the client's `fs/*` and `terminal/*`
//! methods whatever the client advertised. A second prompt while one runs in
//! the same session is refused with invalid-request.

#[path = "fake_acp_agent/io.rs"]
mod io;
#[path = "fake_acp_agent/store.rs"]
mod store;
#[path = "fake_acp_agent/turn.rs"]
mod turn;

use std::path::PathBuf;
use std::process::ExitCode;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, ContentBlock,
    ContentChunk, Error as SchemaError, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, SessionCapabilities,
    SessionCloseCapabilities, SessionId, SessionNotification, SessionUpdate, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error};
use serde_json::json;

use io::{MethodLog, Output};
use store::{Sessions, Speaker, StoreError};
use turn::{Command, Turn};

/// Everything the handlers share; cheap to clone.
#[derive(Clone, Debug)]
struct Fake {
    sessions: Sessions,
    log: MethodLog,
    output: Output,
    load_session: bool,
    images: bool,
    /// Advertise `mcpCapabilities.http`.
    mcp_http: bool,
}

impl Fake {
    fn initialize(&self, responder: Responder<InitializeResponse>) -> Result<(), Error> {
        let capabilities = AgentCapabilities::new()
            .load_session(self.load_session)
            .mcp_capabilities(McpCapabilities::new().http(self.mcp_http))
            .prompt_capabilities(PromptCapabilities::new().image(self.images))
            .session_capabilities(
                SessionCapabilities::new().close(SessionCloseCapabilities::new()),
            );
        responder.respond(
            InitializeResponse::new(ProtocolVersion::V1)
                .agent_capabilities(capabilities)
                .agent_info(Implementation::new(
                    "fake-acp-agent",
                    env!("CARGO_PKG_VERSION"),
                )),
        )
    }

    fn new_session(
        &self,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
    ) -> Result<(), Error> {
        match self.sessions.create(request.cwd) {
            Ok(id) => responder.respond(NewSessionResponse::new(id)),
            Err(error) => responder.respond_with_error(store_error(error, &SessionId::new(""))),
        }
    }

    /// Replays the stored history as `session/update` notifications, then
    /// responds. Nothing here waits on the client, so it runs in the handler.
    fn load_session(
        &self,
        cx: &ConnectionTo<Client>,
        request: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
    ) -> Result<(), Error> {
        if !self.load_session {
            return responder.respond_with_error(Error::method_not_found());
        }
        let history = match self.sessions.load(&request.session_id.0, request.cwd) {
            Ok(history) => history,
            Err(error) => {
                return responder.respond_with_error(store_error(error, &request.session_id));
            }
        };
        for entry in history {
            let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(entry.text)));
            let update = match entry.role {
                Speaker::User => SessionUpdate::UserMessageChunk(chunk),
                Speaker::Agent => SessionUpdate::AgentMessageChunk(chunk),
            };
            cx.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
        }
        responder.respond(LoadSessionResponse::new())
    }

    /// Starts the turn and returns at once: the turn runs in a task spawned
    /// on the connection, which also sends the response.
    fn prompt(
        &self,
        cx: &ConnectionTo<Client>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
    ) -> Result<(), Error> {
        let text = request
            .prompt
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let id = request.session_id;
        self.log.record_prompt(&id.0, &blocks_json(&request.prompt));
        let (cwd, cancel) = match self.sessions.begin_turn(&id.0, &text) {
            Ok(started) => started,
            Err(error) => return responder.respond_with_error(store_error(error, &id)),
        };
        let mut turn = Turn::new(
            cx.clone(),
            id.clone(),
            cwd,
            cancel.clone(),
            self.log.clone(),
            self.output.clone(),
        );
        let sessions = self.sessions.clone();
        let command = Command::parse(&text);
        cx.spawn(async move {
            // `$/cancel_request` for the prompt counts as `session/cancel`.
            let request_cancelled = responder.cancellation();
            let watch_cancel = async {
                request_cancelled.cancelled().await;
                cancel.cancel();
                std::future::pending::<()>().await;
            };
            let result = tokio::select! {
                result = turn.run(command) => result,
                () = watch_cancel => Err(Error::internal_error()),
            };
            if let Err(error) = sessions.end_turn(&id.0, turn.reply()) {
                eprintln!("fake-acp-agent: {}", store_error(error, &id).message);
            }
            let sent = match result {
                Ok(stop_reason) => responder.respond(PromptResponse::new(stop_reason)),
                Err(error) => responder.respond_with_error(error),
            };
            // An error returned from a spawned task shuts the whole connection
            // down, so a failed send (the client is gone) is only reported.
            if let Err(error) = sent {
                eprintln!("fake-acp-agent: cannot answer session/prompt: {error:?}");
            }
            Ok(())
        })
    }

    fn cancel(&self, notification: &CancelNotification) {
        self.sessions.cancel(&notification.session_id.0);
    }

    fn close_session(
        &self,
        request: &CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) -> Result<(), Error> {
        match self.sessions.close(&request.session_id.0) {
            Ok(()) => responder.respond(CloseSessionResponse::new()),
            Err(error) => responder.respond_with_error(store_error(error, &request.session_id)),
        }
    }
}

/// The prompt's content blocks as the log shows them.
fn blocks_json(blocks: &[ContentBlock]) -> serde_json::Value {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => json!({"type": "text", "text": text.text}),
            ContentBlock::Image(image) => {
                json!({"type": "image", "mimeType": image.mime_type, "data": image.data})
            }
            _ => json!({"type": "other"}),
        })
        .collect()
}

fn store_error(error: StoreError, session_id: &SessionId) -> Error {
    match error {
        StoreError::NotFound => SchemaError::session_not_found(session_id.clone()).into(),
        StoreError::Busy => Error::invalid_request()
            .data(json!({ "reason": "a prompt is already running in this session" })),
        StoreError::Io(message) => Error::internal_error().data(json!({ "reason": message })),
    }
}

fn state_dir() -> PathBuf {
    std::env::var_os("FAKE_ACP_STATE")
        .filter(|value| !value.is_empty())
        .map_or_else(
            || std::env::temp_dir().join("fake-acp-agent"),
            PathBuf::from,
        )
}

#[tokio::main]
async fn main() -> ExitCode {
    let dir = state_dir();
    let sessions = match Sessions::new(dir.clone()) {
        Ok(sessions) => sessions,
        Err(error) => {
            eprintln!(
                "fake-acp-agent: cannot use state dir {}: {error}",
                dir.display()
            );
            return ExitCode::from(2);
        }
    };
    let fake = Fake {
        sessions,
        log: MethodLog::from_env(),
        output: Output::stdout(),
        load_session: std::env::var_os("FAKE_ACP_NO_LOAD").is_none_or(|value| value != "1"),
        images: std::env::var_os("FAKE_ACP_IMAGES").is_some_and(|value| value == "1"),
        mcp_http: std::env::var_os("FAKE_ACP_MCP_HTTP").is_some_and(|value| value == "1"),
    };
    let transport = io::stdio_transport(fake.output.clone(), fake.log.clone());
    let (f1, f2, f3, f4, f5, f6) = (
        fake.clone(),
        fake.clone(),
        fake.clone(),
        fake.clone(),
        fake.clone(),
        fake,
    );
    let served = Agent
        .v1()
        .name("fake-acp-agent")
        .on_receive_request(
            async move |_: InitializeRequest, responder, _cx| f1.initialize(responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                f2.new_session(request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                f3.load_session(&cx, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| f4.prompt(&cx, request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, _cx| {
                f5.close_session(&request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                f6.cancel(&notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fake-acp-agent: connection failed: {error:?}");
            ExitCode::FAILURE
        }
    }
}
