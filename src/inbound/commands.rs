//! Parsing of chat commands (SPEC 2): `/name args`, an optional `@botname` suffix, and the
//! plain-text stop triggers.

/// A recognised command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/new [text]`: start a fresh conversation window, then run `text` if given.
    New(Option<String>),
    /// `/reset [soft]`.
    Reset {
        /// Soft keeps the transcript window and drops runtime state only.
        soft: bool,
    },
    /// `/stop` or a plain-text trigger.
    Stop,
    /// `/status`.
    Status,
    /// `/queue [args]`: no args shows the settings.
    Queue(String),
    /// `/help`.
    Help,
    /// `/whoami`.
    Whoami,
    /// `/acp [args]`: coding-agent sessions (owner only).
    Acp(String),
    /// `/session [args]`: the binding of this conversation (owner only).
    Session(String),
    /// `/compact`: summarize the older part of the conversation now.
    Compact,
    /// `/approve [id decision]`: answer an exec approval, or list the waiting ones (owner only).
    Approve(String),
    /// `/model [name|default]`: show or set this session's model.
    Model(String),
    /// `/usage`: tokens and cost of the session and its last turn.
    Usage,
    /// `/think [off|minimal|low|medium|high|default]`: show or set how much this session's
    /// model reasons.
    Think(String),
    /// `/reasoning [on|off]`: show or set whether this session's chat shows the model's
    /// reasoning.
    Reasoning(String),
    /// `/tts [on|off|default]`: show or set whether this session's finals come as voice
    /// notes.
    Tts(String),
}

/// Plain-text messages that act as `/stop` (exact, after lowercasing and trimming punctuation).
const STOP_TRIGGERS: &[&str] = &[
    "stop",
    "abort",
    "halt",
    "esc",
    "cancel",
    "стоп",
    "停止",
    "やめて",
    "arrête",
];

/// The commands and their one-line help, in the order `/help` lists them.
pub const HELP: &[(&str, &str)] = &[
    (
        "new",
        "Start a new conversation (optionally with a first message)",
    ),
    (
        "reset",
        "Reset this conversation (`/reset soft` keeps the history)",
    ),
    ("stop", "Stop the current run and drop queued messages"),
    ("status", "Show session, model, queue and run state"),
    ("usage", "Tokens and cost of this session and its last turn"),
    (
        "queue",
        "Show or set the queue mode: /queue steer|followup|collect|interrupt [debounce:500ms] [cap:20] [drop:summarize|old|new] or /queue reset",
    ),
    (
        "compact",
        "Summarize older messages to free the model's context window",
    ),
    (
        "model",
        "Show or set this conversation's model: /model, /model NAME, /model default",
    ),
    (
        "think",
        "Show or set how much the model reasons: /think off|minimal|low|medium|high|default",
    ),
    (
        "reasoning",
        "Show the model's reasoning in this chat (collapsed): /reasoning on|off",
    ),
    ("tts", "Answers as voice notes too: /tts on|off"),
    ("help", "List commands"),
    ("whoami", "Show who you are to the bot"),
    (
        "acp",
        "Coding agents: /acp spawn [agent] [--thread auto|here | --bind here] [--cwd DIR] [--label X], /acp status|cancel|close|steer TEXT|agents",
    ),
    (
        "session",
        "This conversation's binding: /session unbind | /session idle 2h",
    ),
    (
        "approve",
        "Answer a command approval: /approve <id> allow-once|allow-always|deny, or /approve to list",
    ),
];

/// Parses `text` as a command; `None` means it is an ordinary message.
pub fn parse(text: &str, bot_username: Option<&str>) -> Option<Command> {
    let trimmed = text.trim();
    if is_stop_trigger(trimmed) {
        return Some(Command::Stop);
    }
    let body = trimmed.strip_prefix('/')?;
    let (head, args) = match body.split_once(char::is_whitespace) {
        Some((head, args)) => (head, args.trim()),
        None => (body, ""),
    };
    let name = match head.split_once('@') {
        Some((name, bot)) => {
            if bot_username.is_some_and(|b| !b.eq_ignore_ascii_case(bot)) {
                return None;
            }
            name
        }
        None => head,
    };
    let arg = (!args.is_empty()).then(|| args.to_string());
    match name.to_lowercase().as_str() {
        "new" => Some(Command::New(arg)),
        "reset" => Some(Command::Reset {
            soft: args.eq_ignore_ascii_case("soft"),
        }),
        "stop" => Some(Command::Stop),
        "status" => Some(Command::Status),
        "usage" => Some(Command::Usage),
        "queue" => Some(Command::Queue(args.to_string())),
        "help" | "start" => Some(Command::Help),
        "whoami" => Some(Command::Whoami),
        "acp" => Some(Command::Acp(args.to_string())),
        "session" => Some(Command::Session(args.to_string())),
        "compact" => Some(Command::Compact),
        "approve" => Some(Command::Approve(args.to_string())),
        "model" => Some(Command::Model(args.to_string())),
        "think" => Some(Command::Think(args.to_string())),
        "reasoning" => Some(Command::Reasoning(args.to_string())),
        "tts" => Some(Command::Tts(args.to_string())),
        _ => None,
    }
}

