//! Channel routes: get and patch (thread archive/lock/rename), typing, threads from a message
//! or standalone, and DM channels.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::body::Body;
use super::error::{ApiError, ApiResult, Reply};
use super::json::{BOT_ID, ThreadMeta, iso_now, snowflake};
use super::rest::str_field;
use super::state::{Channel, Gate, INTENT_GUILDS, Shared, State};
use super::types::{ChannelKind, ChannelSpec};

/// `GET /channels/{id}`.
pub(crate) fn get(shared: &Arc<Shared>, channel: u64) -> ApiResult {
    let state = shared.lock();
    let ch = state
        .channels
        .get(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    Ok(Reply::Json(ch.json()))
}

/// `PATCH /channels/{id}`: `name`; for threads also `archived`, `locked`,
/// `auto_archive_duration`. Dispatches `THREAD_UPDATE` or `CHANNEL_UPDATE` (with `GUILDS`).
pub(crate) fn patch(shared: &Arc<Shared>, channel: u64, body: &Body) -> ApiResult {
    let mut state = shared.lock();
    let ch = state
        .channels
        .get_mut(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    if ch.spec.kind == ChannelKind::Dm {
        return Err(ApiError::wrong_channel_type());
    }
    let data = &body.json;
    if let Some(name) = data.get("name").and_then(Value::as_str) {
        check_name(name)?;
        ch.spec.name = Some(name.to_owned());
    }
    if let Some(meta) = &mut ch.thread {
        if let Some(archived) = data.get("archived").and_then(Value::as_bool) {
            meta.archived = archived;
        }
        if let Some(locked) = data.get("locked").and_then(Value::as_bool) {
            meta.locked = locked;
        }
        if let Some(minutes) = data.get("auto_archive_duration").and_then(Value::as_u64) {
            meta.auto_archive_duration = minutes;
        }
    }
    let updated = ch.json();
    let kind = if ch.spec.kind.is_thread() {
        "THREAD_UPDATE"
    } else {
        "CHANNEL_UPDATE"
    };
    state.dispatch(kind, updated.clone(), Gate::Intent(INTENT_GUILDS));
    Ok(Reply::Json(updated))
}

/// `POST /channels/{id}/typing`: counted, 204.
pub(crate) fn typing(shared: &Arc<Shared>, channel: u64) -> ApiResult {
    let mut state = shared.lock();
    let ch = state
        .channels
        .get_mut(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    ch.typing += 1;
    Ok(Reply::NoContent)
}

/// A channel or thread name: 1 to 100 characters.
fn check_name(name: &str) -> Result<(), ApiError> {
    match name.chars().count() {
        0 => Err(ApiError::invalid_form(
            "name",
            "BASE_TYPE_REQUIRED",
            "This field is required",
        )),
        1..=100 => Ok(()),
        _ => Err(ApiError::invalid_form(
            "name",
            "BASE_TYPE_BAD_LENGTH",
            "Must be between 1 and 100 in length.",
        )),
    }
}

/// The parent of a new thread: a known guild text channel.
fn thread_parent(state: &State, channel: u64) -> Result<(u64, &Channel), ApiError> {
    let ch = state
        .channels
        .get(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    match (ch.spec.kind, ch.spec.guild_id) {
        (ChannelKind::GuildText, Some(guild)) => Ok((guild, ch)),
        _ => Err(ApiError::wrong_channel_type()),
    }
}

impl State {
    /// Creates a thread owned by the bot and dispatches `THREAD_CREATE`; returns its JSON.
    pub(crate) fn create_thread(
        &mut self,
        spec: ChannelSpec,
        starter: Option<u64>,
        auto_archive_duration: u64,
    ) -> Value {
        let id = spec.id;
        let created = iso_now();
        self.channels.insert(
            id,
            Channel {
                spec,
                recipient: None,
                thread: Some(ThreadMeta {
                    owner_id: BOT_ID,
                    starter_message_id: starter,
                    archived: false,
                    locked: false,
                    auto_archive_duration,
                    created,
                    message_count: 0,
                }),
                messages: BTreeMap::new(),
                typing: 0,
            },
        );
        self.dispatch_thread_create(id);
        self.channels
            .get(&id)
            .map(Channel::json)
            .unwrap_or_default()
    }
}

/// `auto_archive_duration` of a thread request: 60, 1440, 4320 or 10080 minutes.
fn archive_minutes(data: &Value) -> Result<u64, ApiError> {
    match data.get("auto_archive_duration").and_then(Value::as_u64) {
        None => Ok(1440),
        Some(m @ (60 | 1440 | 4320 | 10080)) => Ok(m),
        Some(_) => Err(ApiError::invalid_form(
            "auto_archive_duration",
            "BASE_TYPE_CHOICES",
            "Value must be one of {60, 1440, 4320, 10080}.",
        )),
    }
}

/// `POST /channels/{id}/messages/{id}/threads`: a public thread whose id is the message id.
pub(crate) fn thread_from_message(
    shared: &Arc<Shared>,
    channel: u64,
    message: u64,
    body: &Body,
) -> ApiResult {
    let mut state = shared.lock();
    let (guild, ch) = thread_parent(&state, channel)?;
    let stored = ch.live(message).ok_or_else(ApiError::unknown_message)?;
    if stored.thread.is_some() || state.channels.contains_key(&message) {
        return Err(ApiError::new(
            400,
            160_004,
            "A thread has already been created for this message",
        ));
    }
    let name = str_field(&body.json, "name");
    check_name(name)?;
    let minutes = archive_minutes(&body.json)?;
    let spec = ChannelSpec::thread(guild, message, channel).named(name);
    let thread = state.create_thread(spec, Some(message), minutes);
    if let Some(stored) = state
        .channels
        .get_mut(&channel)
        .and_then(|c| c.messages.get_mut(&message))
    {
        stored.thread = Some(message);
        stored.json["thread"] = thread.clone();
    }
    Ok(Reply::Json(thread))
}

/// `POST /channels/{id}/threads`: a thread without a starter message; `type` 11 or 12
/// (Discord's default for this route is 12, private).
pub(crate) fn thread(shared: &Arc<Shared>, channel: u64, body: &Body) -> ApiResult {
    let mut state = shared.lock();
    let (guild, _) = thread_parent(&state, channel)?;
    let data = &body.json;
    let name = str_field(data, "name");
    check_name(name)?;
    let minutes = archive_minutes(data)?;
    let kind = match data.get("type").and_then(Value::as_u64) {
        None | Some(12) => ChannelKind::PrivateThread,
        Some(11) => ChannelKind::PublicThread,
        Some(_) => {
            return Err(ApiError::invalid_form(
                "type",
                "BASE_TYPE_CHOICES",
                "Value must be one of {11, 12}.",
            ));
        }
    };
    let id = state.next_id();
    let spec = ChannelSpec {
        kind,
        ..ChannelSpec::thread(guild, id, channel).named(name)
    };
    Ok(Reply::Json(state.create_thread(spec, None, minutes)))
}

/// `POST /users/@me/channels` `{recipient_id}`: the DM channel with a known user.
pub(crate) fn create_dm(shared: &Arc<Shared>, body: &Body) -> ApiResult {
    let mut state = shared.lock();
    let user = body
        .json
        .get("recipient_id")
        .and_then(snowflake)
        .and_then(|id| state.users.get(&id).cloned())
        .ok_or_else(|| ApiError::new(400, 50033, "Invalid Recipient(s)"))?;
    let id = state.dm_with(&user);
    let channel = state
        .channels
        .get(&id)
        .map(Channel::json)
        .unwrap_or_else(|| json!({}));
    Ok(Reply::Json(channel))
}
