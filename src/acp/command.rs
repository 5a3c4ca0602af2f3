//! Parsing `/acp ...` and `/session ...` (SPEC 4).

use std::time::Duration;

use crate::domain::text::excerpt;

/// Where `/acp spawn` binds the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A new thread or forum topic (or the current one when already in a thread).
    ThreadAuto,
    /// The current conversation.
    Here,
}

/// A parsed `/acp` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcpCommand {
    /// `/acp spawn [harness] [--bind here | --thread auto|here] [--cwd DIR] [--label X]`.
    Spawn {
        /// Harness name; `None`: the default agent.
        harness: Option<String>,
        /// Where to bind.
        placement: Placement,
        /// Working folder.
        cwd: Option<String>,
        /// Label.
        label: Option<String>,
    },
    /// `/acp status`.
    Status,
    /// `/acp cancel`: cancel the running turn.
    Cancel,
    /// `/acp close`: unbind and end the agent.
    Close,
    /// `/acp steer TEXT`: cancel the running turn and send TEXT next.
    Steer(String),
    /// `/acp agents`: list the harnesses.
    Agents,
    /// `/acp` or `/acp help`.
    Help,
}

/// A parsed `/session` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCommand {
    /// `/session unbind`.
    Unbind,
    /// `/session idle DURATION`.
    Idle(Duration),
}

/// How to use `/acp`.
pub const ACP_USAGE: &str = "Usage: /acp spawn [agent] [--thread auto|here | --bind here] [--cwd DIR] [--label NAME]\n\
/acp status | cancel | close | steer TEXT | agents";

/// Why the arguments of `/acp` or `/session` were refused; the text is ready to show
/// (what the user typed appears only as a short excerpt).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// A subcommand that does not exist.
    #[error("Unknown /acp command: {0}\n{ACP_USAGE}")]
    UnknownCommand(String),
    /// An option that does not exist.
    #[error("Unknown option {0}\n{ACP_USAGE}")]
    UnknownOption(String),
    /// An option given without its value.
    #[error("{0} needs a value\n{ACP_USAGE}")]
    MissingValue(&'static str),
    /// An option value that is not one of the allowed ones.
    #[error("{option} takes {allowed}, not {value:?}")]
    BadValue {
        /// The option.
        option: &'static str,
        /// What it takes.
        allowed: &'static str,
        /// What was given (an excerpt).
        value: String,
    },
    /// A word left over after the agent's name.
    #[error("Unexpected {0:?}\n{ACP_USAGE}")]
    Unexpected(String),
    /// A subcommand or duration that does not fit its usage.
    #[error("{0}")]
    Usage(&'static str),
    /// `/session idle` with a duration that does not parse.
    #[error("Bad duration {0:?} (try 2h or 30m)")]
    Duration(String),
}

/// Parses the arguments of `/acp`.
pub fn parse_acp(args: &str) -> Result<AcpCommand, ArgsError> {
    let mut words = args.split_whitespace();
    let Some(sub) = words.next() else {
        return Ok(AcpCommand::Help);
    };
    match sub.to_lowercase().as_str() {
        "spawn" => parse_spawn(words),
        "status" => Ok(AcpCommand::Status),
        "cancel" => Ok(AcpCommand::Cancel),
        "close" => Ok(AcpCommand::Close),
        "agents" => Ok(AcpCommand::Agents),
        "help" => Ok(AcpCommand::Help),
        "steer" => {
            let text = args.trim_start()[sub.len()..].trim();
            if text.is_empty() {
                Err(ArgsError::Usage("Usage: /acp steer TEXT"))
            } else {
                Ok(AcpCommand::Steer(text.to_owned()))
            }
        }
        other => Err(ArgsError::UnknownCommand(excerpt(other))),
    }
}

fn parse_spawn<'a>(mut words: impl Iterator<Item = &'a str>) -> Result<AcpCommand, ArgsError> {
    let (mut harness, mut placement, mut cwd, mut label) =
        (None, Placement::ThreadAuto, None, None);
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if word.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (word, None),
        };
        let mut value = |name: &'static str| {
            inline
                .clone()
                .or_else(|| words.next().map(str::to_owned))
                .ok_or(ArgsError::MissingValue(name))
        };
        match flag {
            "--bind" => match value("--bind")?.as_str() {
                "here" => placement = Placement::Here,
                other => {
                    return Err(ArgsError::BadValue {
                        option: "--bind",
                        allowed: "`here`",
                        value: excerpt(other),
                    });
                }
            },
            "--thread" => {
                placement = match value("--thread")?.as_str() {
                    "auto" => Placement::ThreadAuto,
                    "here" => Placement::Here,
                    other => {
                        return Err(ArgsError::BadValue {
                            option: "--thread",
                            allowed: "auto or here",
                            value: excerpt(other),
                        });
                    }
                }
            }
            "--cwd" => cwd = Some(value("--cwd")?),
            "--label" => label = Some(value("--label")?),
            flag if flag.starts_with("--") => {
                return Err(ArgsError::UnknownOption(excerpt(flag)));
            }
            name if harness.is_none() => harness = Some(name.to_lowercase()),
            extra => return Err(ArgsError::Unexpected(excerpt(extra))),
        }
    }
    Ok(AcpCommand::Spawn {
        harness,
        placement,
        cwd,
        label,
    })
}

