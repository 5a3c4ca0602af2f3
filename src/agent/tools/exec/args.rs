//! The `exec` tool's arguments, checked.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::agent::tools::args::{self, ArgError};

/// Longest timeout a call may ask for (one day).
const MAX_TIMEOUT_S: f64 = 86_400.0;
/// PTY size when the call names none.
const DEFAULT_COLS: u16 = 120;
const DEFAULT_ROWS: u16 = 30;
/// Largest PTY side.
const MAX_SIDE: u64 = 1000;

/// One `exec` call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExecArgs {
    /// The `sh -c` command line.
    pub(crate) command: String,
    /// Directory relative to the workspace.
    pub(crate) workdir: Option<String>,
    /// Extra environment variables.
    pub(crate) env: Vec<(String, String)>,
    /// Explicit timeout.
    pub(crate) timeout: Option<Duration>,
    /// `Some((cols, rows))`: run on a PTY of that size.
    pub(crate) pty: Option<(u16, u16)>,
    /// Start in the background and return at once.
    pub(crate) background: bool,
}

/// Checks the arguments object; messages name the argument at fault.
pub(crate) fn parse(m: &Map<String, Value>) -> Result<ExecArgs, ArgError> {
    let env = match m.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(vars)) => vars
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(ArgError::invalid(format!(
                    "env value of `{k}` must be a string"
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ArgError::invalid(
                "argument `env` must be an object of strings",
            ));
        }
    };
    // `timeout_s` is the older name of `timeout`.
    let key = if m.contains_key("timeout") {
        "timeout"
    } else {
        "timeout_s"
    };
    let timeout = match args::optional_f64(m, key)? {
        None => None,
        Some(s) if s > 0.0 && s <= MAX_TIMEOUT_S => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(ArgError::invalid(format!(
                "argument `{key}` must be above 0 and at most {MAX_TIMEOUT_S} seconds, got {s}"
            )));
        }
    };
    let pty = match args::optional_bool(m, "pty")? {
        Some(true) => Some((
            side(m, "cols", DEFAULT_COLS)?,
            side(m, "rows", DEFAULT_ROWS)?,
        )),
        _ => None,
    };
    Ok(ExecArgs {
        command: args::required_str(m, "command")?.to_string(),
        workdir: args::optional_str(m, "workdir")?.map(str::to_string),
        env,
        timeout,
        pty,
        background: args::optional_bool(m, "background")?.unwrap_or(false),
    })
}

fn side(m: &Map<String, Value>, key: &str, default: u16) -> Result<u16, ArgError> {
    match args::optional_u64(m, key)? {
        None => Ok(default),
        Some(n @ 1..=MAX_SIDE) => Ok(u16::try_from(n).unwrap_or(default)),
        Some(n) => Err(ArgError::invalid(format!(
            "argument `{key}` must be 1 to {MAX_SIDE}, got {n}"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(v: Value) -> Result<ExecArgs, String> {
        parse(v.as_object().unwrap()).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_a_foreground_pipe_command() {
        let a = parsed(json!({"command": "ls"})).unwrap();
        assert_eq!(a.pty, None);
        assert!(!a.background);
        assert_eq!(a.timeout, None);
    }

    #[test]
    fn pty_size_background_and_timeout_are_read() {
        let a = parsed(
            json!({"command": "top", "pty": true, "cols": 80, "background": true,
                              "timeout": 2.5}),
        )
        .unwrap();
        assert_eq!(a.pty, Some((80, DEFAULT_ROWS)));
        assert!(a.background);
        assert_eq!(a.timeout, Some(Duration::from_millis(2500)));
        let a = parsed(json!({"command": "x", "timeout_s": 3})).unwrap();
        assert_eq!(a.timeout, Some(Duration::from_secs(3)));
        // Size without a PTY means nothing.
        assert_eq!(
            parsed(json!({"command": "x", "cols": 80})).unwrap().pty,
            None
        );
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let err = parsed(json!({"command": "x", "pty": true, "rows": 0})).unwrap_err();
        assert!(err.contains("`rows`"), "{err}");
        let err = parsed(json!({"command": "x", "pty": "yes"})).unwrap_err();
        assert!(err.contains("`pty`"), "{err}");
        let err = parsed(json!({"command": "x", "timeout": 0})).unwrap_err();
        assert!(err.contains("`timeout`"), "{err}");
        let err = parsed(json!({"command": "x", "env": {"A": [1]}})).unwrap_err();
        assert!(err.contains("`A`"), "{err}");
    }
}
