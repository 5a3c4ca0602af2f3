//! Interactions: a simulated user runs a slash command or presses a button
//! (`INTERACTION_CREATE`, the press in `presses.rs`), and
//! the bot answers through the interaction callback (`POST /interactions/{id}/{token}/
//! callback`) and the interaction webhook (`PATCH`/`GET /webhooks/{app}/{token}/messages/
//! @original`, follow-ups `POST /webhooks/{app}/{token}`), all recorded per interaction.
//!
//! As on Discord: a callback for a known interaction needs its token and may come once (a
//! second one is 400 40060); the original response can be edited only after a callback (404
//! 10008 before), follow-ups likewise; an unknown webhook token is 404 10015; content is at
//! most 2000 characters. Interaction responses are not channel messages: they never show in
//! [`FakeDiscord::sent`], only in [`FakeDiscord::interactions`]. Callbacks for interactions
//! the fake did not dispatch are recorded and answered 204.

use std::sync::Arc;

use serde_json::{Value, json};

use super::FakeDiscord;
use super::body::Body;
use super::error::{ApiError, ApiResult, Reply};
use super::json::{self, APPLICATION_ID, iso_now};
use super::messages::MAX_CONTENT;
use super::state::{Gate, Shared, State};
use super::types::{ChannelKind, ChannelSpec, InteractionInfo, UserSpec};

/// The callback `data.flags` bit of an ephemeral response.
const EPHEMERAL: u64 = 1 << 6;

/// One interaction the fake dispatched, and the bot's answers so far.
#[derive(Debug, Clone)]
pub(crate) struct Interaction {
    pub(crate) info: InteractionInfo,
    /// The id of the original response message, once a callback made one.
    original_id: Option<u64>,
    /// The `INTERACTION_CREATE` data, for a redelivery.
    payload: Value,
}

fn unknown_webhook() -> ApiError {
    ApiError::new(404, 10015, "Unknown Webhook")
}

/// The application in a webhook path must be the fake's.
fn check_app(app: &str) -> Result<(), ApiError> {
    if app.parse::<u64>().ok() == Some(APPLICATION_ID) {
        Ok(())
    } else {
        Err(unknown_webhook())
    }
}

/// The `content` of a body, checked against Discord's limit.
fn content_of(body: &Value) -> Result<Option<String>, ApiError> {
    let Some(content) = body.get("content").and_then(Value::as_str) else {
        return Ok(None);
    };
    if content.chars().count() > MAX_CONTENT {
        return Err(ApiError::content_too_long());
    }
    Ok(Some(content.to_owned()))
}

fn ephemeral(body: &Value) -> bool {
    body.get("flags")
        .and_then(Value::as_u64)
        .is_some_and(|f| f & EPHEMERAL != 0)
}

/// A response message as the webhook answers it (author: the bot).
fn message(id: u64, channel: u64, content: &str, ephemeral: bool, edited: bool) -> Value {
    json!({
        "id": id.to_string(),
        "channel_id": channel.to_string(),
        "author": json::bot_user(),
        "content": content,
        "timestamp": iso_now(),
        "edited_timestamp": if edited { json!(iso_now()) } else { Value::Null },
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "components": [],
        "pinned": false,
        "type": 20,
        "flags": if ephemeral { EPHEMERAL } else { 0 },
        "application_id": APPLICATION_ID.to_string(),
        "webhook_id": APPLICATION_ID.to_string(),
    })
}

/// What starts an interaction: its type (2 a command, 3 a component), its name (a command's,
/// or a button's `custom_id`), its `data`, and for a component the message it is on (id and
/// JSON).
pub(crate) struct Start {
    pub(crate) kind: u8,
    pub(crate) name: String,
    pub(crate) data: Value,
    pub(crate) message: Option<(u64, Value)>,
}

