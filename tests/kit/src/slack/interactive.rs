//! Interactivity over Socket Mode: a user pressing a button (`interactive` envelope with a
//! `block_actions` payload), a user running a slash command (`slash_commands` envelope), and
//! the `response_url`s (`POST /respond/{n}`) the bot may answer them at.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::FakeSlack;
use super::json::{APP_ID, TEAM_ID};
use super::params;
use super::state::{Shared, State as FakeState};
use super::types::{ChannelKind, ChannelSpec, UserSpec};

/// Makes `channel` and `user` known and hands out a new `response_url`.
fn prepare(
    state: &mut FakeState,
    base_url: &str,
    channel: &ChannelSpec,
    user: &UserSpec,
) -> String {
    state.remember_user(user);
    state.ensure_channel(channel);
    state.next_response += 1;
    format!("{base_url}/respond/{}", state.next_response)
}

/// The `channel_name` Slack gives a conversation in slash command payloads.
fn channel_name(channel: &ChannelSpec) -> String {
    match (channel.kind, &channel.name) {
        (ChannelKind::Im, _) | (_, None) => "directmessage".to_owned(),
        (_, Some(name)) => name.clone(),
    }
}

/// An envelope of `kind` around `payload`.
fn envelope(kind: &str, accepts_response_payload: bool, payload: Value) -> Value {
    json!({
        "envelope_id": uuid::Uuid::new_v4().to_string(),
        "type": kind,
        "accepts_response_payload": accepts_response_payload,
        "retry_attempt": 0,
        "retry_reason": "",
        "payload": payload,
    })
}

impl FakeSlack {
    /// `user` presses the button `action_id` (with `value`) on message `message_ts` of
    /// `channel`: sends an `interactive` envelope with a `block_actions` payload whose
    /// `response_url` is `http://127.0.0.1:PORT/respond/<n>`. Returns the envelope (as first
    /// sent: `envelope_id`, `payload.response_url`, ...).
    pub fn user_presses(
        &self,
        channel: &ChannelSpec,
        user: &UserSpec,
        message_ts: &str,
        action_id: &str,
        value: &str,
    ) -> Value {
        let mut state = self.shared.lock();
        let response_url = prepare(&mut state, &self.shared.base_url, channel, user);
        let message = state
            .message_json(&channel.id, message_ts)
            .unwrap_or_else(|| json!({ "type": "message", "ts": message_ts }));
        let payload = json!({
            "type": "block_actions",
            "token": "tok",
            "api_app_id": APP_ID,
            "team": { "id": TEAM_ID, "domain": "fake" },
            "user": { "id": user.id, "name": user.name, "username": user.name, "team_id": TEAM_ID },
            "channel": { "id": channel.id, "name": channel_name(channel) },
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel.id,
                "is_ephemeral": false,
            },
            "message": message,
            "actions": [{
                "action_id": action_id,
                "block_id": "b",
                "value": value,
                "type": "button",
                "action_ts": super::json::format_ts(super::json::now_micros()),
            }],
            "response_url": response_url,
            "trigger_id": "t",
        });
        let envelope = envelope("interactive", false, payload);
        state.deliver(envelope.clone());
        drop(state);
        self.shared.touch();
        envelope
    }

    /// `user` runs `/command text` in `channel`: sends a `slash_commands` envelope (which
    /// accepts a response payload in the ack) whose `response_url` is
    /// `http://127.0.0.1:PORT/respond/<n>`. Returns `n`, for [`FakeSlack::responses`] (the
    /// envelope is the last of [`FakeSlack::envelopes_sent`] once sent).
    pub fn user_runs_command(
        &self,
        channel: &ChannelSpec,
        user: &UserSpec,
        command: &str,
        text: &str,
    ) -> u64 {
        let mut state = self.shared.lock();
        let response_url = prepare(&mut state, &self.shared.base_url, channel, user);
        let payload = json!({
            "token": "tok",
            "team_id": TEAM_ID,
            "team_domain": "fake",
            "channel_id": channel.id,
            "channel_name": channel_name(channel),
            "user_id": user.id,
            "user_name": user.name,
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": "t",
        });
        state.deliver(envelope("slash_commands", true, payload));
        let n = state.next_response;
        drop(state);
        self.shared.touch();
        n
    }

    /// What the bot posted to `response_url` number `n`, in order.
    pub fn responses(&self, n: u64) -> Vec<Value> {
        let state = self.shared.lock();
        state
            .responses
            .iter()
            .filter(|(m, _)| *m == n)
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// Everything posted to any `response_url`: its number and the body, in order.
    pub fn all_responses(&self) -> Vec<(u64, Value)> {
        self.shared.lock().responses.clone()
    }
}

/// `POST /respond/{n}`: records the body (JSON, or a form's fields) and answers `ok`.
pub(crate) async fn respond(
    State(shared): State<Arc<Shared>>,
    Path(n): Path<u64>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| params::collect(None, &headers, &body).to_value());
    shared.lock().responses.push((n, parsed));
    shared.touch();
    "ok".into_response()
}