/// The longest command name (Telegram's limit for bot commands).
const MAX_NAME: usize = 32;

/// The name of a slash command chela does not know: `/name` or `/name@bot` where `name` is a
/// command word (ASCII letters, digits, `_` and `-` as in skill names, at most 32).
/// A path such as `/usr/bin/ls` or a lone `/` is no command. `None` for known commands and
/// for ordinary messages.
pub fn unknown_name(text: &str) -> Option<String> {
    let body = text.trim().strip_prefix('/')?;
    let head = body.split(char::is_whitespace).next().unwrap_or_default();
    let name = head.split_once('@').map_or(head, |(name, _)| name);
    let word = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    (word && parse(text, None).is_none()).then(|| name.to_lowercase())
}

/// The known command closest to `name` (a typo at most two edits away), for "did you mean".
pub fn closest(name: &str) -> Option<&'static str> {
    let known = HELP.iter().map(|(command, _)| *command);
    known
        .map(|command| (strsim::damerau_levenshtein(name, command), command))
        .filter(|(distance, command)| *distance <= 2 && *distance < command.len())
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, command)| command)
}

/// The answer to an unknown command `/name`.
pub fn unknown_answer(name: &str) -> String {
    let name = excerpt(name);
    match closest(&name) {
        Some(known) => {
            format!("Unknown command /{name}. Did you mean /{known}? (/help lists them)")
        }
        None => format!("Unknown command /{name}. /help lists the commands."),
    }
}

pub use crate::domain::text::{ECHO_CHARS, excerpt, is_blank};

/// True for the plain-text stop triggers.
pub fn is_stop_trigger(text: &str) -> bool {
    let cleaned: String = text
        .trim_matches(|c: char| {
            c.is_ascii_punctuation() || c.is_whitespace() || "。！？".contains(c)
        })
        .to_lowercase();
    STOP_TRIGGERS.contains(&cleaned.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_with_args_and_bot_suffix() {
        assert_eq!(
            parse("/new hello there", None),
            Some(Command::New(Some("hello there".into())))
        );
        assert_eq!(parse("/new", None), Some(Command::New(None)));
        assert_eq!(
            parse("/stop@chela_bot", Some("chela_bot")),
            Some(Command::Stop)
        );
        assert_eq!(parse("/stop@other_bot", Some("chela_bot")), None);
        assert_eq!(
            parse("/reset soft", None),
            Some(Command::Reset { soft: true })
        );
        assert_eq!(
            parse("/queue collect cap:5", None),
            Some(Command::Queue("collect cap:5".into()))
        );
        assert_eq!(parse("/compact", None), Some(Command::Compact));
        assert_eq!(
            parse("/model gpt-5", None),
            Some(Command::Model("gpt-5".into()))
        );
        assert_eq!(
            parse("/approve 1a2b3c deny", None),
            Some(Command::Approve("1a2b3c deny".into()))
        );
        assert_eq!(parse("/unknown", None), None);
        assert_eq!(parse("hello /stop", None), None);
    }

    #[test]
    fn plain_text_triggers_stop() {
        for text in ["stop", "Stop!", "  ABORT. ", "стоп", "停止", "esc"] {
            assert_eq!(parse(text, None), Some(Command::Stop), "{text}");
        }
        for text in ["stop it", "don't stop", "stopped"] {
            assert_eq!(parse(text, None), None, "{text}");
        }
    }

    #[test]
    fn unknown_commands_are_told_apart_from_paths_and_known_ones() {
        assert_eq!(unknown_name("/bogus"), Some("bogus".into()));
        assert_eq!(unknown_name("/Stpo now"), Some("stpo".into()));
        assert_eq!(
            unknown_name("/weather@chela_bot Paris"),
            Some("weather".into())
        );
        for text in [
            "/stop",
            "/help",
            "/new hi",
            "/usr/bin/ls is broken",
            "/",
            "/ hi",
            "hi /x",
        ] {
            assert_eq!(unknown_name(text), None, "{text}");
        }
        assert_eq!(unknown_name(&format!("/{}", "a".repeat(33))), None);
    }

    #[test]
    fn a_typo_gets_the_closest_command_and_a_stranger_none() {
        assert_eq!(closest("stpo"), Some("stop"));
        assert_eq!(closest("stauts"), Some("status"));
        assert_eq!(closest("modle"), Some("model"));
        assert_eq!(closest("weather"), None);
        assert!(unknown_answer("stpo").contains("Did you mean /stop?"));
        assert!(unknown_answer("weather").contains("/help lists"));
    }
}
