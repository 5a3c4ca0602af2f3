//! The bot's message routes: create (nonce dedupe, 2000-character limit, replies, rate
//! limits, polls), edit, delete, get, list, reactions and pins.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::body::Body;
use super::error::{ApiError, ApiResult, Reply};
use super::json::{self, BOT_ID, iso_now, nonce_text, snowflake};
use super::message::{Draft, attachment};
use super::rest::query_param;
use super::state::{Shared, State, Stored};
use super::types::ChannelKind;

/// Discord's limit on message content, in characters (Unicode scalar values here).
pub(crate) const MAX_CONTENT: usize = 2000;

/// Checks `content` against [`MAX_CONTENT`].
fn check_length(content: &str) -> Result<(), ApiError> {
    if content.chars().count() > MAX_CONTENT {
        return Err(ApiError::content_too_long());
    }
    Ok(())
}

/// Admits one send/edit in `channel` or answers 429.
fn admit(state: &mut State, channel: u64) -> Result<(), ApiError> {
    state
        .limiter
        .admit(channel, Instant::now())
        .map_err(|retry_after| ApiError::RateLimited {
            retry_after,
            limit: state.limiter.max,
        })
}

/// Whether `allowed_mentions` (absent: everything) lets `user` be pinged.
fn may_ping_user(allowed: Option<&Value>, user: u64) -> bool {
    let Some(allowed) = allowed else {
        return true;
    };
    let parses_users = allowed["parse"]
        .as_array()
        .is_some_and(|p| p.iter().any(|v| v == "users"));
    let listed = allowed["users"]
        .as_array()
        .is_some_and(|u| u.iter().any(|v| snowflake(v) == Some(user)));
    parses_users || listed
}

/// The `mentions` of a bot message: users named in `content` that `allowed` lets through,
/// then the replied-to author (absent `allowed_mentions`, or `replied_user: true`).
fn bot_mentions(
    state: &State,
    content: &str,
    allowed: Option<&Value>,
    replied_author: Option<u64>,
) -> Vec<Value> {
    let mut ids: Vec<u64> = state
        .mentioned_in(content)
        .into_iter()
        .filter(|&id| may_ping_user(allowed, id))
        .collect();
    if let Some(author) = replied_author {
        let ping = allowed.is_none_or(|a| a["replied_user"].as_bool() == Some(true));
        if ping && !ids.contains(&author) {
            ids.push(author);
        }
    }
    ids.into_iter()
        .filter_map(|id| state.user_json(id))
        .collect()
}

