//! `sessions.send`: a text posted as the bot into a session's chat (the conversation the store
//! remembers for it, where it last answered: the agent's `message` tool sends to another
//! session the same way) and recorded in the session's transcript, after any run going on in
//! it, so its agent sees it at its next turn. `chela mcp serve`'s `session_send` calls it.

use std::time::Duration;

use chela_channel::Conversation;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{GatewayApi, Posted};
use super::protocol::{self, Fault, NOT_ACCEPTED, UNAVAILABLE};
use crate::delivery::Notices;
use crate::domain::message::Message;
use crate::domain::session_key::SessionKey;
use crate::lane::Lanes;
use crate::store::Store;

/// The longest text `sessions.send` posts, in chars.
pub const MAX_TEXT_CHARS: usize = 8_000;

/// How long the answer waits for the transcript to record the text (a run going on in the
/// session holds the write until it ends).
const RECORD_WAIT: Duration = Duration::from_secs(5);

/// What the transcript records before the text: the agent reads it as a note, not as words
/// of its user.
const LABEL: &str = "[Posted into this chat as the bot through chela's RPC (sessions.send), \
                     e.g. by a coding agent; not a message from the user]";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendParams {
    key: String,
    text: String,
}

/// `sessions.send {key, text}`: `{session, channel, chatId, recorded}`.
pub(super) async fn call(api: &dyn GatewayApi, params: &Value) -> Result<Value, Fault> {
    let params: SendParams = protocol::params(params)?;
    let key = SessionKey::parse(params.key.trim())
        .map_err(|e| Fault::params(e.to_string()))?
        .to_string();
    let text = params.text.trim();
    if text.is_empty() {
        return Err(Fault::params("text is empty"));
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(Fault::params(format!(
            "text is {chars} chars; at most {MAX_TEXT_CHARS} may be sent at once"
        )));
    }
    let posted = api.send_to_chat(&key, text).await?;
    Ok(json!({
        "session": key,
        "channel": posted.to.channel,
        "chatId": posted.to.chat_id,
        "recorded": posted.recorded,
    }))
}

/// What [`post`] works with: the gateway's store, channels and session lanes.
pub struct Chats<'a> {
    /// The store (where the session answers, its transcript).
    pub store: &'a Store,
    /// The running channels.
    pub notices: &'a Notices,
    /// The session lanes, which order transcript writes after a run going on.
    pub lanes: &'a Lanes,
}

/// Posts `text` into session `key`'s chat, then records it in its transcript
/// ([`GatewayApi::send_to_chat`]).
pub async fn post(chats: Chats<'_>, key: &str, text: &str) -> Result<Posted, Fault> {
    let to = destination(chats.store, key)?;
    chats.notices.send_text(&to, text).await.map_err(|e| {
        Fault::new(
            UNAVAILABLE,
            format!(
                "could not post into {} chat {}: {e}",
                to.channel, to.chat_id
            ),
        )
    })?;
    tracing::info!(session = %key, channel = %to.channel, "rpc: a text was posted into the session's chat");
    let recorded = record(chats, key, text).await?;
    Ok(Posted { to, recorded })
}

/// The chat session `key` answers in; refused when it has none.
fn destination(store: &Store, key: &str) -> Result<Conversation, Fault> {
    let to = store
        .target(key)
        .map_err(|e| Fault::internal(e.to_string()))?
        .ok_or_else(|| {
            Fault::new(
                NOT_ACCEPTED,
                format!(
                    "session {key} has no chat to post into: it has never answered in a chat (or there is no such session; see sessions.list)"
                ),
            )
        })?;
    if to.channel == crate::runner::INTERNAL_CHANNEL || to.channel == super::channel::NAME {
        return Err(Fault::new(
            NOT_ACCEPTED,
            format!(
                "session {key} has no chat to post into: it answers only {}",
                match to.channel == super::channel::NAME {
                    true => "through the RPC",
                    false => "its parent session (a subagent)",
                }
            ),
        ));
    }
    Ok(to)
}

/// Records `text` (after [`LABEL`]) in `key`'s transcript through its lane; `false` when a
/// run going on holds the write past [`RECORD_WAIT`] (it is written when the run ends).
async fn record(chats: Chats<'_>, key: &str, text: &str) -> Result<bool, Fault> {
    let not_recorded =
        |why: String| format!("posted into the chat, but not recorded in the transcript: {why}");
    let (store, owned) = (chats.store.clone(), key.to_owned());
    let message = Message::user(format!("{LABEL}\n{text}"));
    let write = move || {
        let written = store.append_message(&owned, &message).map(|_| ());
        if let Err(e) = &written {
            tracing::warn!(error = %e, session = %owned, "cannot record a posted text in the transcript");
        }
        written
    };
    let written = chats
        .lanes
        .queue_transcript_write(key, write)
        .await
        .map_err(|e| Fault::new(UNAVAILABLE, not_recorded(e.to_string())))?;
    match tokio::time::timeout(RECORD_WAIT, written).await {
        Ok(Ok(Ok(()))) => Ok(true),
        Ok(Ok(Err(e))) => Err(Fault::internal(not_recorded(e.to_string()))),
        Ok(Err(_)) => Err(Fault::new(
            UNAVAILABLE,
            not_recorded("the session's lane closed".to_owned()),
        )),
        Err(_) => Ok(false),
    }
}
