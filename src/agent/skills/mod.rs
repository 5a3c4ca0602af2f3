//! Skills: folders holding a SKILL.md whose front matter gives a `name`, a `description` and
//! optional requirements (see [`parse`]). They come from the workspace, the managed folder, the
//! bundled set and extra folders, in that precedence ([`sources`]); a name found again lower
//! down is shadowed. Skills whose requirements fail ([`requirements`]) are left out of the
//! system prompt; `chela skills list` shows every skill found and why it is or is not loaded.

pub mod parse;
pub mod requirements;
pub mod sources;

use crate::config::Config;

pub use parse::{FrontMatter, ParseError, Requires};
pub use requirements::Probe;
pub use sources::{Roots, Source};

/// A skill the agent is told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Skill name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Where its SKILL.md is (`bundled:` for skills compiled into chela).
    pub location: String,
}

/// Whether a skill found is loaded, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Offered to the agent.
    Loaded,
    /// Requirements that do not hold, e.g. `missing binary: gh`.
    Unmet(Vec<String>),
    /// A skill of the same name in a higher-precedence (or the same, earlier) place wins.
    Shadowed {
        /// The winner's source.
        by: Source,
        /// The winner's SKILL.md.
        location: String,
    },
    /// The SKILL.md could not be read or parsed.
    Malformed(String),
}

impl Status {
    /// `loaded`, or `not loaded: <why>`.
    pub fn describe(&self) -> String {
        match self {
            Status::Loaded => "loaded".into(),
            Status::Unmet(reasons) => format!("not loaded: {}", reasons.join("; ")),
            Status::Shadowed { by, location } => {
                format!("not loaded: shadowed by {by} skill {location}")
            }
            Status::Malformed(error) => format!("not loaded: malformed SKILL.md: {error}"),
        }
    }
}

/// A SKILL.md found in one of the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its name (the folder's name when the front matter could not be read).
    pub name: String,
    /// Its description (empty when malformed).
    pub description: String,
    /// Where it was found.
    pub source: Source,
    /// Its SKILL.md.
    pub location: String,
    /// Whether it is loaded.
    pub status: Status,
}

/// Every skill in `roots`, highest precedence first, each with its status.
pub fn discover(roots: &Roots, probe: &Probe<'_>) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    for candidate in sources::candidates(roots) {
        let parsed = match candidate.text {
            Ok(text) => parse::parse(&text).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let entry = match parsed {
            Err(error) => Found {
                name: candidate.folder,
                description: String::new(),
                source: candidate.source,
                location: candidate.location,
                status: Status::Malformed(error),
            },
            Ok(front) => {
                let winner = found.iter().find(|f| {
                    f.name == front.name
                        && !matches!(f.status, Status::Malformed(_) | Status::Shadowed { .. })
                });
                let status = match winner {
                    Some(w) => Status::Shadowed {
                        by: w.source,
                        location: w.location.clone(),
                    },
                    None => match requirements::unmet(&front.requires, probe) {
                        reasons if reasons.is_empty() => Status::Loaded,
                        reasons => Status::Unmet(reasons),
                    },
                };
                Found {
                    name: front.name,
                    description: front.description,
                    source: candidate.source,
                    location: candidate.location,
                    status,
                }
            }
        };
        found.push(entry);
    }
    found
}

/// Every skill `config` can see, checked against this process's environment.
pub fn discover_for(config: &Config) -> Vec<Found> {
    let value = serde_json::to_value(config).unwrap_or_default();
    let env = |name: &str| std::env::var(name).ok();
    let probe = Probe {
        path: std::env::var_os("PATH"),
        env: &env,
        config: &value,
        os: std::env::consts::OS,
    };
    discover(&Roots::from_config(&config.agent), &probe)
}

/// The loaded skills of `found`, descriptions on one line.
pub fn loaded(found: &[Found]) -> Vec<Skill> {
    found
        .iter()
        .filter(|f| f.status == Status::Loaded)
        .map(|f| Skill {
            name: f.name.clone(),
            // One line in the prompt, whatever block style the front matter used.
            description: f
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            location: f.location.clone(),
        })
        .collect()
}

/// The skills the agent of `config` is offered; malformed ones are logged.
pub fn load(config: &Config) -> Vec<Skill> {
    let found = discover_for(config);
    for f in &found {
        match &f.status {
            Status::Malformed(_) => {
                tracing::warn!(skill = %f.location, "{}", f.status.describe());
            }
            Status::Loaded => {}
            _ => tracing::debug!(skill = %f.name, "{}", f.status.describe()),
        }
    }
    let only = &config.agent.skills;
    let mut skills = loaded(&found);
    if !only.is_empty() {
        skills.retain(|s| only.iter().any(|name| name.eq_ignore_ascii_case(&s.name)));
    }
    skills
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
