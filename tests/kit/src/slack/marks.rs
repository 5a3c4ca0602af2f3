//! Marks the bot puts on messages: `reactions.add`/`reactions.remove` and
//! `pins.add`/`pins.remove`.

use serde_json::json;

use super::messages::Stored;
use super::params::Params;
use super::state::{Shared, State};
use super::web::ApiResult;

/// Whether `name` is a reaction name as Slack takes it: not empty, no colons, no
/// whitespace, no uppercase.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c == ':' || c.is_whitespace() || c.is_uppercase())
}

/// The live message named by `channel` and `timestamp`.
fn target<'a>(state: &'a mut State, params: &Params) -> Result<&'a mut Stored, &'static str> {
    state
        .channel_mut(&params.text("channel"))?
        .live_mut(&params.text("timestamp"))
        .ok_or("message_not_found")
}

/// `reactions.add`: the bot reacts with `name`.
pub(crate) fn reaction_add(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let message = target(&mut state, params)?;
    let name = params.text("name");
    if !valid_name(&name) {
        return Err("invalid_name");
    }
    if message.reactions.contains(&name) {
        return Err("already_reacted");
    }
    message.reactions.push(name);
    Ok(json!({}))
}

/// `reactions.remove`: the bot takes its reaction `name` back.
pub(crate) fn reaction_remove(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let message = target(&mut state, params)?;
    let name = params.text("name");
    if !valid_name(&name) {
        return Err("invalid_name");
    }
    let before = message.reactions.len();
    message.reactions.retain(|r| *r != name);
    if message.reactions.len() == before {
        return Err("no_reaction");
    }
    Ok(json!({}))
}

/// `pins.add`: pins the message.
pub(crate) fn pin_add(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let message = target(&mut state, params)?;
    if message.pinned {
        return Err("already_pinned");
    }
    message.pinned = true;
    Ok(json!({}))
}

/// `pins.remove`: unpins the message.
pub(crate) fn pin_remove(shared: &Shared, params: &Params) -> ApiResult {
    let mut state = shared.lock();
    let message = target(&mut state, params)?;
    if !message.pinned {
        return Err("no_pin");
    }
    message.pinned = false;
    Ok(json!({}))
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn reaction_names() {
        assert!(valid_name("eyes"));
        assert!(valid_name("white_check_mark"));
        assert!(valid_name("+1"));
        assert!(!valid_name(":eyes:"));
        assert!(!valid_name("Eyes"));
        assert!(!valid_name("two words"));
        assert!(!valid_name(""));
    }
}
