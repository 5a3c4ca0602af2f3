//! URL-valued settings, checked when the config loads: a URL without its scheme
//! (`localhost:11434/v1`) is refused there, naming the key or the variable, instead of
//! failing every request later.

use super::Config;

/// The schemes of an HTTP endpoint.
pub(crate) const HTTP: &[&str] = &["http", "https"];
/// The schemes of a WebSocket endpoint.
pub(crate) const WEBSOCKET: &[&str] = &["wss", "ws"];

/// Checks that `value` (trimmed) is an absolute URL with a host and one of `schemes`; the
/// error says what is wrong and, for a value without `://`, how to write it.
pub(crate) fn check(value: &str, schemes: &[&str]) -> Result<(), String> {
    let value = value.trim();
    let expected = schemes
        .iter()
        .map(|s| format!("{s}://"))
        .collect::<Vec<_>>()
        .join(" or ");
    let hint = match schemes.first() {
        Some(scheme) if !value.contains("://") => {
            format!("; write it with its scheme, e.g. \"{scheme}://{value}\"")
        }
        _ => String::new(),
    };
    match url::Url::parse(value) {
        Ok(url) if !schemes.contains(&url.scheme()) => {
            Err(format!("{value:?} must start with {expected}{hint}"))
        }
        Ok(url) if !url.has_host() => Err(format!("{value:?} has no host")),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("{value:?} is not a URL ({e}){hint}")),
    }
}

impl Config {
    /// The URL-valued keys of the file that are set, with the schemes each accepts.
    pub(crate) fn url_keys(&self) -> Vec<(&'static str, &str, &'static [&'static str])> {
        [
            ("model.base_url", self.model.base_url.as_str(), HTTP),
            ("tts.url", &self.tts.url, HTTP),
        ]
        .into_iter()
        .chain(self.channels.url_keys())
        .filter(|(_, value, _)| !value.trim().is_empty())
        .collect()
    }

    /// Checks every URL-valued key of the file: `Err((key, message))` names the first bad one.
    pub(crate) fn check_urls(&self) -> Result<(), (String, String)> {
        for (key, value, schemes) in self.url_keys() {
            check(value, schemes).map_err(|message| (key.to_owned(), message))?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_url_needs_a_host_and_an_allowed_scheme() {
        assert_eq!(check("http://127.0.0.1:11434/v1", HTTP), Ok(()));
        assert_eq!(check(" https://api.openai.com/v1 ", HTTP), Ok(()));
        assert_eq!(check("ws://127.0.0.1:9/gateway", WEBSOCKET), Ok(()));
        let err = check("localhost:11434/v1", HTTP).unwrap_err();
        assert_eq!(
            err,
            "\"localhost:11434/v1\" must start with http:// or https://; write it with its \
             scheme, e.g. \"http://localhost:11434/v1\""
        );
        let err = check("127.0.0.1:11434", HTTP).unwrap_err();
        assert!(
            err.starts_with("\"127.0.0.1:11434\" is not a URL ("),
            "{err}"
        );
        assert!(err.ends_with("e.g. \"http://127.0.0.1:11434\""), "{err}");
        let err = check("https://gateway.discord.gg", WEBSOCKET).unwrap_err();
        assert!(err.ends_with("must start with wss:// or ws://"), "{err}");
        assert!(!err.contains("e.g."), "{err}");
        assert_eq!(
            check("http://", HTTP).unwrap_err(),
            "\"http://\" is not a URL (empty host)"
        );
        assert!(check("file:///tmp/x", HTTP).is_err());
    }
}