impl State {
    /// `user` starts an interaction in `channel`: dispatches `INTERACTION_CREATE` as serenity
    /// 0.12.5 reads it (`member` in guilds, `user` in DMs, the partial `channel`, `token`,
    /// `version`, `app_permissions`, `locale`, `entitlements`,
    /// `authorizing_integration_owners`, `context`, `attachment_size_limit`; `message` for a
    /// component) and returns the interaction id.
    pub(crate) fn start_interaction(
        &mut self,
        channel: &ChannelSpec,
        user: &UserSpec,
        start: Start,
    ) -> u64 {
        self.remember_user(user);
        self.ensure_channel(channel, user.id);
        if channel.kind == ChannelKind::Dm
            && let Some(ch) = self.channels.get_mut(&channel.id)
            && ch.recipient.is_none()
        {
            ch.recipient = Some(user.clone());
        }
        let id = self.next_id();
        let token = format!("fake-interaction-token-{id}");
        let mut data = json!({
            "id": id.to_string(),
            "application_id": APPLICATION_ID.to_string(),
            "type": start.kind,
            "data": start.data,
            "channel_id": channel.id.to_string(),
            "token": token,
            "version": 1,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 10_485_760,
        });
        if let Some((_, message)) = &start.message {
            data["message"] = message.clone();
        }
        self.place_interaction(&mut data, channel, user);
        self.interactions.insert(
            id,
            Interaction {
                info: InteractionInfo {
                    id,
                    token,
                    name: start.name,
                    kind: start.kind,
                    message_id: start.message.map(|m| m.0),
                    channel_id: channel.id,
                    user_id: user.id,
                    callback_type: None,
                    ephemeral: false,
                    response: None,
                    edits: 0,
                    followups: Vec::new(),
                },
                original_id: None,
                payload: data.clone(),
            },
        );
        self.dispatch("INTERACTION_CREATE", data, Gate::Always);
        id
    }

    /// Adds where interaction `data` happens: the partial `channel`, and the guild's fields
    /// with `member`, or `user` in a DM.
    fn place_interaction(&self, data: &mut Value, channel: &ChannelSpec, user: &UserSpec) {
        let mut partial = json!({
            "id": channel.id.to_string(),
            "type": channel.kind.type_id(),
            "permissions": "0",
        });
        match channel.guild_id {
            Some(guild) => {
                partial["guild_id"] = json!(guild.to_string());
                partial["name"] = json!(channel.display_name());
                if let Some(parent) = channel.parent_id {
                    partial["parent_id"] = json!(parent.to_string());
                }
                let mut member = json::member();
                member["user"] = user.to_json();
                member["permissions"] = json!("0");
                member["roles"] = json!(
                    self.member_roles
                        .get(&(guild, user.id))
                        .map(|r| r.iter().map(u64::to_string).collect::<Vec<_>>())
                        .unwrap_or_default()
                );
                data["guild_id"] = json!(guild.to_string());
                data["guild_locale"] = json!("en-US");
                data["member"] = member;
                data["authorizing_integration_owners"] = json!({ "0": guild.to_string() });
                data["context"] = json!(0);
            }
            None => {
                data["user"] = user.to_json();
                data["authorizing_integration_owners"] = json!({ "0": "0" });
                data["context"] = json!(1);
            }
        }
        data["channel"] = partial;
    }

    /// The interaction whose token is `token`.
    fn by_token(&mut self, token: &str) -> Result<&mut Interaction, ApiError> {
        self.interactions
            .values_mut()
            .find(|i| i.info.token == token)
            .ok_or_else(unknown_webhook)
    }
}

/// `POST /interactions/{id}/{token}/callback`: recorded; for a dispatched interaction the
/// first callback with the right token is its response, 204.
pub(crate) fn callback(
    shared: &Arc<Shared>,
    interaction: &str,
    token: &str,
    body: &Body,
) -> ApiResult {
    let mut state = shared.lock();
    state.interaction_callbacks.push(json!({
        "interaction_id": interaction,
        "token": token,
        "body": body.json,
    }));
    let id = interaction.parse::<u64>().unwrap_or_default();
    let next = state.next_id();
    let Some(known) = state.interactions.get_mut(&id) else {
        return Ok(Reply::NoContent);
    };
    if known.info.token != token {
        return Err(ApiError::new(404, 10062, "Unknown interaction"));
    }
    if known.info.callback_type.is_some() {
        return Err(ApiError::new(
            400,
            40060,
            "Interaction has already been acknowledged.",
        ));
    }
    let kind = body.json.get("type").and_then(Value::as_u64).unwrap_or(0);
    let data = body.json.get("data").cloned().unwrap_or(Value::Null);
    if kind == 4 || kind == 5 {
        known.info.response = content_of(&data)?;
        known.original_id = Some(next);
    }
    known.info.callback_type = Some(kind);
    known.info.ephemeral = ephemeral(&data);
    Ok(Reply::NoContent)
}

