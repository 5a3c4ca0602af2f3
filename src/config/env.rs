//! `${VAR}` substitution in raw config text.

use super::ConfigError;
use super::error::{Location, line_col};

/// A `${...}` reference that could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct SubstError {
    /// 1-based line of the `$`.
    pub line: usize,
    /// 1-based column of the `$`.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl SubstError {
    /// Names the file the text came from.
    pub(crate) fn in_file(self, file: &str) -> ConfigError {
        ConfigError::Substitution {
            location: Location {
                file: file.to_owned(),
                line: Some(self.line),
                column: Some(self.column),
            },
            message: self.message,
        }
    }
}

/// Expands `${VAR}` and `${VAR:-default}` in `raw` through `lookup`.
///
/// An unset variable becomes the empty string (or the default; an empty value also takes the
/// default with `:-`). `\`, `"` and control characters in the result are escaped so that a
/// reference inside a basic TOML string (`"..."`) stays valid; `$${` is a literal `${`.
/// `VAR` is `[A-Za-z_][A-Za-z0-9_]*`; anything else inside `${...}` is an error.
pub fn substitute(
    raw: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SubstError> {
    expand(raw, lookup, false)
}

/// Like [`substitute`], but `${VAR}` with `VAR` unset (and no `:-default`) outside a comment
/// is an error naming the variable and the key: an unset token must not silently turn a
/// channel off. `${VAR:-}` allows an unset variable explicitly.
pub fn substitute_required(
    raw: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SubstError> {
    expand(raw, lookup, true)
}

fn expand(
    raw: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    required: bool,
) -> Result<String, SubstError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        if !tail.starts_with("${") {
            out.push('$');
            rest = &tail[1..];
            continue;
        }
        let offset = raw.len() - tail.len();
        let fail = |message: String| {
            let (line, column) = line_col(raw, offset);
            SubstError {
                line,
                column,
                message,
            }
        };
        let Some(end) = tail.find('}') else {
            return Err(fail(
                "unterminated \"${\"; write \"$${\" for a literal \"${\"".to_owned(),
            ));
        };
        let inner = &tail[2..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return Err(fail(format!(
                "invalid variable reference \"${{{inner}}}\"; expected ${{NAME}} or \
                 ${{NAME:-default}} (write \"$${{\" for a literal \"${{\")"
            )));
        }
        let value = match (lookup(name), default) {
            (Some(v), Some(d)) if v.is_empty() => d.to_owned(),
            (Some(v), _) => v,
            (None, Some(d)) => d.to_owned(),
            (None, None) if required && !in_comment(raw, offset) => {
                let key = super::error::key_at(raw, offset)
                    .map(|k| format!("{k}: "))
                    .unwrap_or_default();
                return Err(fail(format!(
                    "{key}environment variable {name} is not set; set it, or write \
                     \"${{{name}:-}}\" to allow it unset"
                )));
            }
            (None, None) => String::new(),
        };
        escape_into(&mut out, &value);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether byte `offset` of `raw` is inside a `#` comment (a `#` outside quotes earlier on
/// its line; multi-line strings are not tracked).
fn in_comment(raw: &str, offset: usize) -> bool {
    let start = raw[..offset].rfind('\n').map_or(0, |i| i + 1);
    let mut quote = None;
    let mut escaped = false;
    for c in raw[start..offset].chars() {
        match (quote, c) {
            (Some('"'), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(q), c) if c == q && !escaped => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') => return true,
            _ => {}
        }
        escaped = false;
    }
    false
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Escapes a value for a TOML basic string.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
}

/// Whether environment variable `name` holds chela's own credentials or settings (bot tokens,
/// `CHELA_*`): commands chela starts for a model (exec, coding agents, their terminals) do not
/// inherit these.
pub fn is_chela_secret(name: &str) -> bool {
    name.starts_with("CHELA_") || super::TOKEN_VARIABLES.contains(&name)
}

/// The names of chela's secret variables set in this process (see [`is_chela_secret`]).
pub fn chela_secrets_present() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_str().is_some_and(is_chela_secret))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn an_unset_variable_is_an_error_naming_it_and_the_key() {
        let raw = "[channels.telegram]\ntoken = \"${TG_TOKEN}\"\n";
        let err = substitute_required(raw, &none).unwrap_err();
        assert_eq!((err.line, err.column), (2, 10));
        assert!(
            err.message.starts_with("channels.telegram.token: ")
                && err.message.contains("TG_TOKEN is not set"),
            "{err}"
        );
        // Loading fails the same way (it used to give an empty token: Telegram silently off).
        let err = crate::config::Config::from_toml_str(raw, "config.toml", &none).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "config.toml:2:10: channels.telegram.token: environment variable TG_TOKEN"
            ),
            "{err}"
        );
        // A default (even empty) allows it unset; comments are not checked.
        let ok = "a = \"${X:-}\" # see ${DOC_VAR}\n# b = \"${Y}\"\nc = \"#${Z:-z}\"\n";
        assert_eq!(
            substitute_required(ok, &none).unwrap(),
            "a = \"\" # see \n# b = \"\"\nc = \"#z\"\n"
        );
        // Not a comment: `#` inside a string.
        let err = substitute_required("[rpc]\ntoken = \"#${T}\"\n", &none).unwrap_err();
        assert!(err.message.starts_with("rpc.token: "), "{err}");
    }
}
