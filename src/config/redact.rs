//! A copy of the configuration fit to print: secrets replaced by `<set>`.

use super::Config;

/// What a secret that is set is shown as.
pub const REDACTED: &str = "<set>";

impl Config {
    /// This configuration with every token, key and secret that is set replaced by
    /// [`REDACTED`] (empty ones stay empty, so "not set" still shows), including the values of
    /// coding agents' `env` tables and of MCP servers' `env` and `headers` (and their URLs'
    /// secrets).
    pub fn redacted(&self) -> Config {
        let mut copy = self.clone();
        let hide = |value: &mut String| {
            if !value.trim().is_empty() {
                *value = REDACTED.to_owned();
            }
        };
        hide(&mut copy.model.api_key);
        copy.channels.redact(&hide);
        hide(&mut copy.rpc.token);
        hide(&mut copy.media.transcribe_api_key);
        hide(&mut copy.tts.api_key);
        hide(&mut copy.tools.web.search.api_key);
        for provider in copy.providers.values_mut() {
            hide(&mut provider.api_key);
            provider.api_keys.iter_mut().for_each(hide);
            provider.headers.values_mut().for_each(hide);
            provider.base_url = redact_url(&provider.base_url, false);
        }
        for harness in copy.acp.agents.values_mut() {
            harness.env.values_mut().for_each(hide);
        }
        for server in copy.mcp.servers.values_mut() {
            server.env.values_mut().for_each(hide);
            server.headers.values_mut().for_each(hide);
            server.url = redact_url(&server.url, false);
        }
        copy.model.base_url = redact_url(&copy.model.base_url, false);
        copy.media.transcribe_url = redact_url(&copy.media.transcribe_url, false);
        copy.tts.url = redact_url(&copy.tts.url, false);
        copy.store.url = redact_url(&copy.store.url, false);
        copy.tools.web.search.base_url = redact_url(&copy.tools.web.search.base_url, false);
        copy
    }
}

/// [`redact_url`] for text the URL parser refuses.
fn redact_unparsed(raw: &str) -> String {
    if raw.contains("://") || raw.contains('@') || raw.contains('\'') {
        return "<hidden>".to_owned();
    }
    raw.split_whitespace()
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `raw` fit to print: a user and password become `***@`, a query `?***`, and with
/// `hide_path` (a webhook, whose path is often its secret) the path `/***`. Text that is no
/// URL is shown with every `password=` value hidden (a PostgreSQL key=value string), or as
/// `<hidden>` when it holds `@`, `://` (a URL the parser refuses, say with several hosts) or a
/// quote (a quoted value may hold spaces).
pub fn redact_url(raw: &str, hide_path: bool) -> String {
    let Ok(mut url) = url::Url::parse(raw) else {
        return redact_unparsed(raw);
    };
    let mut changed = false;
    if !url.username().is_empty() || url.password().is_some() {
        url.set_username("***").ok();
        url.set_password(None).ok();
        changed = true;
    }
    if url.query().is_some() {
        url.set_query(Some("***"));
        changed = true;
    }
    if hide_path && url.path() != "/" {
        url.set_path("/***");
        changed = true;
    }
    // Unchanged text stays exactly as written (parsing would add a trailing `/`).
    if changed {
        url.to_string()
    } else {
        raw.to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    #[test]
    fn key_value_strings_and_unparsed_urls_hide_their_password() {
        use super::redact_url;
        assert_eq!(
            redact_url("host=db user=chela password=s3cret dbname=chela", false),
            "host=db user=chela password=*** dbname=chela"
        );
        assert_eq!(
            redact_url("postgres://u:pw@h1:5432,h2:5432/db", false),
            "<hidden>"
        );
        assert_eq!(redact_url("host=db password='a b'", false), "<hidden>");
        assert_eq!(redact_url("host=db", false), "host=db");
    }

    use super::*;

    #[test]
    fn secrets_are_hidden_and_the_rest_kept() {
        let text = "[model]\napi_key = \"sk-123\"\nmodel = \"llama3.2\"\n\
                    [channels.telegram]\ntoken = \"1:tg\"\nwebhook_secret = \"whsec-9\"\n\
                    [channels.discord]\ntoken = \"dc\"\n[rpc]\ntoken = \"rpc\"\n\
                    [acp.agents.x]\ncommand = [\"x\"]\nenv = { API_KEY = \"k\" }\n\
                    [tools.web.search]\nprovider = \"brave\"\napi_key = \"BSA-brave\"\n\
                    [mcp.servers.m]\ncommand = \"m\"\nenv = { M_KEY = \"mcp-env\" }\n\
                    [mcp.servers.h]\nurl = \"https://h.example/mcp?key=mcp-url\"\n\
                    headers = { Authorization = \"Bearer mcp-header\" }\n\
                    [tts]\nurl = \"https://tts.example/v1\"\napi_key = \"sk-tts\"\n";
        let config = Config::from_toml_str(text, "c.toml", &|_| None).unwrap();
        let shown = toml::to_string(&config.redacted()).unwrap();
        for secret in [
            "sk-123",
            "1:tg",
            "whsec-9",
            "\"dc\"",
            "\"rpc\"",
            "\"k\"",
            "BSA-brave",
            "mcp-env",
            "mcp-url",
            "mcp-header",
            "sk-tts",
        ] {
            assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
        }
        assert!(shown.contains("api_key = \"<set>\""), "{shown}");
        assert!(shown.contains("model = \"llama3.2\""), "{shown}");
        assert!(shown.contains("API_KEY = \"<set>\""), "{shown}");
        // Secrets inside URLs too.
        assert_eq!(
            redact_url("https://me:pw@example.com/v1?key=abc", false),
            "https://***@example.com/v1?***"
        );
        assert_eq!(
            redact_url("https://bot.example.com/tg/s3cret", true),
            "https://bot.example.com/***"
        );
        assert_eq!(
            redact_url("http://localhost:11434/v1", false),
            "http://localhost:11434/v1"
        );
        // Unset secrets stay empty; the printed text parses back.
        let shown = toml::to_string(&Config::default().redacted()).unwrap();
        assert!(shown.contains("api_key = \"\""), "{shown}");
        assert_eq!(
            Config::from_toml_str(&shown, "c.toml", &|_| None).unwrap(),
            Config::default()
        );
    }
}
