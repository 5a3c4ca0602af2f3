//! Config errors: each names the file, the dotted key, the line and column, and what is expected.

use std::fmt;
use std::path::PathBuf;

/// Where in a config file something went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file name as given.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column (in chars), when known.
    pub column: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

impl Location {
    /// The location of byte `offset` of `text` in `file`.
    pub(crate) fn at(file: &str, text: &str, offset: Option<usize>) -> Self {
        let (line, column) = match offset {
            Some(offset) => {
                let (line, column) = line_col(text, offset);
                (Some(line), Some(column))
            }
            None => (None, None),
        };
        Self {
            file: file.to_owned(),
            line,
            column,
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file named explicitly (`--config`, `$CHELA_CONFIG`) does not exist.
    #[error("config file {} not found", path.display())]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
    /// The config file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No home folder to put the defaults in (the store's `~/.chela/data`).
    #[error(
        "no home folder found for the default data path; set HOME, CHELA_STORE_PATH or store.path"
    )]
    NoHome,
    /// An environment variable that overrides or fills a key holds a bad value.
    #[error("environment variable {name}: {message}")]
    Env {
        /// The variable (`OPENAI_BASE_URL`).
        name: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A `${...}` reference could not be expanded.
    #[error("{location}: {message}")]
    Substitution {
        /// Where.
        location: Location,
        /// What is wrong.
        message: String,
    },
    /// The text is not TOML, or a key has the wrong type or value.
    #[error("{location}: {}{message}", key_prefix(key))]
    Parse {
        /// Where.
        location: Location,
        /// The dotted key, when known (`queue.debounce_ms`).
        key: Option<String>,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A value is well-typed but not allowed (see [`super::Config::validate`]).
    #[error("{}{key}: {message}", location_prefix(location))]
    Invalid {
        /// Where, when the config came from a file.
        location: Option<Location>,
        /// The dotted key.
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

fn key_prefix(key: &Option<String>) -> String {
    key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default()
}

fn location_prefix(location: &Option<Location>) -> String {
    location
        .as_ref()
        .map(|l| format!("{l}: "))
        .unwrap_or_default()
}

impl ConfigError {
    /// Adds the file (and the key's line, found in `raw`) to a validation error.
    pub(crate) fn located(self, file: &str, raw: &str) -> Self {
        match self {
            ConfigError::Invalid {
                location: None,
                key,
                message,
            } => {
                let offset = key_offset(raw, &key);
                ConfigError::Invalid {
                    location: Some(Location::at(file, raw, offset)),
                    key,
                    message,
                }
            }
            other => other,
        }
    }
}

/// A value that is not one of an enum's names (`/queue bogus`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}; expected one of {}", expected.join(", "))]
pub struct ParseEnumError {
    /// What was being parsed (`queue mode`).
    pub what: &'static str,
    /// The rejected text.
    pub value: String,
    /// The accepted names.
    pub expected: &'static [&'static str],
}

/// A TOML syntax error; a duplicate key is named.
pub(crate) fn parse_error(file: &str, text: &str, e: toml::de::Error) -> ConfigError {
    let span = e.span();
    let message = e.message().trim().replace('\n', "; ");
    let key = span
        .clone()
        .filter(|_| message.starts_with("duplicate key"))
        .and_then(|span| {
            let name = text
                .get(span.clone())?
                .trim()
                .trim_matches(['[', ']', '"', '\'']);
            let line_start = text.get(..span.start)?.rfind('\n').map_or(0, |i| i + 1);
            let header = text.get(line_start..)?.trim_start().starts_with('[');
            Some(match table_at(text, span.start) {
                Some(table) if !table.is_empty() && !header => format!("{table}.{name}"),
                _ => name.to_owned(),
            })
        });
    ConfigError::Parse {
        location: Location::at(file, text, span.map(|s| s.start)),
        key,
        message,
    }
}

/// The table header (`[a.b]` / `[[a.b]]`) in force at byte `offset`; empty at top level.
fn table_at(text: &str, offset: usize) -> Option<String> {
    let line_start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let before = text.get(..line_start)?;
    let header = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| {
            l.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        });
    Some(header.unwrap_or_default())
}

/// The dotted key of the `key = value` line holding byte `offset` (or of the nearest such
/// line above, for a value spread over lines), with its table; `None` when not found.
pub(crate) fn key_at(text: &str, offset: usize) -> Option<String> {
    let line_end = text
        .get(offset..)?
        .find('\n')
        .map_or(text.len(), |i| offset + i);
    let upto = text.get(..line_end)?;
    let mut end = upto.len();
    for line in upto.lines().rev() {
        let line_start = end - line.len();
        end = line_start.saturating_sub(1);
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            return None;
        }
        let Some((key, _)) = trimmed.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key.starts_with('#') {
            continue;
        }
        return Some(match table_at(text, line_start) {
            Some(table) if !table.is_empty() => format!("{table}.{key}"),
            _ => key.to_owned(),
        });
    }
    None
}

/// A deserialization error: the key path from serde_path_to_error, the span from toml.
pub(crate) fn de_error(
    file: &str,
    text: &str,
    e: serde_path_to_error::Error<toml::de::Error>,
) -> ConfigError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    let message = inner.message().trim().to_owned();
    let mut key = (path != ".").then_some(path);
    let message = if let Some(rest) = message.strip_prefix("unknown field `") {
        // serde: "unknown field `x`, expected one of `a`, `b`" (path stops at the parent table).
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        key = Some(match key {
            Some(parent) if !parent.ends_with(name) => format!("{parent}.{name}"),
            Some(parent) => parent,
            None => name.to_owned(),
        });
        let expected = expected.trim_start_matches(',').trim().replace('`', "");
        let hint = unknown_key_hint(key.as_deref().unwrap_or(name), name, &expected);
        match (hint, expected.is_empty()) {
            (Some(hint), true) => format!("unknown key ({hint})"),
            (Some(hint), false) => format!("unknown key ({hint}); {expected}"),
            (None, true) => "unknown key".to_owned(),
            (None, false) => format!("unknown key; {expected}"),
        }
    } else if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (name, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = expected.trim_start_matches(',').trim().replace('`', "");
        match openai_compatible(name) {
            Some(base_url) => format!(
                "unknown value {name:?}; {expected} ({name} speaks the OpenAI API: \
                 provider = \"openai\" with base_url = \"{base_url}\")"
            ),
            None => format!("unknown value {name:?}; {expected}"),
        }
    } else if let Some((head, _)) = message.split_once("expected struct ") {
        format!("{head}expected a table")
    } else {
        message
    };
    ConfigError::Parse {
        location: Location::at(file, text, inner.span().map(|s| s.start)),
        key,
        message,
    }
}

