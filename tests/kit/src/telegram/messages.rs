//! The bot's messages: `sendMessage`, `editMessageText`, `deleteMessage`.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::body::{self, Params};
use super::markup;
use super::reply::{ApiError, ApiResult};
use super::state::{Shared, State, Stored, bot_user, unix_now};

/// The 400 for an edit that changes nothing.
const NOT_MODIFIED: &str = "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message";

/// The text-related parameters shared by sends and edits.
struct Content {
    text: String,
    parse_mode: Option<String>,
    entities: Option<Value>,
    reply_markup: Option<Value>,
}

impl Content {
    /// Reads and validates `text`, `parse_mode`, `entities`, `reply_markup`.
    fn read(params: &Params) -> Result<Content, ApiError> {
        let content = Content {
            text: body::string(params, "text").unwrap_or_default(),
            parse_mode: body::string(params, "parse_mode").filter(|m| !m.is_empty()),
            entities: body::json(params, "entities"),
            reply_markup: body::json(params, "reply_markup"),
        };
        markup::check_text(
            &content.text,
            content.parse_mode.as_deref(),
            content.entities.is_some(),
        )
        .map_err(|e| ApiError::bad_request(&e))?;
        Ok(content)
    }
}

/// Admits a send/edit to `chat_id` under the limiter, or answers 429.
fn admit(state: &mut State, chat_id: i64, group: bool) -> Result<(), ApiError> {
    state
        .limiter
        .admit(chat_id, group, Instant::now())
        .map_err(ApiError::too_many_requests)
}

/// The explicit reply target: `reply_parameters.message_id` or `reply_to_message_id`, and
/// whether a missing target is allowed.
fn reply_target(params: &Params) -> Result<Option<(i64, bool)>, ApiError> {
    if let Some(Value::Object(reply)) = body::json(params, "reply_parameters") {
        let id = body::int(&reply, "message_id")?;
        let lenient = body::boolean(&reply, "allow_sending_without_reply");
        return Ok(id.map(|id| (id, lenient)));
    }
    let lenient = body::boolean(params, "allow_sending_without_reply");
    Ok(body::int(params, "reply_to_message_id")?.map(|id| (id, lenient)))
}

/// `sendMessage`: validates chat, topic, reply, text and markup, then rate limits; returns the
/// new Message.
pub(crate) fn send_message(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let thread = body::int(params, "message_thread_id")?;
    let reply = reply_target(params)?;
    let content = Content::read(params)?;
    let mut state = shared.lock();
    let chat = state
        .chats
        .get(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let mut thread = chat.bot_thread(thread, false)?;
    let reply_to = match reply {
        Some((id, _)) if chat.reply_json(id).is_some() => Some(id),
        Some((_, true)) | None => None,
        Some((_, false)) => return Err(ApiError::bad_request("message to be replied not found")),
    };
    if let (None, Some(id)) = (thread, reply_to) {
        // A reply without a topic goes to the topic of the message it replies to.
        thread = chat.messages.get(&id).and_then(|m| m.thread_id);
    }
    let group = chat.spec.is_group_like();
    admit(&mut state, chat_id, group)?;
    let chat = state
        .chats
        .get_mut(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let id = chat.allocate_id();
    let mut json = chat.message_json(
        id,
        bot_user(),
        &content.text,
        content.entities,
        thread,
        reply_to,
    );
    if let Some(markup) = content
        .reply_markup
        .clone()
        .filter(|m| m.get("inline_keyboard").is_some())
    {
        json["reply_markup"] = markup;
    }
    chat.messages.insert(
        id,
        Stored {
            json: json.clone(),
            from_bot: true,
            text: content.text,
            thread_id: thread,
            reply_to,
            parse_mode: content.parse_mode,
            reply_markup: content.reply_markup,
            edits: 0,
            deleted: false,
        },
    );
    drop(state);
    shared.touch();
    Ok(json)
}

/// `editMessageText` (by `chat_id` + `message_id`): returns the edited Message with
/// `edit_date`.
pub(crate) fn edit_message_text(shared: &Shared, params: &Params) -> ApiResult {
    if body::string(params, "inline_message_id").is_some() {
        return Err(ApiError::bad_request(
            "inline messages are not supported by the fake",
        ));
    }
    let chat_id = body::chat_id(params)?;
    let message_id = body::message_id(params)?;
    let content = Content::read(params)?;
    let mut state = shared.lock();
    let chat = state
        .chats
        .get(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let group = chat.spec.is_group_like();
    let stored = chat
        .messages
        .get(&message_id)
        .filter(|m| !m.deleted)
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    if !stored.from_bot || stored.json.get("text").is_none() {
        return Err(ApiError::bad_request("message can't be edited"));
    }
    if stored.text == content.text && stored.reply_markup == content.reply_markup {
        return Err(ApiError::bad_request(NOT_MODIFIED));
    }
    admit(&mut state, chat_id, group)?;
    let stored = state
        .chats
        .get_mut(&chat_id)
        .and_then(|c| c.messages.get_mut(&message_id))
        .ok_or_else(|| ApiError::bad_request("message to edit not found"))?;
    stored.text.clone_from(&content.text);
    stored.parse_mode = content.parse_mode;
    stored.edits += 1;
    let json = &mut stored.json;
    json["text"] = json!(content.text);
    json["edit_date"] = json!(unix_now());
    match content.entities {
        Some(entities) => json["entities"] = entities,
        None => {
            if let Some(map) = json.as_object_mut() {
                map.remove("entities");
            }
        }
    }
    match content
        .reply_markup
        .clone()
        .filter(|m| m.get("inline_keyboard").is_some())
    {
        Some(markup) => json["reply_markup"] = markup,
        None => {
            if let Some(map) = json.as_object_mut() {
                map.remove("reply_markup");
            }
        }
    }
    stored.reply_markup = content.reply_markup;
    let json = stored.json.clone();
    drop(state);
    shared.touch();
    Ok(json)
}

/// `deleteMessage`: marks the message deleted; `true`.
pub(crate) fn delete_message(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let message_id = body::message_id(params)?;
    let mut state = shared.lock();
    let chat = state
        .chats
        .get_mut(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let stored = chat
        .messages
        .get_mut(&message_id)
        .filter(|m| !m.deleted)
        .ok_or_else(|| ApiError::bad_request("message to delete not found"))?;
    stored.deleted = true;
    drop(state);
    shared.touch();
    Ok(json!(true))
}