/// `POST /channels/{id}/messages`.
pub(crate) fn create(shared: &Arc<Shared>, channel: u64, body: &Body) -> ApiResult {
    let mut guard = shared.lock();
    let state = &mut *guard;
    let ch = state
        .channels
        .get(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    let data = &body.json;
    let content = data.get("content").and_then(Value::as_str).unwrap_or("");
    check_length(content)?;
    let embeds = data
        .get("embeds")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if embeds.len() > 10 {
        return Err(ApiError::invalid_form(
            "embeds",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 10 or fewer in length.",
        ));
    }
    let stickers = data
        .get("sticker_ids")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty());
    let components = super::components::components_of(data)?.unwrap_or_default();
    let poll = super::poll::poll_of(data)?;
    if content.trim().is_empty()
        && embeds.is_empty()
        && body.files.is_empty()
        && !stickers
        && components.is_empty()
        && poll.is_none()
    {
        return Err(ApiError::empty_message());
    }
    let nonce = data.get("nonce").filter(|n| !n.is_null()).cloned();
    let nonce_str = nonce.as_ref().and_then(nonce_text);
    if nonce_str.as_ref().is_some_and(|n| n.chars().count() > 25) {
        return Err(ApiError::invalid_form(
            "nonce",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 25 or fewer in length.",
        ));
    }
    // A reply: the referenced message must exist unless `fail_if_not_exists` is false.
    let reference = &data["message_reference"];
    let mut reply = None;
    if let Some(target) = reference.get("message_id").and_then(snowflake) {
        match ch.live(target) {
            Some(stored) => reply = Some((target, stored.json.clone(), stored.author_id)),
            None if reference["fail_if_not_exists"].as_bool() == Some(false) => {}
            None => {
                return Err(ApiError::invalid_form(
                    "message_reference",
                    "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                    "Unknown message",
                ));
            }
        }
    }
    // enforce_nonce: a repeated nonce in this channel gets the original, creating nothing.
    if data["enforce_nonce"].as_bool() == Some(true)
        && let Some(nonce) = &nonce_str
        && let Some(original) = ch
            .messages
            .values()
            .find(|m| m.from_bot && m.nonce.as_ref() == Some(nonce))
    {
        return Ok(Reply::Json(original.json.clone()));
    }
    let guild = ch.spec.guild_id;
    admit(state, channel)?;
    let allowed = data.get("allowed_mentions").filter(|a| a.is_object());
    let mentions = bot_mentions(state, content, allowed, reply.as_ref().map(|r| r.2));
    let everyone = (content.contains("@everyone") || content.contains("@here"))
        && allowed.is_none_or(|a| {
            a["parse"]
                .as_array()
                .is_some_and(|p| p.iter().any(|v| v == "everyone"))
        });
    let id = state.next_id();
    let mut attachments = Vec::new();
    for (n, (filename, size)) in body.files.iter().enumerate() {
        let attachment_id = state.next_id();
        let uploaded = attachment(
            &shared.base_url,
            attachment_id,
            channel,
            filename,
            *size,
            None,
        );
        // The bytes are served at the attachment's URL, as Discord's CDN would.
        if let Some(bytes) = body.contents.get(n) {
            let path = format!("/attachments/{channel}/{attachment_id}/{filename}");
            state.files.insert(path, bytes.clone());
        }
        attachments.push(uploaded);
    }
    let draft = Draft {
        id,
        channel_id: channel,
        author: json::bot_user(),
        content: content.to_owned(),
        mentions,
        mention_everyone: everyone,
        mention_roles: Vec::new(),
        reply: reply
            .as_ref()
            .map(|(target, json, _)| (*target, json.clone())),
        attachments,
        embeds,
        nonce,
        tts: data["tts"].as_bool().unwrap_or(false),
        components,
    };
    let mut message = draft.to_json(guild);
    if let Some(poll) = poll {
        message["poll"] = poll;
    }
    state.store_message(
        channel,
        Stored {
            json: message.clone(),
            from_bot: true,
            author_id: BOT_ID,
            content: content.to_owned(),
            mentions_bot: false,
            edits: 0,
            deleted: false,
            nonce: nonce_str,
            reference: reply.map(|r| r.0),
            allowed_mentions: allowed.cloned(),
            attachments: body.files.iter().map(|f| f.0.clone()).collect(),
            thread: None,
            reactions: Vec::new(),
        },
    );
    state.dispatch_message("MESSAGE_CREATE", channel, id);
    Ok(with_quota(state, channel, message))
}

/// A send's or edit's answer, with the channel's rate-limit headers when limits are enforced.
fn with_quota(state: &State, channel: u64, body: Value) -> Reply {
    match state.limiter.quota(channel, Instant::now()) {
        Some(quota) => Reply::Limited(body, quota),
        None => Reply::Json(body),
    }
}

