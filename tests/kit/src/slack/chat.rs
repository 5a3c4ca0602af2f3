//! `chat.postMessage`, `chat.update`, `chat.delete` and `chat.postEphemeral`.

use serde_json::{Value, json};

use super::json::BOT_USER;
use super::messages::Stored;
use super::params::Params;
use super::state::Shared;
use super::types::Ephemeral;
use super::web::ApiResult;

/// The longest `text` Slack takes, in characters.
pub(crate) const MAX_TEXT: usize = 40_000;

/// The `blocks` argument: `None` when absent or an empty list, `invalid_blocks` when it is
/// not a JSON list.
fn blocks(params: &Params) -> Result<Option<Value>, &'static str> {
    let given = params
        .0
        .get("blocks")
        .is_some_and(|b| !b.is_null() && b.as_str().is_none_or(|s| !s.trim().is_empty()));
    if !given {
        return Ok(None);
    }
    match params.json("blocks") {
        Some(Value::Array(list)) if list.is_empty() => Ok(None),
        Some(list @ Value::Array(_)) => Ok(Some(list)),
        _ => Err("invalid_blocks"),
    }
}

/// Checks `text` against `no_text` (nothing to show) and `msg_too_long`.
fn check_text(text: &str, has_blocks: bool) -> Result<(), &'static str> {
    if text.trim().is_empty() && !has_blocks {
        return Err("no_text");
    }
    if text.chars().count() > MAX_TEXT {
        return Err("msg_too_long");
    }
    Ok(())
}

/// `chat.postMessage`: stores the bot's message (dispatching its `message` event, as Slack
/// does) and answers it.
pub(crate) fn post_message(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let channel = state.resolve_channel(&params.text("channel"))?;
    let blocks = blocks(params)?;
    let attachments = params.json("attachments").is_some();
    let text = params.text("text");
    check_text(&text, blocks.is_some() || attachments)?;
    let thread_ts = match params.nonempty("thread_ts") {
        Some(ts) => Some(state.thread_root(&channel, &ts)?),
        None => None,
    };
    let message = Stored {
        user: BOT_USER.to_owned(),
        text,
        broadcast: thread_ts.is_some() && params.bool("reply_broadcast"),
        thread_ts,
        blocks,
        from_bot: true,
        ..Stored::default()
    };
    let ts = state.store_and_dispatch(&channel, message);
    let message = state.message_json(&channel, &ts);
    Ok(json!({ "channel": channel, "ts": ts, "message": message }))
}

/// `chat.update`: changes the text (and blocks, if given) of one of the bot's messages.
pub(crate) fn update(shared: &Shared, params: &Params) -> ApiResult {
    let mut guard = shared.lock();
    let state = &mut *guard;
    let channel = params.text("channel");
    let ts = params.text("ts");
    let blocks = blocks(params)?;
    let text = params.text("text");
    let edit_ts = state.next_ts();
    let message = state
        .channel_mut(&channel)?
        .live_mut(&ts)
        .ok_or("message_not_found")?;
    if !message.from_bot {
        return Err("cant_update_message");
    }
    let keeps_content = blocks.is_some() || message.blocks.is_some() || !message.files.is_empty();
    check_text(&text, keeps_content)?;
    message.text.clone_from(&text);
    if blocks.is_some() {
        message.blocks = blocks;
    }
    message.edits += 1;
    message.edit_history.push(text.clone());
    message.edited = Some(edit_ts);
    let rendered = state.message_json(&channel, &ts);
    Ok(json!({ "channel": channel, "ts": ts, "text": text, "message": rendered }))
}

/// `chat.delete`: deletes one of the bot's messages.
pub(crate) fn delete(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let channel = params.text("channel");
    let ts = params.text("ts");
    let message = state
        .channel_mut(&channel)?
        .live_mut(&ts)
        .ok_or("message_not_found")?;
    if !message.from_bot {
        return Err("cant_delete_message");
    }
    message.deleted = true;
    Ok(json!({ "channel": channel, "ts": ts }))
}

/// `chat.postEphemeral`: records a message only `user` would see.
pub(crate) fn post_ephemeral(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let channel = params.text("channel");
    state.channel(&channel)?;
    let user = params.text("user");
    if !state.users.contains_key(&user) {
        return Err("user_not_in_channel");
    }
    let blocks = blocks(params)?;
    let text = params.text("text");
    check_text(&text, blocks.is_some())?;
    let message_ts = state.next_ts();
    state.ephemerals.push(Ephemeral {
        channel,
        user,
        text,
        thread_ts: params.nonempty("thread_ts"),
        blocks,
        message_ts: message_ts.clone(),
    });
    Ok(json!({ "message_ts": message_ts }))
}
