//! The smaller methods: `getMe`, `sendChatAction`, `setMyCommands` / `getMyCommands` /
//! `deleteMyCommands`, `createForumTopic`, `getChatMember`, `setWebhook` / `deleteWebhook` /
//! `getWebhookInfo`, `answerCallbackQuery`.

use serde_json::{Value, json};

use super::body::{self, Params};
use super::reply::{ApiError, ApiResult};
use super::state::{DEFAULT_ICON_COLOR, Shared, bot_user};
use super::types::{BotCommand, ChatAction};

/// The actions `sendChatAction` accepts.
const ACTIONS: &[&str] = &[
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
];

/// `getMe`: the bot as a full `User` with the bot-only fields teloxide's `Me` requires.
pub(crate) fn get_me() -> ApiResult {
    let mut me = bot_user();
    me["can_join_groups"] = json!(true);
    me["can_read_all_group_messages"] = json!(false);
    me["supports_inline_queries"] = json!(false);
    me["can_connect_to_business"] = json!(false);
    me["has_main_web_app"] = json!(false);
    Ok(me)
}

/// `sendChatAction`: records the action (thread 1, the General topic, is allowed); `true`.
pub(crate) fn send_chat_action(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let thread = body::int(params, "message_thread_id")?;
    let action = body::string(params, "action").unwrap_or_default();
    if !ACTIONS.contains(&action.as_str()) {
        return Err(ApiError::bad_request("wrong parameter action in request"));
    }
    let mut state = shared.lock();
    let chat = state
        .chats
        .get_mut(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    chat.bot_thread(thread, true)?;
    chat.actions.push(ChatAction {
        action,
        thread_id: thread,
    });
    drop(state);
    shared.touch();
    Ok(json!(true))
}

/// The key of a command list: `scope` JSON (default `{"type":"default"}`) and language.
fn commands_key(params: &Params) -> String {
    let scope = body::json(params, "scope").unwrap_or_else(|| json!({ "type": "default" }));
    let language = body::string(params, "language_code").unwrap_or_default();
    format!("{scope}|{language}")
}

/// The key of the default scope and language, what `FakeTelegram::commands` reads.
pub(crate) fn default_commands_key() -> String {
    commands_key(&Params::new())
}

/// `setMyCommands`: 0-100 commands of 1-32 characters `[a-z0-9_]` with 1-256 character
/// descriptions; `true`.
pub(crate) fn set_my_commands(shared: &Shared, params: &Params) -> ApiResult {
    let Some(Value::Array(list)) = body::json(params, "commands") else {
        return Err(ApiError::bad_request("parameter \"commands\" is required"));
    };
    if list.len() > 100 {
        return Err(ApiError::bad_request("too many commands specified"));
    }
    let mut commands = Vec::with_capacity(list.len());
    for item in &list {
        let command = item["command"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches('/');
        let description = item["description"].as_str().unwrap_or("");
        let valid_name = (1..=32).contains(&command.len())
            && command
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_name {
            return Err(ApiError::bad_request("BOT_COMMAND_INVALID"));
        }
        if !(1..=256).contains(&description.chars().count()) {
            return Err(ApiError::bad_request("BOT_COMMAND_DESCRIPTION_INVALID"));
        }
        commands.push(BotCommand {
            command: command.to_owned(),
            description: description.to_owned(),
        });
    }
    shared
        .lock()
        .commands
        .insert(commands_key(params), commands);
    shared.touch();
    Ok(json!(true))
}

/// `getMyCommands` for the given scope and language (empty if never set).
pub(crate) fn get_my_commands(shared: &Shared, params: &Params) -> ApiResult {
    let state = shared.lock();
    let list = state
        .commands
        .get(&commands_key(params))
        .cloned()
        .unwrap_or_default();
    Ok(Value::Array(
        list.iter()
            .map(|c| json!({ "command": c.command, "description": c.description }))
            .collect(),
    ))
}

/// `deleteMyCommands` for the given scope and language; `true`.
pub(crate) fn delete_my_commands(shared: &Shared, params: &Params) -> ApiResult {
    shared.lock().commands.remove(&commands_key(params));
    shared.touch();
    Ok(json!(true))
}

/// `createForumTopic`: only in forums; name of 1-128 characters; returns the `ForumTopic`.
pub(crate) fn create_forum_topic(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let name = body::string(params, "name").unwrap_or_default();
    if !(1..=128).contains(&name.chars().count()) {
        return Err(ApiError::bad_request("TOPIC_NAME_INVALID"));
    }
    let icon_color = body::int(params, "icon_color")?.unwrap_or(DEFAULT_ICON_COLOR);
    let mut state = shared.lock();
    let chat = state
        .chats
        .get_mut(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    if !chat.spec.is_forum {
        return Err(ApiError::bad_request("the chat is not a forum"));
    }
    let topic = chat.create_topic(&name, icon_color, bot_user(), None);
    drop(state);
    shared.touch();
    Ok(json!({
        "message_thread_id": topic.message_thread_id,
        "name": topic.name,
        "icon_color": topic.icon_color,
    }))
}

/// `setWebhook`: remembers the URL (getUpdates then answers 409); `true`.
pub(crate) fn set_webhook(shared: &Shared, params: &Params) -> ApiResult {
    let url = body::string(params, "url").unwrap_or_default();
    let mut state = shared.lock();
    state.webhook = (!url.is_empty()).then_some(url);
    if body::boolean(params, "drop_pending_updates") {
        state.updates.clear();
    }
    Ok(json!(true))
}

/// `deleteWebhook`: forgets the URL (and with `drop_pending_updates` the queue); `true`.
pub(crate) fn delete_webhook(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    state.webhook = None;
    if body::boolean(params, "drop_pending_updates") {
        state.updates.clear();
    }
    Ok(json!(true))
}

/// `getWebhookInfo`: the URL (empty when polling) and the pending update count.
pub(crate) fn get_webhook_info(shared: &Shared) -> ApiResult {
    let state = shared.lock();
    Ok(json!({
        "url": state.webhook.clone().unwrap_or_default(),
        "has_custom_certificate": false,
        "pending_update_count": state.updates.len(),
    }))
}

/// `getChatMember`: `administrator` (with every privilege field teloxide requires) for users
/// made admins with [`crate::FakeTelegram::set_admin`], else `member`.
pub(crate) fn get_chat_member(shared: &Shared, params: &Params) -> ApiResult {
    let chat_id = body::chat_id(params)?;
    let user_id = body::int(params, "user_id")?
        .ok_or_else(|| ApiError::bad_request("user_id is required"))?;
    let state = shared.lock();
    if !state.chats.contains_key(&chat_id) {
        return Err(ApiError::chat_not_found());
    }
    let admin = state.admins.get(&chat_id).and_then(|a| a.get(&user_id));
    Ok(match admin {
        Some(user) => json!({
            "status": "administrator",
            "user": user.to_json(),
            "is_anonymous": false,
            "can_be_edited": false,
            "can_manage_chat": true,
            "can_change_info": true,
            "can_delete_messages": true,
            "can_manage_video_chats": true,
            "can_invite_users": true,
            "can_restrict_members": true,
            "can_pin_messages": true,
            "can_manage_topics": true,
            "can_promote_members": false,
        }),
        None => json!({
            "status": "member",
            "user": {"id": user_id, "is_bot": false, "first_name": format!("user {user_id}")},
        }),
    })
}