/// `PATCH /channels/{id}/messages/{id}`: content, embeds, allowed_mentions.
pub(crate) fn edit(shared: &Arc<Shared>, channel: u64, message: u64, body: &Body) -> ApiResult {
    let mut guard = shared.lock();
    let state = &mut *guard;
    let ch = state
        .channels
        .get(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    let stored = ch.live(message).ok_or_else(ApiError::unknown_message)?;
    if !stored.from_bot {
        return Err(ApiError::new(
            403,
            50005,
            "Cannot edit a message authored by another user",
        ));
    }
    let data = &body.json;
    let content = match data.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => String::new(),
        _ => stored.content.clone(),
    };
    check_length(&content)?;
    let embeds = match data.get("embeds") {
        Some(Value::Array(embeds)) => embeds.clone(),
        Some(Value::Null) => Vec::new(),
        _ => stored.json["embeds"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    let has_files = stored.json["attachments"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    // Components: an array replaces them, null clears them, and none keeps them.
    let components = match super::components::components_of(data)? {
        Some(components) => components,
        None => stored.json["components"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    if content.trim().is_empty() && embeds.is_empty() && !has_files && components.is_empty() {
        return Err(ApiError::empty_message());
    }
    let allowed = match data.get("allowed_mentions") {
        Some(a) if a.is_object() => Some(a.clone()),
        _ => stored.allowed_mentions.clone(),
    };
    admit(state, channel)?;
    let mentions = bot_mentions(state, &content, allowed.as_ref(), None);
    let Some(stored) = state
        .channels
        .get_mut(&channel)
        .and_then(|c| c.messages.get_mut(&message))
    else {
        return Err(ApiError::unknown_message());
    };
    stored.json["content"] = json!(content);
    stored.json["embeds"] = json!(embeds);
    stored.json["components"] = json!(components);
    stored.json["edited_timestamp"] = json!(iso_now());
    stored.json["mentions"] = json!(mentions);
    stored.content = content;
    stored.allowed_mentions = allowed;
    stored.edits += 1;
    let updated = stored.json.clone();
    state.dispatch_message("MESSAGE_UPDATE", channel, message);
    Ok(with_quota(state, channel, updated))
}

/// `DELETE /channels/{id}/messages/{id}`: the bot's own anywhere, others' in guilds.
pub(crate) fn delete(shared: &Arc<Shared>, channel: u64, message: u64) -> ApiResult {
    let mut state = shared.lock();
    let ch = state
        .channels
        .get_mut(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    let is_dm = ch.spec.kind == ChannelKind::Dm;
    let guild = ch.spec.guild_id;
    let stored = ch
        .messages
        .get_mut(&message)
        .filter(|m| !m.deleted)
        .ok_or_else(ApiError::unknown_message)?;
    if is_dm && !stored.from_bot {
        return Err(ApiError::new(
            403,
            50003,
            "Cannot execute action on a DM channel",
        ));
    }
    stored.deleted = true;
    let mut data = json!({ "id": message.to_string(), "channel_id": channel.to_string() });
    if let Some(guild) = guild {
        data["guild_id"] = json!(guild.to_string());
    }
    let gate = super::state::Gate::Message {
        guild: guild.is_some(),
        content_visible: true,
    };
    state.dispatch("MESSAGE_DELETE", data, gate);
    Ok(Reply::NoContent)
}

/// `GET /channels/{id}/messages/{id}`.
pub(crate) fn get(shared: &Arc<Shared>, channel: u64, message: u64) -> ApiResult {
    let state = shared.lock();
    let ch = state
        .channels
        .get(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    let stored = ch.live(message).ok_or_else(ApiError::unknown_message)?;
    Ok(Reply::Json(stored.json.clone()))
}

/// `GET /channels/{id}/messages?limit=&before=&after=`: newest first.
pub(crate) fn list(shared: &Arc<Shared>, channel: u64, query: Option<&str>) -> ApiResult {
    let state = shared.lock();
    let ch = state
        .channels
        .get(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    let limit = query_param(query, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(50)
        .clamp(1, 100);
    let before = query_param(query, "before").and_then(|b| b.parse::<u64>().ok());
    let after = query_param(query, "after").and_then(|a| a.parse::<u64>().ok());
    let live = ch
        .messages
        .iter()
        .filter(|(_, m)| !m.deleted)
        .filter(|(id, _)| before.is_none_or(|b| **id < b) && after.is_none_or(|a| **id > a));
    let mut found: Vec<Value> = match after {
        // `after` pages forward: the oldest `limit` after it, still answered newest first.
        Some(_) => live.take(limit).map(|(_, m)| m.json.clone()).collect(),
        None => live
            .rev()
            .take(limit)
            .map(|(_, m)| m.json.clone())
            .collect(),
    };
    if after.is_some() {
        found.reverse();
    }
    Ok(Reply::Json(Value::Array(found)))
}

/// Message `message` of `channel`, unless it is unknown or deleted.
fn live_message(
    state: &mut super::state::State,
    channel: u64,
    message: u64,
) -> Result<&mut super::state::Stored, ApiError> {
    let ch = state
        .channels
        .get_mut(&channel)
        .ok_or_else(ApiError::unknown_channel)?;
    ch.messages
        .get_mut(&message)
        .filter(|m| !m.deleted)
        .ok_or_else(ApiError::unknown_message)
}

/// `PUT`/`DELETE /channels/{id}/messages/{id}/reactions/{emoji}/@me`.
pub(crate) fn react(
    shared: &Arc<Shared>,
    channel: u64,
    message: u64,
    emoji: &str,
    add: bool,
) -> ApiResult {
    let mut state = shared.lock();
    let stored = live_message(&mut state, channel, message)?;
    if add {
        if !stored.reactions.iter().any(|r| r == emoji) {
            stored.reactions.push(emoji.to_owned());
        }
    } else {
        stored.reactions.retain(|r| r != emoji);
    }
    Ok(Reply::NoContent)
}

/// `PUT` (`pin`) or `DELETE` a pin of message `message` of `channel`: sets its `pinned`.
pub(crate) fn pin(shared: &Arc<Shared>, channel: u64, message: u64, pin: bool) -> ApiResult {
    let mut state = shared.lock();
    let stored = live_message(&mut state, channel, message)?;
    stored.json["pinned"] = json!(pin);
    drop(state);
    shared.touch();
    Ok(Reply::NoContent)
}
