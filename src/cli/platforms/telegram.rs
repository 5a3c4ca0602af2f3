//! Telegram (`chela-telegram`, on teloxide): long polling or a webhook.

use std::sync::Arc;

use chela::config::Config;
use chela_channel::Channel;

use super::{Platform, Verdict};

/// Telegram's entry.
pub(super) const PLATFORM: Platform = Platform {
    name: "telegram",
    title: "Telegram",
    token_env: "TELEGRAM_BOT_TOKEN",
    configured: |config| !config.channels.telegram.token.trim().is_empty(),
    build,
    check: |config| {
        let telegram = &config.channels.telegram;
        Box::pin(telegram_me(&telegram.api_url, telegram.token.trim()))
    },
};

/// The Telegram channel of `config`.
fn build(config: &Config) -> Result<Arc<dyn Channel>, String> {
    let telegram = &config.channels.telegram;
    let settings = chela_telegram::TelegramSettings {
        token: telegram.token.trim().to_string(),
        api_url: telegram.api_url.clone(),
        account: telegram.account.clone(),
        poll_timeout_s: u32::try_from(telegram.poll_timeout_s).unwrap_or(25),
        stream_previews: telegram.streaming != chela::config::Streaming::Off,
        block_streaming: telegram.streaming == chela::config::Streaming::Block,
        webhook: webhook(telegram)?,
    };
    let channel = chela_telegram::TelegramChannel::new(settings).map_err(|e| e.to_string())?;
    Ok(channel)
}

/// Webhook settings when `webhook_url` is set.
fn webhook(
    telegram: &chela::config::TelegramConfig,
) -> Result<Option<chela_telegram::webhook::WebhookSettings>, String> {
    if telegram.webhook_url.trim().is_empty() {
        return Ok(None);
    }
    let listen = telegram.webhook_listen.parse().map_err(|_| {
        format!(
            "channels.telegram.webhook_listen: {:?} is not an address like 127.0.0.1:8787",
            telegram.webhook_listen
        )
    })?;
    let secret = match telegram.webhook_secret.trim() {
        "" => uuid::Uuid::new_v4().simple().to_string(),
        s if s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
        {
            s.to_string()
        }
        _ => {
            return Err(
                "channels.telegram.webhook_secret: only A-Z, a-z, 0-9, _ and - are allowed".into(),
            );
        }
    };
    Ok(Some(chela_telegram::webhook::WebhookSettings {
        url: telegram.webhook_url.trim().to_string(),
        listen,
        secret,
    }))
}

/// Asks the Bot API who the token belongs to.
async fn telegram_me(api_url: &str, token: &str) -> Verdict {
    let client = match super::http_client() {
        Ok(c) => c,
        Err(e) => return (false, e),
    };
    let url = format!("{}/bot{token}/getMe", api_url.trim_end_matches('/'));
    match client.post(&url).send().await {
        Ok(resp) if resp.status().is_success() => {
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            let name = body["result"]["username"].as_str().unwrap_or("?");
            let privacy = if body["result"]["can_read_all_group_messages"] == true {
                "privacy mode off: sees every group message"
            } else {
                "privacy mode on: in groups it sees only commands, mentions and replies"
            };
            (true, format!("@{name} ({privacy})"))
        }
        Ok(resp) if resp.status().as_u16() == 401 || resp.status().as_u16() == 404 => (
            false,
            "the Bot API refused the token; copy it again from @BotFather".into(),
        ),
        Ok(resp) => (false, format!("getMe answered {}", resp.status())),
        Err(_) => (
            false,
            format!("cannot reach {api_url}; check channels.telegram.api_url and the network"),
        ),
    }
}
