//! The agent's [`SessionsApi`]: what the `message`, `sessions_list` and `sessions_history`
//! tools do. Which sessions a run reaches is [`Reach`]'s rule. A session can be messaged once
//! it has replied somewhere (the store remembers where); text sent to the run's own
//! conversation is kept so the final reply does not repeat it. The ids of the messages a send
//! made come back in its result and are remembered as the agent's own (`own.rs`), for the
//! tool's other actions (`actions.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_channel::{Conversation, SentMessage};

use super::own::{self, OwnKind};
use super::rule::Reach;
use super::{Handles, ReachTools};
use crate::agent::provider::BoxFuture;
use crate::agent::tools::message_action::MessageAction;
use crate::agent::tools::refusal::ToolRefusal;
use crate::agent::tools::sessions::{Caller, FileSend, SessionsApi};
use crate::delivery::Delivery;
use crate::delivery::files;
use crate::domain::message::{Message, now_ms, text_of};
use crate::reply::{ReplyStream, SentJournal};
use crate::store::SubagentState;

/// Chars of one message `sessions_history` shows.
const HISTORY_LINE_CHARS: usize = 500;

/// How long the `message` tool waits for its files to be delivered before it answers that
/// they are queued.
const FILE_WAIT: Duration = Duration::from_secs(30);

impl SessionsApi for ReachTools {
    fn send(
        &self,
        caller: Caller,
        target: Option<String>,
        text: String,
    ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let host = self.handles();
        Box::pin(async move {
            let host = host?;
            let sender = caller.session.clone();
            let (key, to) = destination(&host, caller, target)?;
            let ids = send_text(&host, &to, &text, &sender).await?;
            let ids = match ids.as_slice() {
                [] => String::new(),
                [one] => format!("; message id {one}"),
                many => format!("; message ids {}", many.join(", ")),
            };
            Ok(format!(
                "sent to {} ({} chat {}{ids})",
                key, to.channel, to.chat_id
            ))
        })
    }

    fn act(
        &self,
        caller: Caller,
        target: Option<String>,
        action: MessageAction,
    ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let host = self.handles();
        Box::pin(async move {
            let host = host?;
            let answered = super::actions::answered_message(&host, &caller);
            let (run_id, sender) = (caller.run_id.clone(), caller.session.clone());
            let (key, to) = destination(&host, caller, target)?;
            let at = super::actions::Place {
                key: &key,
                to,
                run_id: &run_id,
                sender: &sender,
            };
            super::actions::act(&host, at, answered, action).await
        })
    }

    fn send_files(&self, request: FileSend) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let host = self.handles();
        Box::pin(async move {
            let host = host?;
            let caller = Caller {
                session: request.from.clone(),
                run_id: request.run_id.clone(),
                reply_to: request.reply_to.clone(),
            };
            let (key, to) = destination(&host, caller, request.target.clone())?;
            send_files(&host, &key, to, &request).await
        })
    }

    fn list(&self, caller: &Caller, limit: usize) -> Result<Vec<String>, ToolRefusal> {
        let host = self.handles()?;
        let reach = Reach::of_run(&host, &caller.session, &caller.run_id)?;
        let mut sessions = host.store.list_sessions()?;
        sessions.retain(|s| reach.reaches(&host, &s.key));
        sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_ms));
        let now = crate::domain::message::now_ms();
        Ok(sessions
            .into_iter()
            .take(limit)
            .map(|s| {
                let ago = now.saturating_sub(s.updated_ms) / 1000;
                let bound = host
                    .acp
                    .binding(&s.key)
                    .map(|b| format!(", bound to {}", b.harness))
                    .unwrap_or_default();
                let parent = match host.store.subagent(&s.key) {
                    Ok(Some(link)) => format!(
                        ", subagent of {} ({})",
                        link.parent,
                        match link.state {
                            SubagentState::Running => "running",
                            SubagentState::Stopped => "stopped",
                            SubagentState::Done => "done",
                        }
                    ),
                    _ => String::new(),
                };
                format!(
                    "{} — {} entries, active {ago} s ago{bound}{parent}",
                    s.key, s.entries
                )
            })
            .collect())
    }

    fn history(
        &self,
        caller: &Caller,
        key: &str,
        limit: usize,
    ) -> Result<Vec<String>, ToolRefusal> {
        let host = self.handles()?;
        Reach::of_run(&host, &caller.session, &caller.run_id)?.check(&host, key)?;
        let window = host.store.window(key)?;
        let lines: Vec<String> = window
            .iter()
            .filter_map(|message| {
                let (role, text) = match message {
                    Message::User(m) => ("user", text_of(&m.content)),
                    Message::Assistant(m) => ("assistant", text_of(&m.content)),
                    Message::ToolResult(_) => return None,
                };
                let text = text.trim();
                (!text.is_empty()).then(|| {
                    let short: String = text.chars().take(HISTORY_LINE_CHARS).collect();
                    format!("{role}: {short}")
                })
            })
            .collect();
        let skip = lines.len().saturating_sub(limit);
        Ok(lines.into_iter().skip(skip).collect())
    }
}

