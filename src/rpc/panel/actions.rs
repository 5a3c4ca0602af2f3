//! The POST actions (the login, CSRF and origin are checked before): pairing approve and
//! reject, closing an ACP binding, stopping a session's run. Each answers with a short page
//! saying what happened and a link back.

use std::collections::HashMap;

use axum::http::StatusCode;
use axum::response::Response;

use super::super::methods::Role;
use super::html::{Viewer, esc, page};
use super::{Panel, html};
use crate::domain::message::now_ms;
use crate::domain::text::quoted;

/// What an action did: the page to go back to and what to say.
struct Done {
    status: StatusCode,
    back: &'static str,
    message: String,
}

impl Done {
    fn ok(back: &'static str, message: String) -> Done {
        Done {
            status: StatusCode::OK,
            back,
            message,
        }
    }

    fn failed(status: StatusCode, back: &'static str, message: String) -> Done {
        Done {
            status,
            back,
            message,
        }
    }
}

/// `POST path` with `fields`.
pub(super) async fn post(
    panel: &Panel,
    viewer: &Viewer<'_>,
    path: &str,
    fields: &HashMap<String, String>,
) -> Response {
    let field = |name: &str| {
        fields
            .get(name)
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    let operator_only = matches!(
        path,
        "/panel/pairing/approve"
            | "/panel/pairing/reject"
            | "/panel/bindings/close"
            | "/panel/dead/retry"
            | "/panel/dead/drop"
    );
    let done = if operator_only && viewer.role == Role::Client {
        tracing::warn!(path, "panel: refused without the operator token");
        Done::failed(
            StatusCode::FORBIDDEN,
            "/panel",
            "This needs the operator token: log out and log in with the token of <store.path>.rpc."
                .to_owned(),
        )
    } else {
        match path {
            "/panel/pairing/approve" => approve(panel, &field("channel"), &field("code")).await,
            "/panel/pairing/reject" => reject(panel, &field("channel"), &field("code")).await,
            "/panel/bindings/close" => close(panel, &field("key")).await,
            "/panel/runs/abort" => abort(panel, &field("session")).await,
            "/panel/dead/retry" => retry(panel, &field("id")).await,
            "/panel/dead/drop" => drop_dead(panel, &field("id")).await,
            _ => Done::failed(
                StatusCode::NOT_FOUND,
                "/panel",
                "No such action.".to_owned(),
            ),
        }
    };
    let body = format!(
        "<p id=outcome>{}</p><p><a href=\"{}\">Back</a></p>",
        esc(&done.message),
        done.back
    );
    let title = match done.status.is_success() {
        true => "Done",
        false => "Not done",
    };
    html(done.status, page(viewer, title, &body))
}

async fn approve(panel: &Panel, channel: &str, code: &str) -> Done {
    let store = panel.api.store();
    let may_make_owner = panel.api.config().commands.pairing_makes_owners();
    match store
        .approve_pairing(channel, code, now_ms(), may_make_owner)
        .await
    {
        Ok(Some((request, owner))) => {
            tracing::info!(channel, sender = %request.sender_id, "panel: pairing approved");
            panel.api.pairing_answered(request.clone(), true).await;
            let role = if owner { ", now the owner" } else { "" };
            Done::ok(
                "/panel/pairing",
                format!(
                    "Approved {} (name unverified, id {}){role}.",
                    quoted(&request.sender_name),
                    request.sender_id
                ),
            )
        }
        Ok(None) => Done::failed(
            StatusCode::NOT_FOUND,
            "/panel/pairing",
            format!("No pending code {code} on {channel} (expired or already used)."),
        ),
        Err(e) => Done::failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            "/panel/pairing",
            e.to_string(),
        ),
    }
}

async fn reject(panel: &Panel, channel: &str, code: &str) -> Done {
    match panel
        .api
        .store()
        .reject_pairing(channel, code, now_ms())
        .await
    {
        Ok(Some(request)) => {
            panel.api.pairing_answered(request.clone(), false).await;
            Done::ok(
                "/panel/pairing",
                format!(
                    "Rejected {} (name unverified, id {}).",
                    quoted(&request.sender_name),
                    request.sender_id
                ),
            )
        }
        Ok(None) => Done::failed(
            StatusCode::NOT_FOUND,
            "/panel/pairing",
            format!("No pending code {code} on {channel}."),
        ),
        Err(e) => Done::failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            "/panel/pairing",
            e.to_string(),
        ),
    }
}

