//! Environment variables that override or fill config keys, and the checks of their values
//! (an error names the variable, since the file is not at fault).

use std::path::Path;

use super::urls::{self, HTTP, WEBSOCKET};
use super::{Config, ConfigError, ProviderKind};

/// The variables that override a key of the file when set and not empty, with the key.
pub const ENV_OVERRIDES: &[(&str, &str)] = &[
    ("CHELA_STORE_PATH", "store.path"),
    ("CHELA_STORE_URL", "store.url"),
    ("CHELA_STORE_ENGINE", "store.engine"),
    ("CHELA_MODEL", "model.model"),
    ("CHELA_TELEGRAM_API_URL", "channels.telegram.api_url"),
    ("CHELA_DISCORD_API_URL", "channels.discord.api_url"),
    ("CHELA_DISCORD_GATEWAY_URL", "channels.discord.gateway_url"),
    ("CHELA_SLACK_API_URL", "channels.slack.api_url"),
    ("CHELA_RPC_LISTEN", "rpc.listen"),
];

impl Config {
    /// Applies the environment overrides read through `lookup` (`CHELA_*`, the bot tokens)
    /// and checks the URL-valued ones, and the provider's base URL variable when
    /// `model.base_url` is empty (`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`).
    pub(crate) fn apply_env(
        &mut self,
        lookup: &dyn Fn(&str) -> Option<String>,
        home: Option<&Path>,
    ) -> Result<(), ConfigError> {
        let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let url = |name: &str, schemes: &[&str]| match set(name) {
            Some(value) => urls::check(&value, schemes)
                .map(|()| Some(value))
                .map_err(|message| ConfigError::Env {
                    name: name.to_owned(),
                    message,
                }),
            None => Ok(None),
        };
        self.channels.tokens_from_env(lookup);
        let telegram = &mut self.channels.telegram;
        if let Some(value) = url("CHELA_TELEGRAM_API_URL", HTTP)? {
            telegram.api_url = value;
        }
        let discord = &mut self.channels.discord;
        if let Some(value) = url("CHELA_DISCORD_API_URL", HTTP)? {
            discord.api_url = value;
        }
        if let Some(value) = url("CHELA_DISCORD_GATEWAY_URL", WEBSOCKET)? {
            discord.gateway_url = value;
        }
        if let Some(value) = url("CHELA_SLACK_API_URL", HTTP)? {
            self.channels.slack.api_url = value;
        }
        if self.model.base_url.trim().is_empty() {
            // Read by the provider at start; a bad value would fail every model call.
            match self.model.provider {
                ProviderKind::OpenAi | ProviderKind::Responses => {
                    url("OPENAI_BASE_URL", HTTP).map(drop)?
                }
                ProviderKind::Anthropic => url("ANTHROPIC_BASE_URL", HTTP).map(drop)?,
                ProviderKind::Echo => {}
            }
        }
        if let Some(model) = set("CHELA_MODEL") {
            self.model.model = model;
        }
        let rpc = &mut self.rpc;
        if rpc.token.is_empty() {
            rpc.token = lookup("CHELA_RPC_TOKEN").unwrap_or_default();
        }
        if let Some(listen) = lookup("CHELA_RPC_LISTEN") {
            // Set but empty turns the RPC off, as `listen = ""` does.
            rpc.listen = listen;
        }
        if let Some(url) = set("CHELA_STORE_URL") {
            self.store.url = url;
            self.store.url_from_env = true;
        }
        if let Some(engine) = set("CHELA_STORE_ENGINE") {
            self.store.engine =
                super::StoreEngine::parse(&engine).ok_or_else(|| ConfigError::Env {
                    name: "CHELA_STORE_ENGINE".to_owned(),
                    message: format!("{engine:?} is not a store engine: use redb, sled or auto"),
                })?;
            self.store.engine_from_env = true;
        }
        if let Some(store) = set("CHELA_STORE_PATH") {
            // Relative to the current directory, like any path given in a shell.
            let path = super::expand_home(Path::new(&store), home);
            self.store.path = std::path::absolute(&path).unwrap_or(path);
        }
        Ok(())
    }
}
