//! `/tts`, `/tts on|off|default`: whether this session's final answers come as voice notes
//! too (docs/voice.md). Kept in the store, so it survives restarts; refused while `[tts]` has
//! no URL.

use super::CommandContext;
use crate::config::{TtsConfig, TtsDefault, TtsMode};
use crate::delivery::tts_choice::{choose, chosen, is_on};

/// `/tts ARGS`' answer.
pub(super) fn tts(ctx: &dyn CommandContext, key: &str, args: &str) -> String {
    let config = ctx.tts();
    if !config.enabled() {
        return "Voice replies are not set up here: the gateway's config has no [tts] url."
            .to_owned();
    }
    let arg = args.trim().to_ascii_lowercase();
    let choice = match arg.as_str() {
        "" => None,
        "on" => Some(Some(true)),
        "off" => Some(Some(false)),
        "default" | "reset" => Some(None),
        _ => return "Usage: /tts on|off (or /tts default)".to_owned(),
    };
    if let Some(on) = choice
        && let Err(e) = choose(ctx.store(), key, on)
    {
        return format!("Cannot change it: {e}");
    }
    let on = is_on(ctx.store(), key, config.default);
    let whose = match chosen(ctx.store(), key) {
        Some(_) => format!(" (this conversation's; default {})", default_name(config)),
        None => String::new(),
    };
    match on {
        true => format!("Voice replies: on{whose}. {}", how(config)),
        false => format!("Voice replies: off{whose} (/tts on turns them on)."),
    }
}

/// Where the voice note goes.
fn how(config: &TtsConfig) -> &'static str {
    match config.mode {
        TtsMode::Beside => "Answers come as text and a voice note.",
        TtsMode::Instead => "Answers come as a voice note instead of text.",
    }
}

fn default_name(config: &TtsConfig) -> &'static str {
    match config.default {
        TtsDefault::Off => "off",
        TtsDefault::On => "on",
    }
}
