//! The bot's message actions: `setMessageReaction`, `pinChatMessage`, `sendPoll`, and what
//! tests read back of them ([`FakeTelegram::reactions`], [`FakeTelegram::pinned`],
//! [`FakeTelegram::polls`]).

use serde_json::{Value, json};

use super::FakeTelegram;
use super::body::{self, Params};
use super::reply::{ApiError, ApiResult};
use super::state::{Shared, Stored, bot_user, unix_now};

/// Longest poll question, in characters.
const MAX_QUESTION: usize = 300;
/// Longest poll option, in characters.
const MAX_OPTION: usize = 100;
/// Most poll options.
const MAX_OPTIONS: usize = 12;

/// `setMessageReaction`: the bot's reaction on a live message, replaced by each call (an
/// empty list takes it away); only `{"type": "emoji"}` reactions.
pub(crate) fn set_message_reaction(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let message_id = body::message_id(params)?;
    let reaction = match body::json(params, "reaction") {
        Some(Value::Array(list)) => list,
        None => Vec::new(),
        Some(_) => return Err(ApiError::bad_request("REACTION_INVALID")),
    };
    let mut emoji = Vec::new();
    for item in reaction {
        match (item["type"].as_str(), item["emoji"].as_str()) {
            (Some("emoji"), Some(e)) if !e.is_empty() => emoji.push(e.to_owned()),
            _ => return Err(ApiError::bad_request("REACTION_INVALID")),
        }
    }
    let mut state = shared.lock();
    live(&state, chat_id, message_id)?;
    state.reactions.insert((chat_id, message_id), emoji);
    drop(state);
    shared.touch();
    Ok(json!(true))
}

/// `pinChatMessage`: pins a live message (once); `true`.
pub(crate) fn pin_chat_message(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let message_id = body::message_id(params)?;
    let mut state = shared.lock();
    live(&state, chat_id, message_id)?;
    if !state.pins.contains(&(chat_id, message_id)) {
        state.pins.push((chat_id, message_id));
    }
    drop(state);
    shared.touch();
    Ok(json!(true))
}

/// `sendPoll`: a regular poll (question 1-300 characters, 2-12 options of 1-100); the new
/// Message with its `poll`.
pub(crate) fn send_poll(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let thread = body::int(params, "message_thread_id")?;
    let question = body::string(params, "question").unwrap_or_default();
    let count = question.chars().count();
    if count == 0 || count > MAX_QUESTION {
        return Err(ApiError::bad_request(
            "poll question length must not exceed 300",
        ));
    }
    let options = poll_options(params)?;
    let anonymous = params.get("is_anonymous").is_none() || body::boolean(params, "is_anonymous");
    let poll = json!({
        "id": format!("poll-{chat_id}-{}", unix_now()),
        "question": question,
        "options": options.iter().map(|o| json!({"text": o, "voter_count": 0})).collect::<Vec<_>>(),
        "total_voter_count": 0,
        "is_closed": false,
        "is_anonymous": anonymous,
        "type": "regular",
        "allows_multiple_answers": body::boolean(params, "allows_multiple_answers"),
    });
    let mut state = shared.lock();
    let chat = state
        .chats
        .get_mut(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let thread = chat.bot_thread(thread, false)?;
    let id = chat.allocate_id();
    let mut message = chat.message_json(id, bot_user(), "", None, thread, None);
    if let Some(map) = message.as_object_mut() {
        map.remove("text");
    }
    message["poll"] = poll;
    let mut stored = Stored::from_user(message.clone(), "", thread, None);
    stored.from_bot = true;
    chat.messages.insert(id, stored);
    drop(state);
    shared.touch();
    Ok(message)
}

/// The `options` of a poll: 2-12 texts of 1-100 characters (`{"text": ...}` or plain strings).
fn poll_options(params: &Params) -> Result<Vec<String>, ApiError> {
    let Some(Value::Array(list)) = body::json(params, "options") else {
        return Err(ApiError::bad_request("poll must have at least 2 option"));
    };
    let options: Vec<String> = list
        .iter()
        .filter_map(|o| o["text"].as_str().or(o.as_str()).map(str::to_owned))
        .collect();
    if options.len() < 2 || options.len() != list.len() {
        return Err(ApiError::bad_request("poll must have at least 2 option"));
    }
    if options.len() > MAX_OPTIONS {
        return Err(ApiError::bad_request(
            "poll can't have more than 12 options",
        ));
    }
    if options
        .iter()
        .any(|o| o.is_empty() || o.chars().count() > MAX_OPTION)
    {
        return Err(ApiError::bad_request(
            "poll options length must not exceed 100",
        ));
    }
    Ok(options)
}

/// Checks that message `message_id` of `chat_id` exists and is not deleted.
fn live(state: &super::state::State, chat_id: i64, message_id: i64) -> Result<(), ApiError> {
    let chat = state
        .chats
        .get(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    match chat.messages.get(&message_id) {
        Some(m) if !m.deleted => Ok(()),
        _ => Err(ApiError::bad_request("message to react not found")),
    }
}

impl FakeTelegram {
    /// The bot's reaction on message `message_id` of `chat_id` (the emoji of its last
    /// `setMessageReaction`; empty when none).
    pub fn reactions(&self, chat_id: i64, message_id: i64) -> Vec<String> {
        let state = self.shared.lock();
        state
            .reactions
            .get(&(chat_id, message_id))
            .cloned()
            .unwrap_or_default()
    }

    /// The messages the bot pinned in `chat_id`, in the order it pinned them.
    pub fn pinned(&self, chat_id: i64) -> Vec<i64> {
        let state = self.shared.lock();
        state
            .pins
            .iter()
            .filter(|(chat, _)| *chat == chat_id)
            .map(|(_, message)| *message)
            .collect()
    }

    /// The polls the bot sent into `chat_id` and did not delete: message id and `poll` JSON.
    pub fn polls(&self, chat_id: i64) -> Vec<(i64, Value)> {
        let state = self.shared.lock();
        let Some(chat) = state.chats.get(&chat_id) else {
            return Vec::new();
        };
        chat.messages
            .iter()
            .filter(|(_, m)| m.from_bot && !m.deleted)
            .filter_map(|(id, m)| m.json.get("poll").map(|p| (*id, p.clone())))
            .collect()
    }
}
