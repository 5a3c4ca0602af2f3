//! Who is who: `auth.test`, `users.info`, `conversations.info` and `conversations.open`.

use serde_json::json;

use super::json::{BOT_ID, BOT_USER, TEAM_ID};
use super::params::Params;
use super::state::Shared;
use super::types::ChannelSpec;
use super::web::ApiResult;

/// `auth.test`: the bot's identity.
pub(crate) fn auth_test(_shared: &Shared, _params: &Params) -> ApiResult {
    Ok(json!({
        "url": "https://fake.slack.com/",
        "team": "Fake",
        "user": "chela",
        "team_id": TEAM_ID,
        "user_id": BOT_USER,
        "bot_id": BOT_ID,
        "is_enterprise_install": false,
    }))
}

/// `users.info`: a known user (the bot included), else `user_not_found`.
pub(crate) fn users_info(shared: &Shared, params: &Params) -> ApiResult {
    let state = shared.lock();
    let user = state
        .users
        .get(&params.text("user"))
        .ok_or("user_not_found")?;
    Ok(json!({ "user": user.to_json() }))
}

/// `conversations.info`: a known conversation, else `channel_not_found`.
pub(crate) fn conversations_info(shared: &Shared, params: &Params) -> ApiResult {
    let state = shared.lock();
    let channel = state.channel(&params.text("channel"))?;
    Ok(json!({ "channel": channel.spec.to_json() }))
}

/// `conversations.open`: the direct message with one known user (`users`), or the
/// multi-person one with several (`G` + their ids), created if needed; or the known
/// conversation `channel`.
pub(crate) fn conversations_open(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    if let Some(channel) = params.nonempty("channel") {
        let channel = state.channel(&channel)?;
        return Ok(json!({ "channel": { "id": channel.spec.id }, "already_open": true }));
    }
    let users: Vec<String> = params
        .text("users")
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect();
    if users.is_empty() {
        return Err("users_list_not_supplied");
    }
    if users.iter().any(|u| u == BOT_USER) {
        return Err("cannot_dm_bot");
    }
    if users.iter().any(|u| !state.users.contains_key(u)) {
        return Err("user_not_found");
    }
    let spec = match users.as_slice() {
        [one] => ChannelSpec::im(one),
        many => ChannelSpec::mpim(&format!("G{}", many.join(""))),
    };
    let already_open = state.channels.contains_key(&spec.id);
    state.ensure_channel(&spec);
    Ok(json!({
        "channel": { "id": spec.id },
        "already_open": already_open,
        "no_op": already_open,
    }))
}
