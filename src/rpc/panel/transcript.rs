//! One session's transcript (messages, tool calls and results), the live runs page and its
//! Server-Sent Events stream of the run events the RPC's feed carries.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use super::super::feed::agent_event;
use super::super::runs::run_result;
use super::html::{Viewer, esc, query_value};
use super::page::{Page, PageError};
use super::{Panel, secure};
use crate::domain::events::RunEvent;
use crate::domain::message::{ContentBlock, Message, text_of};
use crate::store::{Entry, EntryKind};

/// Most transcript entries shown (the last ones).
const ENTRIES_SHOWN: usize = 300;
/// Most chars of one tool result or tool-call arguments shown.
const TOOL_CHARS: usize = 2000;

/// The first `n` chars of `text`, with `…` when cut.
fn cut(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `GET /panel/session?key=K`: the transcript of session K.
pub(super) fn session(panel: &Panel, viewer: &Viewer<'_>, query: &HashMap<String, String>) -> Page {
    let key = query.get("key").map(String::as_str).unwrap_or("");
    let store = panel.api.store();
    if store.get_session(key)?.is_none() {
        return Err(PageError::NotFound(format!("No session {key:?}.")));
    }
    let entries = store.entries(key)?;
    let items: Vec<&Entry> = entries
        .iter()
        .filter(|e| matches!(e, Entry::Item(_)))
        .collect();
    let skipped = items.len().saturating_sub(ENTRIES_SHOWN);
    let mut body = format!(
        "<p class=hint><a href=\"/panel/live?session={q}\">Watch its runs live</a> · {n} entries{more}</p>",
        q = query_value(key),
        n = items.len(),
        more = match skipped {
            0 => String::new(),
            n => format!(", the first {n} not shown"),
        }
    );
    body.push_str(&viewer.button(
        "/panel/runs/abort",
        &[("session", key)],
        "Stop its run",
        false,
    ));
    body.push_str(&usage(panel, &entries));
    body.push_str("<div class=transcript>");
    for entry in items.into_iter().skip(skipped) {
        if let Entry::Item(item) = entry {
            render(&mut body, &item.kind);
        }
    }
    body.push_str("</div>");
    Ok((key.to_owned(), body))
}

/// What the session's model calls used and cost (as `/usage` says it), before its first
/// call nothing.
fn usage(panel: &Panel, entries: &[Entry]) -> String {
    let config = panel.api.config();
    let pricing = crate::agent::pricing::Pricing::new(config.pricing.clone());
    match crate::agent::usage::summary(entries, &pricing, config.model.context_window) {
        Some(summary) => format!("<pre class=usage>{}</pre>", esc(&summary)),
        None => String::new(),
    }
}

/// Appends the HTML of one transcript entry.
fn render(out: &mut String, kind: &EntryKind) {
    match kind {
        EntryKind::Message(Message::User(u)) => {
            let _ = write!(
                out,
                "<div class=\"msg user\"><b>user</b><p>{}</p></div>",
                esc(&text_of(&u.content))
            );
        }
        EntryKind::Message(Message::Assistant(a)) => {
            let _ = write!(out, "<div class=\"msg assistant\"><b>assistant</b>");
            for block in &a.content {
                match block {
                    ContentBlock::Text { text } => {
                        let _ = write!(out, "<p>{}</p>", esc(text));
                    }
                    ContentBlock::Thinking { thinking, .. } => {
                        let _ = write!(
                            out,
                            "<details><summary>thinking</summary><p>{}</p></details>",
                            esc(thinking)
                        );
                    }
                    ContentBlock::ToolCall(call) => {
                        let args = cut(&call.arguments.to_string(), TOOL_CHARS);
                        let _ = write!(
                            out,
                            "<div class=call>→ {} <code>{}</code></div>",
                            esc(&call.name),
                            esc(&args)
                        );
                    }
                    ContentBlock::Image(_) => out.push_str("<p class=hint>[image]</p>"),
                }
            }
            if let Some(error) = &a.error_message {
                let _ = write!(out, "<p class=problem>{}</p>", esc(error));
            }
            out.push_str("</div>");
        }
        EntryKind::Message(Message::ToolResult(r)) => {
            let class = if r.is_error {
                "msg result error"
            } else {
                "msg result"
            };
            let text = cut(&text_of(&r.content), TOOL_CHARS);
            let _ = write!(
                out,
                "<div class=\"{class}\"><b>← {}</b><pre>{}</pre></div>",
                esc(&r.tool_name),
                esc(&text)
            );
        }
        EntryKind::ModelChange { provider, model_id } => {
            let _ = write!(
                out,
                "<div class=rule>model {}/{}</div>",
                esc(provider),
                esc(model_id)
            );
        }
        EntryKind::Compaction {
            summary,
            tokens_before,
            ..
        } => {
            let _ = write!(
                out,
                "<div class=rule>compaction ({tokens_before} tokens before): {}</div>",
                esc(&cut(summary, 300))
            );
        }
        EntryKind::Reset { reason } => {
            let _ = write!(out, "<div class=rule>reset ({})</div>", esc(reason));
        }
    }
}

/// `GET /panel/live[?session=K]`: runs streaming as they happen (the script fills `#runs`).
pub(super) async fn live(
    panel: &Panel,
    viewer: &Viewer<'_>,
    query: &HashMap<String, String>,
) -> Page {
    let session = query.get("session").map(String::as_str).unwrap_or("");
    let status = panel
        .api
        .status()
        .await
        .map_err(|f| PageError::Gateway(f.message))?;
    let running: Vec<&str> = status["liveRuns"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut body = String::new();
    if !session.is_empty() {
        let _ = write!(
            body,
            "<p class=hint>Only session <a href=\"/panel/session?key={q}\">{k}</a>. <a href=\"/panel/live\">All sessions</a></p>",
            q = query_value(session),
            k = esc(session)
        );
    }
    let _ = write!(
        body,
        "<p class=hint>Running when the page was made: {}</p>",
        running.len()
    );
    for key in running
        .iter()
        .filter(|k| session.is_empty() || **k == session)
    {
        let _ = write!(
            body,
            "<div class=running><a href=\"/panel/session?key={q}\">{k}</a> {stop}</div>",
            q = query_value(key),
            k = esc(key),
            stop = viewer.button("/panel/runs/abort", &[("session", key)], "Stop", false)
        );
    }
    let _ = write!(
        body,
        "<p id=feed-state class=hint>Connecting…</p><div id=runs data-session=\"{}\"></div>",
        esc(session)
    );
    Ok(("Live runs".to_owned(), body))
}

/// What ends an event stream.
struct Ends {
    server: tokio_util::sync::CancellationToken,
    login: tokio_util::sync::CancellationToken,
    expires: tokio::time::Instant,
}

impl Ends {
    /// Returns once the server stops or the login ends.
    async fn reached(&self) {
        tokio::select! {
            () = self.server.cancelled() => {}
            () = self.login.cancelled() => {}
            () = tokio::time::sleep_until(self.expires) => {}
        }
    }
}

/// `GET /panel/events[?session=K]`: the run events as Server-Sent Events, `agent` for each
/// event of a run and `run` when it finished (the RPC's `events.subscribe` frames).
pub(super) fn events(
    panel: &Panel,
    query: &HashMap<String, String>,
    login: &super::auth::Login,
) -> Response {
    let session = query.get("session").cloned().filter(|s| !s.is_empty());
    let live = panel.api.live_events();
    // The stream ends with the server, and with the login (logged out, pushed out, expired).
    let ends = Ends {
        server: panel.stop.clone(),
        login: login.ended.clone(),
        expires: login.expires,
    };
    let stream = futures_util::stream::unfold(
        (live, ends, session),
        |(mut live, ends, session)| async move {
            loop {
                let event = tokio::select! {
                    () = ends.reached() => return None,
                    event = live.recv() => event,
                };
                match event {
                    Ok(e) if session.as_deref().is_some_and(|s| s != e.session_key) => continue,
                    Ok(e) => {
                        let (name, data) = match &e.event {
                            RunEvent::Finished(record) => {
                                ("run", run_result(&record.run_id, record))
                            }
                            _ => ("agent", agent_event(&e)),
                        };
                        let sse = Event::default().event(name).data(data.to_string());
                        return Some((Ok::<_, Infallible>(sse), (live, ends, session)));
                    }
                    Err(RecvError::Lagged(n)) => {
                        let sse = Event::default().event("lagged").data(n.to_string());
                        return Some((Ok(sse), (live, ends, session)));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    let sse = Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)));
    secure(sse.into_response())
}
