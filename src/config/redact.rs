//! A copy of the configuration fit to print: secrets replaced by `<set>`.

use super::Config;

/// What a secret that is set is shown as.
pub const REDACTED: &str = "<set>";

impl Config {
    /// This configuration with every token, key and secret that is set replaced by
    /// [`REDACTED`] (empty ones stay empty, so "not set" still shows), including the values of
    /// coding agents' `env` tables.
    pub fn redacted(&self) -> Config {
        let mut copy = self.clone();
        let hide = |value: &mut String| {
            if !value.trim().is_empty() {
                *value = REDACTED.to_owned();
            }
        };
        hide(&mut copy.model.api_key);
        hide(&mut copy.channels.telegram.token);
        hide(&mut copy.channels.telegram.webhook_secret);
        hide(&mut copy.channels.discord.token);
        hide(&mut copy.rpc.token);
        for harness in copy.acp.agents.values_mut() {
            harness.env.values_mut().for_each(hide);
        }
        copy
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_and_the_rest_kept() {
        let text = "[model]\napi_key = \"sk-123\"\nmodel = \"llama3.2\"\n\
                    [channels.telegram]\ntoken = \"1:tg\"\nwebhook_secret = \"whsec-9\"\n\
                    [channels.discord]\ntoken = \"dc\"\n[rpc]\ntoken = \"rpc\"\n\
                    [acp.agents.x]\ncommand = [\"x\"]\nenv = { API_KEY = \"k\" }\n";
        let config = Config::from_toml_str(text, "c.toml", &|_| None).unwrap();
        let shown = toml::to_string(&config.redacted()).unwrap();
        for secret in ["sk-123", "1:tg", "whsec-9", "\"dc\"", "\"rpc\"", "\"k\""] {
            assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
        }
        assert!(shown.contains("api_key = \"<set>\""), "{shown}");
        assert!(shown.contains("model = \"llama3.2\""), "{shown}");
        assert!(shown.contains("API_KEY = \"<set>\""), "{shown}");
        // Unset secrets stay empty; the printed text parses back.
        let shown = toml::to_string(&Config::default().redacted()).unwrap();
        assert!(shown.contains("api_key = \"\""), "{shown}");
        assert_eq!(
            Config::from_toml_str(&shown, "c.toml", &|_| None).unwrap(),
            Config::default()
        );
    }
}