/// Sends `text` into `to` as one complete reply after the conversation's finals (as a
/// notice goes), and remembers the messages it made as session `sender`'s own; their ids.
async fn send_text(
    host: &Handles,
    to: &Conversation,
    text: &str,
    sender: &str,
) -> Result<Vec<String>, ToolRefusal> {
    let channel = host
        .notices
        .channel(&to.channel)
        .ok_or_else(|| ToolRefusal::Failed(format!("the {} channel is not running", to.channel)))?;
    host.notices.outbox().settled_within(to).await;
    let made = Arc::new(Made::default());
    let journal: Arc<dyn SentJournal> = made.clone();
    let mut reply = ReplyStream::new(channel, to.clone()).journaled(Some(journal));
    let sent = reply.finish(text).await;
    // What went out before a failure is the agent's too.
    let ids = made.ids();
    if let Err(e) = own::note(&host.store, to, &ids, OwnKind::Text, sender) {
        tracing::warn!(error = %e, "cannot note the messages the agent sent");
    }
    sent.map_err(|e| ToolRefusal::Failed(e.to_string()))?;
    Ok(ids)
}

/// The ids of the messages a send made, in order.
#[derive(Default)]
struct Made(Mutex<Vec<String>>);

impl Made {
    fn ids(&self) -> Vec<String> {
        self.0.lock().map(|ids| ids.clone()).unwrap_or_default()
    }
}

impl SentJournal for Made {
    fn sent<'a>(&'a self, message: &'a SentMessage, _durable: bool) -> BoxFuture<'a, ()> {
        if let Ok(mut ids) = self.0.lock() {
            ids.push(message.message_id.clone());
        }
        Box::pin(async {})
    }
}

/// The session and conversation a send goes to: another session's last conversation (when
/// the caller reaches it: [`Reach`]), or the run's own conversation when there is no target
/// or the target is the run's own session. The run's own session never resolves to where
/// that session last replied: a run in someone else's session key (an RPC client naming a
/// chat's key, DMs sharing `agent:main:main`) would post into that other person's chat.
fn destination(
    host: &Handles,
    caller: Caller,
    target: Option<String>,
) -> Result<(String, Conversation), ToolRefusal> {
    let target = target.filter(|key| *key != caller.session);
    let (key, to) = match target {
        None => {
            let to = caller
                .reply_to
                .ok_or("there is no conversation to send to outside a chat run")?;
            (caller.session, to)
        }
        Some(key) => {
            Reach::of_run(host, &caller.session, &caller.run_id)?.check(host, &key)?;
            let to = host.store.target(&key)?.ok_or_else(|| {
                format!(
                    "unknown session {key:?}: it has never replied in a chat (see sessions_list)"
                )
            })?;
            (key, to)
        }
    };
    if to.channel == crate::runner::INTERNAL_CHANNEL {
        return Err(ToolRefusal::Refused(format!(
            "session {key} has no chat to send to (a subagent's final answer goes back \
             to its parent session by itself)"
        )));
    }
    Ok((key, to))
}

/// Sends `request`'s files into `to` through the outbox (docs/media.md): each
/// path checked, the files and caption recorded durably as one outbox record, then delivered
/// by the worker (retried, sent once across a restart). The same files with the same caption
/// to the same place are sent once per run: a run repeated after a crash finds its mark.
async fn send_files(
    host: &Handles,
    key: &str,
    to: Conversation,
    request: &FileSend,
) -> Result<String, ToolRefusal> {
    let channel = host
        .notices
        .channel(&to.channel)
        .ok_or_else(|| ToolRefusal::Failed(format!("the {} channel is not running", to.channel)))?;
    let mut paths = Vec::new();
    for requested in &request.attachments {
        let (path, _) = host
            .notices
            .outbox()
            .files()
            .for_session(&request.from)
            .open_blocking(requested, channel.name(), channel.max_file_bytes())
            .await
            .map_err(|e| ToolRefusal::Refused(e.to_string()))?;
        paths.push(path);
    }
    let text = files::compose(&request.text, &paths);
    let now = now_ms();
    let count = paths.len();
    let what = format!(
        "{count} file(s) to {key} ({} chat {})",
        to.channel, to.chat_id
    );
    let mark = (!request.run_id.is_empty()).then(|| files::send_mark(&request.run_id, &to, &text));
    if let Some(mark) = &mark
        && !host.store.mark_seen(mark, now)?
    {
        return Ok(format!("already sent {what} in this run"));
    }
    // A send that fails for good leaves no mark: the run may try it again.
    let forget = |why: ToolRefusal| {
        if let Some(mark) = &mark
            && let Err(e) = host.store.forget_seen(mark)
        {
            tracing::warn!(error = %e, "could not drop the mark of a failed send");
        }
        why
    };
    let id = host
        .store
        .record_final(key, &to, &text, now)
        .await
        .map_err(|e| forget(e.into()))?;
    let outcome = host.notices.outbox().submit_watched(Delivery {
        id,
        // The files are the sending agent's: its workspace is where they are opened again.
        session_key: request.from.clone(),
        to,
        text,
        created_ms: now,
        run_id: None,
        stream: None,
        take_back: None,
    });
    match tokio::time::timeout(FILE_WAIT, outcome).await {
        Ok(Ok(Ok(()))) => Ok(format!("sent {what}")),
        Ok(Ok(Err(why))) => Err(forget(ToolRefusal::Failed(why))),
        Ok(Err(_)) => Ok(format!("{what} queued: it goes at the next start")),
        Err(_) => Ok(format!(
            "{what} queued: the platform is slow, it is being retried"
        )),
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
