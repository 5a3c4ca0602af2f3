//! Webhook mode: Telegram POSTs updates to chela's own listener. An update is acknowledged
//! (HTTP 200) only once the sink made it durable; on failure Telegram retries it and dedupe
//! drops the copy. Requests without the right `X-Telegram-Bot-Api-Secret-Token` are refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use chela_channel::{ChannelError, InboundSink};
use teloxide::payloads::SetWebhookSetters;
use teloxide::prelude::*;
use teloxide::types::{AllowedUpdate, Me, Update, UpdateKind};
use tokio_util::sync::CancellationToken;

use crate::errors::channel_error;
use crate::normalize::normalize;
use crate::poll::pause;

/// The header Telegram puts the secret token in.
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Where Telegram should deliver updates and where chela listens for them.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// The public URL given to `setWebhook` (its path is served).
    pub url: String,
    /// The local address to listen on (e.g. behind a reverse proxy).
    pub listen: SocketAddr,
    /// The secret Telegram sends back with every update.
    pub secret: String,
}

struct Hook {
    me: Me,
    account: String,
    secret: String,
    sink: Arc<dyn InboundSink>,
}

/// Registers the webhook and serves updates until `shutdown`.
pub async fn serve(
    bot: &Bot,
    me: Me,
    account: &str,
    settings: &WebhookSettings,
    sink: Arc<dyn InboundSink>,
    shutdown: CancellationToken,
) -> Result<(), ChannelError> {
    let url = reqwest::Url::parse(&settings.url)
        .map_err(|_| ChannelError::Rejected(format!("bad webhook url {}", settings.url)))?;
    let path = url.path().to_string();
    let Some(listener) = bind_when_free(settings.listen, &shutdown).await else {
        return Ok(());
    };
    if !register(bot, url, &settings.secret, &shutdown).await? {
        return Ok(());
    }
    tracing::info!(listen = %settings.listen, path = %path, "telegram webhook registered");
    let hook = Arc::new(Hook {
        me,
        account: account.to_string(),
        secret: settings.secret.clone(),
        sink,
    });
    let app = axum::Router::new()
        .route(&path, post(receive))
        .with_state(hook);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| ChannelError::Transport(e.to_string()))
}

/// Binds `listen`, trying again with backoff while the address is taken (another process
/// or an old socket may still hold it): a node without its listener would look healthy
/// and take nothing. `None` when shutdown fired first.
async fn bind_when_free(
    listen: SocketAddr,
    shutdown: &CancellationToken,
) -> Option<tokio::net::TcpListener> {
    let mut backoff = Duration::from_millis(500);
    loop {
        match tokio::net::TcpListener::bind(listen).await {
            Ok(listener) => return Some(listener),
            Err(e) => tracing::warn!(
                listen = %listen,
                error = %e,
                "telegram webhook: cannot listen yet; retrying"
            ),
        }
        if pause(&mut backoff, shutdown).await {
            return None;
        }
    }
}

/// Calls `setWebhook`, trying again with backoff on rate limits and transport errors; a
/// refusal (a bad URL, say) is returned. `Ok(false)` when shutdown fired first.
async fn register(
    bot: &Bot,
    url: reqwest::Url,
    secret: &str,
    shutdown: &CancellationToken,
) -> Result<bool, ChannelError> {
    let mut backoff = Duration::from_millis(500);
    loop {
        let set = bot
            .set_webhook(url.clone())
            .secret_token(secret.to_string())
            .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery])
            .await
            .map_err(channel_error);
        match set {
            Ok(_) => return Ok(true),
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "telegram setWebhook failed; retrying")
            }
            Err(e) => return Err(e),
        }
        if pause(&mut backoff, shutdown).await {
            return Ok(false);
        }
    }
}

async fn receive(
    State(hook): State<Arc<Hook>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let secret = headers.get(SECRET_HEADER).and_then(|v| v.to_str().ok());
    if secret != Some(hook.secret.as_str()) {
        tracing::warn!("telegram webhook: request without the right secret token refused");
        return StatusCode::UNAUTHORIZED;
    }
    let update: Update = match serde_json::from_slice(&body) {
        Ok(update) => update,
        Err(e) => {
            // An update whose id is readable but whose content is not is skipped: refused,
            // Telegram would deliver it again and hold the later ones.
            if let Some(id) = crate::narrow::update_id(&body) {
                let error = e.to_string();
                crate::narrow::count_skipped(hook.sink.as_ref(), &hook.account, id, &error).await;
                return StatusCode::OK;
            }
            tracing::warn!(error = %e, "telegram webhook: not an update");
            return StatusCode::BAD_REQUEST;
        }
    };
    if let UpdateKind::CallbackQuery(query) = &update.kind
        && let Some(press) = crate::press::press(query, &hook.account)
    {
        hook.sink.press(press).await;
        return StatusCode::OK;
    }
    let UpdateKind::Message(message) = &update.kind else {
        return StatusCode::OK;
    };
    let Some(inbound) = normalize(message, &hook.me, &hook.account) else {
        return StatusCode::OK;
    };
    match hook.sink.accept(inbound).await {
        Ok(()) => StatusCode::OK,
        Err(e) => {
            // Not durable: Telegram will deliver it again.
            tracing::error!(error = %e, "telegram webhook: inbound not accepted");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_listener_is_bound_once_its_address_is_free() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let binding = tokio::spawn(async move { bind_when_free(addr, &stop).await });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(
            !binding.is_finished(),
            "the wait ended while the address was taken"
        );
        drop(taken);
        let listener = binding
            .await
            .unwrap()
            .expect("bound once the address was free");
        assert_eq!(listener.local_addr().unwrap(), addr);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_the_wait_for_a_taken_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let addr = taken.local_addr().unwrap();
        let binding = tokio::spawn(async move { bind_when_free(addr, &stop).await });
        tokio::time::sleep(Duration::from_secs(3)).await;
        shutdown.cancel();
        assert!(binding.await.unwrap().is_none());
    }
}
