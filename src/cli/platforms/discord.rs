//! Discord (`chela-discord`, on serenity): messages, threads, DMs, slash commands, shards.

use std::sync::Arc;

use chela::config::Config;
use chela_channel::Channel;

use super::{Platform, Verdict};

/// Discord's entry.
pub(super) const PLATFORM: Platform = Platform {
    name: "discord",
    title: "Discord",
    token_env: "DISCORD_BOT_TOKEN",
    configured: |config| !config.channels.discord.token.trim().is_empty(),
    build,
    check: |config| {
        let discord = &config.channels.discord;
        Box::pin(discord_me(&discord.api_url, discord.token.trim()))
    },
};

/// The Discord channel of `config`.
fn build(config: &Config) -> Result<Arc<dyn Channel>, String> {
    let discord = &config.channels.discord;
    Ok(chela_discord::DiscordChannel::new(
        chela_discord::DiscordSettings {
            token: discord.token.trim().to_string(),
            api_url: discord.api_url.clone(),
            gateway_url: discord.gateway_url.clone(),
            account: discord.account.clone(),
            stream_previews: discord.streaming != chela::config::Streaming::Off,
            block_streaming: discord.streaming == chela::config::Streaming::Block,
            guilds: discord.guilds.clone(),
            channels: discord.channels.clone(),
            admin_roles: discord.admin_roles.clone(),
            max_upload_bytes: discord.upload_mb.saturating_mul(1024 * 1024),
            shards: discord.shard_count(),
        },
    ))
}

/// Asks the Discord REST API who the token belongs to (`GET /api/v10/users/@me`).
async fn discord_me(api_url: &str, token: &str) -> Verdict {
    let client = match super::http_client() {
        Ok(c) => c,
        Err(e) => return (false, e),
    };
    let base = match api_url.trim().trim_end_matches('/') {
        "" => chela_discord::DEFAULT_API_URL,
        base => base,
    };
    let url = format!("{base}/api/v10/users/@me");
    let request = client
        .get(&url)
        .header(reqwest::header::AUTHORIZATION, format!("Bot {token}"));
    match request.send().await {
        Ok(resp) if resp.status().is_success() => {
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            let name = body["username"].as_str().unwrap_or("?");
            let id = body["id"].as_str().unwrap_or("?");
            (true, format!("@{name} (id {id})"))
        }
        Ok(resp) if resp.status().as_u16() == 401 => (
            false,
            "Discord refused the token; copy it again from the Developer Portal (Bot, Reset Token)"
                .into(),
        ),
        Ok(resp) => (false, format!("{url} answered {}", resp.status())),
        Err(_) => (
            false,
            format!("cannot reach {base}; check channels.discord.api_url and the network"),
        ),
    }
}