/// For a server that speaks the OpenAI API, named as if it were a provider: its usual
/// local `base_url`.
fn openai_compatible(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "ollama" => Some("http://localhost:11434/v1"),
        "llamacpp" | "llama.cpp" | "llama-cpp" | "llama_cpp" => Some("http://localhost:8080/v1"),
        "vllm" => Some("http://localhost:8000/v1"),
        "lmstudio" | "lm-studio" | "lm_studio" => Some("http://localhost:1234/v1"),
        _ => None,
    }
}

/// A hint for unknown key `name` (at dotted `path`) given serde's `expected` ("expected one
/// of a, b"): a channel table written at the top, or the closest expected key (a typo).
fn unknown_key_hint(path: &str, name: &str, expected: &str) -> Option<String> {
    if path == name && super::CHANNEL_TABLES.contains(&name) {
        return Some(format!("channels go under [channels.{name}]"));
    }
    let names = expected.strip_prefix("expected one of ")?.split(", ");
    let max = (name.chars().count() / 3).max(1);
    names
        .map(|candidate| (strsim::damerau_levenshtein(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= max)
        .min()
        .map(|(_, closest)| format!("did you mean {closest}?"))
}

/// 1-based line and char column of byte `offset`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// Byte offset of `table.key = ...` in simple TOML text (for validation errors), if found.
/// `table[i].key` names the key in the i-th `[[table]]` of an array of tables.
fn key_offset(raw: &str, dotted: &str) -> Option<usize> {
    let (table, key) = dotted.rsplit_once('.')?;
    let (table, index) = match table.strip_suffix(']').and_then(|t| t.rsplit_once('[')) {
        Some((name, index)) => (name, index.parse::<usize>().ok()?),
        None => (table, 0),
    };
    let mut current = (String::new(), 0);
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut offset = 0;
    for line in raw.split_inclusive('\n') {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_prefix('[') {
            let array = header.starts_with('[');
            let name = header
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            let count = seen.entry(name.clone()).or_default();
            current = (name, if array { *count } else { 0 });
            *count += 1;
        } else if current.0 == table
            && current.1 == index
            && let Some(rest) = trimmed.strip_prefix(key)
            && rest.trim_start().starts_with(['=', '.'])
        {
            return Some(offset + (line.len() - line.trim_start().len()));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    #[test]
    fn a_duplicate_key_is_named_with_its_line() {
        let raw = "[model]\nmodel = \"a\"\nmax_tokens = 5\nmodel = \"b\"\n";
        let err = crate::config::Config::from_toml_str(raw, "config.toml", &|_| None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("config.toml:4:1: model.model: duplicate key"),
            "{text}"
        );
        let raw = "[queue]\ncap = 3\n[queue]\ncap = 4\n";
        let err = crate::config::Config::from_toml_str(raw, "c.toml", &|_| None).unwrap_err();
        assert!(err.to_string().contains("queue"), "{err}");
    }

    #[test]
    fn key_at_finds_the_key_and_its_table() {
        let raw = "top = 1\n[a.b]\nx = [\n  \"v\",\n]\n";
        assert_eq!(super::key_at(raw, 2).as_deref(), Some("top"));
        let at = raw.find("\"v\"").unwrap();
        assert_eq!(super::key_at(raw, at).as_deref(), Some("a.b.x"));
    }
}