/// `PATCH`/`GET /webhooks/{app}/{token}/messages/@original`.
pub(crate) fn original(
    shared: &Arc<Shared>,
    method: &axum::http::Method,
    app: &str,
    token: &str,
    body: &Body,
) -> ApiResult {
    check_app(app)?;
    let mut state = shared.lock();
    let known = state.by_token(token)?;
    let id = known.original_id.ok_or_else(ApiError::unknown_message)?;
    let edited = match *method {
        axum::http::Method::GET => false,
        axum::http::Method::PATCH => {
            if let Some(content) = content_of(&body.json)? {
                known.info.response = Some(content);
            }
            known.info.edits += 1;
            true
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    let info = &known.info;
    let content = info.response.clone().unwrap_or_default();
    Ok(Reply::Json(message(
        id,
        info.channel_id,
        &content,
        info.ephemeral,
        edited,
    )))
}

/// `POST /webhooks/{app}/{token}`: a follow-up message (after the callback).
pub(crate) fn followup(shared: &Arc<Shared>, app: &str, token: &str, body: &Body) -> ApiResult {
    check_app(app)?;
    let mut state = shared.lock();
    let id = state.next_id();
    let known = state.by_token(token)?;
    if known.info.callback_type.is_none() {
        return Err(ApiError::unknown_message());
    }
    let content = content_of(&body.json)?.unwrap_or_default();
    if content.is_empty() {
        return Err(ApiError::empty_message());
    }
    let private = ephemeral(&body.json);
    known.info.followups.push((content.clone(), private));
    let channel = known.info.channel_id;
    Ok(Reply::Json(message(id, channel, &content, private, false)))
}

impl FakeDiscord {
    /// `user` runs the slash command `name` in `channel`, with `args` as its `args` string
    /// option: dispatches `INTERACTION_CREATE` (type 2, `data` with the registered command's
    /// id when there is one; see [`State::start_interaction`]) and returns the interaction
    /// id. Needs a live session, like [`FakeDiscord::user_sends`].
    pub fn user_runs_command(
        &self,
        channel: ChannelSpec,
        user: UserSpec,
        name: &str,
        args: Option<&str>,
    ) -> u64 {
        let mut guard = self.shared.lock();
        let state = &mut *guard;
        let command_id = state
            .commands
            .get(&None)
            .and_then(|list| list.iter().find(|c| c["name"] == name))
            .and_then(|c| json::snowflake(&c["id"]))
            .unwrap_or_else(|| state.next_id());
        let options: Vec<Value> = args
            .map(|a| json!({ "name": "args", "type": 3, "value": a }))
            .into_iter()
            .collect();
        let start = Start {
            kind: 2,
            name: name.to_owned(),
            data: json!({ "id": command_id.to_string(), "name": name, "type": 1, "options": options }),
            message: None,
        };
        let id = state.start_interaction(&channel, &user, start);
        drop(guard);
        self.shared.touch();
        id
    }

    /// Dispatches interaction `id` once more, unchanged (a delivery the bot may see twice);
    /// false if there is no such interaction.
    pub fn redeliver_interaction(&self, id: u64) -> bool {
        let mut state = self.shared.lock();
        let Some(payload) = state.interactions.get(&id).map(|i| i.payload.clone()) else {
            return false;
        };
        state.dispatch("INTERACTION_CREATE", payload, Gate::Always);
        drop(state);
        self.shared.touch();
        true
    }

    /// Every interaction the fake dispatched, with the bot's answers so far, in id order.
    pub fn interactions(&self) -> Vec<InteractionInfo> {
        let state = self.shared.lock();
        state
            .interactions
            .values()
            .map(|i| i.info.clone())
            .collect()
    }

    /// Interaction `id` with the bot's answers so far.
    pub fn interaction(&self, id: u64) -> Option<InteractionInfo> {
        let state = self.shared.lock();
        state.interactions.get(&id).map(|i| i.info.clone())
    }
}
