//! Native (slash) commands: which ones chela registers with Discord and when.
//!
//! The core names its commands before the gateway connection exists, but registering
//! (`PUT /applications/{id}/commands`, a bulk overwrite of the global commands) needs the
//! application id, which READY brings. [`Registrar`] keeps the list until both are known and
//! registers once per process.

use std::sync::{Arc, Mutex};

use chela_channel::ChannelError;
use serenity::builder::{CreateCommand, CreateCommandOption};
use serenity::http::Http;
use serenity::model::application::CommandOptionType;
use serenity::model::id::ApplicationId;

use crate::errors::channel_error;

/// The name of the one option of commands that take arguments.
pub const ARGS: &str = "args";

/// Commands Discord offers beyond the ones the core passes (their handlers come with the
/// ACP work; until then the core answers that they are not available yet).
const EXTRA: &[(&str, &str)] = &[
    (
        "acp",
        "Coding agents over ACP: spawn|status|cancel|close|steer ...",
    ),
    (
        "session",
        "This conversation's binding: unbind | idle <duration>",
    ),
];

/// Commands whose text after the name matters: they get an optional `args` string option.
const TAKE_ARGS: &[&str] = &[
    "new", "reset", "queue", "acp", "session", "approve", "model",
];

/// Discord's limits: names 1-32 lowercase chars, descriptions 1-100 chars.
const MAX_NAME: usize = 32;
const MAX_DESCRIPTION: usize = 100;

/// One command as chela registers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Lowercase name, without the slash.
    pub name: String,
    /// One line of help, within Discord's 100 chars.
    pub description: String,
    /// Whether it has the optional `args` string option.
    pub args: bool,
}

/// The commands to register: the core's, then the extra ones it does not name yet; names
/// Discord would refuse and repeated names are left out.
pub fn specs(core: &[(String, String)]) -> Vec<Spec> {
    let extra = EXTRA.iter().map(|(n, d)| (n.to_string(), d.to_string()));
    let mut out: Vec<Spec> = Vec::new();
    for (name, description) in core.iter().cloned().chain(extra) {
        let name = name.trim_start_matches('/').to_lowercase();
        let valid = !name.is_empty()
            && name.chars().count() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_');
        if !valid || out.iter().any(|s| s.name == name) {
            continue;
        }
        out.push(Spec {
            args: TAKE_ARGS.contains(&name.as_str()),
            description: fit_description(&description, &name),
            name,
        });
    }
    out
}

/// `text` within 100 chars (cut with an ellipsis), never empty.
fn fit_description(text: &str, name: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return format!("/{name}");
    }
    if text.chars().count() <= MAX_DESCRIPTION {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(MAX_DESCRIPTION - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// The serenity builder of one command.
fn build(spec: &Spec) -> CreateCommand {
    let command = CreateCommand::new(&spec.name).description(&spec.description);
    if spec.args {
        command.add_option(
            CreateCommandOption::new(CommandOptionType::String, ARGS, "What follows the command")
                .required(false),
        )
    } else {
        command
    }
}

/// Registers the commands once both the list and the application id are known.
pub struct Registrar {
    http: Arc<Http>,
    /// The list, until it was registered.
    pending: Mutex<Option<Vec<Spec>>>,
}

impl Registrar {
    /// A registrar that registers through `http` (whose application id READY sets).
    pub fn new(http: Arc<Http>) -> Self {
        Registrar {
            http,
            pending: Mutex::new(None),
        }
    }

    /// Takes the core's commands; registers them now if the application id is known.
    pub async fn set(&self, core: &[(&str, &str)]) -> Result<(), ChannelError> {
        let core: Vec<(String, String)> = core
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_string()))
            .collect();
        if let Ok(mut pending) = self.pending.lock() {
            *pending = Some(specs(&core));
        }
        if self.http.application_id().is_some() {
            self.register().await?;
        }
        Ok(())
    }

    /// READY arrived: records the application id and registers what waits.
    pub async fn ready(&self, application: ApplicationId) {
        self.http.set_application_id(application);
        if let Err(e) = self.register().await {
            tracing::warn!(error = %e, "discord: cannot register the slash commands");
        }
    }

    /// Registers the waiting list, if any; on failure it waits for the next READY.
    async fn register(&self) -> Result<(), ChannelError> {
        let Some(specs) = self.pending.lock().ok().and_then(|mut p| p.take()) else {
            return Ok(());
        };
        let commands: Vec<CreateCommand> = specs.iter().map(build).collect();
        match self.http.create_global_commands(&commands).await {
            Ok(registered) => {
                tracing::info!(
                    commands = registered.len(),
                    "discord slash commands registered"
                );
                Ok(())
            }
            Err(e) => {
                if let Ok(mut pending) = self.pending.lock() {
                    pending.get_or_insert(specs);
                }
                Err(channel_error(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> Vec<(String, String)> {
        [
            ("new", "Start a new conversation"),
            ("stop", "Stop the current run"),
            ("queue", &"x".repeat(150)),
            ("acp", "Coding agents (from the core)"),
            ("Bad Name", "refused by Discord"),
        ]
        .iter()
        .map(|(n, d)| (n.to_string(), d.to_string()))
        .collect()
    }

    #[test]
    fn the_core_commands_come_first_then_acp_and_session_once() {
        let names: Vec<String> = specs(&core()).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["new", "stop", "queue", "acp", "session"]);
    }

    #[test]
    fn commands_with_arguments_get_the_args_option() {
        let specs = specs(&core());
        let args: Vec<&str> = specs
            .iter()
            .filter(|s| s.args)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(args, ["new", "queue", "acp", "session"]);
        let json = serde_json::to_value(build(&specs[0])).unwrap();
        assert_eq!(json["options"][0]["name"], "args");
        assert_eq!(json["options"][0]["type"], 3);
        assert_eq!(json["options"][0]["required"], false);
        let stop = serde_json::to_value(build(&specs[1])).unwrap();
        assert!(
            stop.get("options")
                .and_then(|o| o.as_array())
                .is_none_or(|o| o.is_empty()),
            "{stop}"
        );
    }

    #[test]
    fn descriptions_fit_discords_limit() {
        for spec in specs(&core()) {
            let chars = spec.description.chars().count();
            assert!((1..=100).contains(&chars), "{spec:?}");
        }
    }
}