async fn close(panel: &Panel, key: &str) -> Done {
    match panel.api.close_binding(key).await {
        Ok(Some(harness)) => {
            tracing::info!(session = key, "panel: binding closed");
            Done::ok(
                "/panel/bindings",
                format!("Closed the {harness} binding of {key}."),
            )
        }
        Ok(None) => Done::failed(
            StatusCode::NOT_FOUND,
            "/panel/bindings",
            format!("{key} is not bound."),
        ),
        Err(f) => Done::failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            "/panel/bindings",
            f.message,
        ),
    }
}

async fn abort(panel: &Panel, key: &str) -> Done {
    if let Err(e) = crate::domain::session_key::SessionKey::parse(key) {
        return Done::failed(
            StatusCode::BAD_REQUEST,
            "/panel/live",
            format!("{key:?}: {e}"),
        );
    }
    match panel.api.abort(key).await {
        Ok(aborted) => Done::ok("/panel/live", aborted_text(key, &aborted)),
        Err(e) => Done::failed(
            StatusCode::SERVICE_UNAVAILABLE,
            "/panel/live",
            e.to_string(),
        ),
    }
}

/// What an abort did, for the panel.
fn aborted_text(key: &str, aborted: &crate::rpc::api::Aborted) -> String {
    let on = match &aborted.node {
        Some(node) => format!(" on node {node}"),
        None => String::new(),
    };
    match (&aborted.node, &aborted.not_handed) {
        (Some(node), Some(why)) => {
            return format!(
                "Stop of {key} not handed to node {node} ({why}): nothing was stopped."
            );
        }
        (None, Some(why)) => {
            return format!("Stop of {key} not sent ({why}): nothing was stopped.");
        }
        _ => {}
    }
    match aborted.report {
        Some(report) => format!(
            "Stopped {key}{on}: {} run stopped, {} queued turns dropped.",
            if report.stopped_run { "a" } else { "no" },
            report.cleared
        ),
        None => format!(
            "Stop of {key} handed to node {}; it did not confirm in time.",
            aborted.node.as_deref().unwrap_or("?")
        ),
    }
}

/// The dead letter id in `id`, or what to answer.
fn dead_id(id: &str) -> Result<u64, Done> {
    id.parse().map_err(|_| {
        Done::failed(
            StatusCode::BAD_REQUEST,
            "/panel/dead",
            format!("{id:?} is not a dead letter id."),
        )
    })
}

async fn retry(panel: &Panel, id: &str) -> Done {
    let id = match dead_id(id) {
        Ok(id) => id,
        Err(done) => return done,
    };
    match panel.api.retry_dead_letter(id).await {
        Ok(Some(entry)) => {
            tracing::info!(id, "panel: dead letter sent again");
            Done::ok(
                "/panel/dead",
                format!(
                    "Dead letter {id} is being sent again to {} (session {}).",
                    entry.conversation.chat_id, entry.session_key
                ),
            )
        }
        Ok(None) => Done::failed(
            StatusCode::NOT_FOUND,
            "/panel/dead",
            format!("No dead letter {id} (sent again or dropped already)."),
        ),
        Err(f) => Done::failed(StatusCode::SERVICE_UNAVAILABLE, "/panel/dead", f.message),
    }
}

async fn drop_dead(panel: &Panel, id: &str) -> Done {
    let id = match dead_id(id) {
        Ok(id) => id,
        Err(done) => return done,
    };
    match panel.api.store().drop_dead_letter(id).await {
        Ok(true) => {
            tracing::info!(id, "panel: dead letter dropped");
            Done::ok("/panel/dead", format!("Dropped dead letter {id}."))
        }
        Ok(false) => Done::failed(
            StatusCode::NOT_FOUND,
            "/panel/dead",
            format!("No dead letter {id}."),
        ),
        Err(e) => Done::failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            "/panel/dead",
            e.to_string(),
        ),
    }
}