/// Parses the arguments of `/session`.
pub fn parse_session(args: &str) -> Result<SessionCommand, ArgsError> {
    let mut words = args.split_whitespace();
    match (words.next().map(str::to_lowercase).as_deref(), words.next()) {
        (Some("unbind"), None) => Ok(SessionCommand::Unbind),
        (Some("idle"), Some(duration)) => humantime::parse_duration(duration)
            .map(SessionCommand::Idle)
            .map_err(|_| ArgsError::Duration(excerpt(duration))),
        _ => Err(ArgsError::Usage(
            "Usage: /session unbind | /session idle DURATION (e.g. 2h)",
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn spawn_takes_a_harness_and_options() {
        assert_eq!(
            parse_acp("spawn codex --thread here --cwd ~/src/app --label=fix").unwrap(),
            AcpCommand::Spawn {
                harness: Some("codex".into()),
                placement: Placement::Here,
                cwd: Some("~/src/app".into()),
                label: Some("fix".into()),
            }
        );
        assert_eq!(
            parse_acp("spawn").unwrap(),
            AcpCommand::Spawn {
                harness: None,
                placement: Placement::ThreadAuto,
                cwd: None,
                label: None
            }
        );
        assert!(matches!(
            parse_acp("spawn --bind here").unwrap(),
            AcpCommand::Spawn {
                placement: Placement::Here,
                ..
            }
        ));
    }

    #[test]
    fn bad_spawn_arguments_say_what_is_expected() {
        assert!(
            parse_acp("spawn --cwd")
                .unwrap_err()
                .to_string()
                .contains("--cwd needs a value")
        );
        assert!(
            parse_acp("spawn --thread sideways")
                .unwrap_err()
                .to_string()
                .contains("auto or here")
        );
        assert!(
            parse_acp("spawn a b")
                .unwrap_err()
                .to_string()
                .contains("Unexpected")
        );
        assert!(
            parse_acp("spawn --force")
                .unwrap_err()
                .to_string()
                .contains("Unknown option")
        );
        assert!(
            parse_acp("launch")
                .unwrap_err()
                .to_string()
                .contains("Usage")
        );
    }

    #[test]
    fn other_subcommands() {
        assert_eq!(parse_acp("").unwrap(), AcpCommand::Help);
        assert_eq!(parse_acp("STATUS").unwrap(), AcpCommand::Status);
        assert_eq!(
            parse_acp("steer  now do the tests ").unwrap(),
            AcpCommand::Steer("now do the tests".into())
        );
        assert!(parse_acp("steer").is_err());
        assert_eq!(parse_session("unbind").unwrap(), SessionCommand::Unbind);
        assert_eq!(
            parse_session("idle 2h").unwrap(),
            SessionCommand::Idle(Duration::from_secs(7200))
        );
        assert!(
            parse_session("idle soon")
                .unwrap_err()
                .to_string()
                .contains("Bad duration")
        );
        assert!(parse_session("").is_err());
    }
}
