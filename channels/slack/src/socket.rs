//! Socket Mode: slack-morphism opens the connections (`apps.connections.open`), keeps them
//! alive with pings and reconnects; chela reads each frame itself ([`Frames`]), so an event
//! is acknowledged only once it is stored, and a frame nobody can read is acknowledged and
//! skipped instead of coming back. Each `hello` starts a catch-up; the connection that said
//! it last is the one the channel counts as up (a late word about an older one is ignored).

use std::sync::{Arc, OnceLock, Weak};

use serde_json::{Value, json};
use slack_morphism::clients_manager::{
    SlackSocketModeClientsManager, SlackSocketModeClientsManagerFactory,
};

use slack_morphism::listener::SlackClientEventsListenerEnvironment;
use slack_morphism::{
    SlackApiToken, SlackApiTokenValue, SlackClientSocketModeConfig, SlackSocketModeClientListener,
    SlackSocketModeWssClientId,
};

use crate::api::Api;
use crate::commands::Commands;
use crate::intake::Intake;

/// The connections' manager.
pub type Manager = Arc<dyn SlackSocketModeClientsManager + Send + Sync>;

/// Reads Socket Mode frames.
pub struct Frames {
    intake: Intake,
    commands: Commands,
    manager: OnceLock<Weak<dyn SlackSocketModeClientsManager + Send + Sync>>,
}

/// Starts Socket Mode with the app-level token `app_token`, handing frames to `intake`;
/// the manager, to shut it down.
pub async fn start(
    api: &Api,
    app_token: &str,
    intake: Intake,
    commands: Commands,
) -> Result<Manager, String> {
    let environment = Arc::new(SlackClientEventsListenerEnvironment::new(api.client()));
    let manager = api
        .client()
        .http_api
        .connector
        .new_clients_manager(environment);
    let frames = Arc::new(Frames {
        intake,
        commands,
        manager: OnceLock::new(),
    });
    let _ = frames.manager.set(Arc::downgrade(&manager));
    // One connection: Slack spreads events over every open one, and a second would only
    // take events out of order.
    let config = SlackClientSocketModeConfig::new()
        .with_max_connections_count(1)
        .with_initial_backoff_in_seconds(1)
        .with_reconnect_timeout_in_seconds(5);
    let token = SlackApiToken::new(SlackApiTokenValue::new(app_token.to_string()));
    manager
        .register_new_token(&config, token, frames)
        .await
        .map_err(|e| e.to_string())?;
    manager.start().await;
    Ok(manager)
}

impl Frames {
    async fn restart(&self, id: &SlackSocketModeWssClientId) {
        self.intake.state.gone(&id.to_string());
        if let Some(manager) = self.manager.get().and_then(Weak::upgrade) {
            manager.restart_client(id).await;
        }
    }

    /// What one frame asks: whether to acknowledge it, and with what payload.
    async fn handle(&self, id: &SlackSocketModeWssClientId, frame: &Value) -> Option<Value> {
        match frame["type"].as_str() {
            Some("hello") => {
                tracing::info!("slack connected");
                self.intake.state.hello(&id.to_string());
                crate::catch_up::start(&self.intake);
                None
            }
            Some("disconnect") => {
                self.restart(id).await;
                None
            }
            Some("events_api") => {
                let event = &frame["payload"]["event"];
                let handled = match event["type"].as_str() {
                    Some("message") => {
                        // At most until the deadline counted from the catch-up's start:
                        // this reader also reads pings, and Slack wants an ack within 3 s.
                        self.intake
                            .state
                            .catch_up()
                            .wait(crate::catch_up::HOLD)
                            .await;
                        let channel_type = event["channel_type"].as_str().unwrap_or("channel");
                        self.intake.take(event, channel_type).await.acknowledged()
                    }
                    _ => true,
                };
                handled.then(|| json!({}))
            }
            Some("interactive") => {
                self.commands.press(&frame["payload"]).await;
                Some(json!({}))
            }
            Some("slash_commands") => self
                .commands
                .command(&frame["payload"])
                .await
                .then(|| json!({})),
            _ => Some(json!({})),
        }
    }
}

#[async_trait::async_trait]
impl SlackSocketModeClientListener for Frames {
    async fn on_message(&self, id: &SlackSocketModeWssClientId, body: String) -> Option<String> {
        let Ok(frame) = serde_json::from_str::<Value>(&body) else {
            tracing::warn!("an undecodable Socket Mode frame was skipped");
            return None;
        };
        let envelope = frame["envelope_id"].as_str().map(str::to_string);
        let payload = self.handle(id, &frame).await?;
        let envelope = envelope?;
        let mut ack = json!({ "envelope_id": envelope });
        if payload.as_object().is_some_and(|p| !p.is_empty()) {
            ack["payload"] = payload;
        }
        Some(ack.to_string())
    }

    async fn on_error(&self, error: Box<dyn std::error::Error + Send + Sync + 'static>) {
        tracing::warn!(error = %error, "Slack Socket Mode");
    }

    async fn on_disconnect(&self, id: &SlackSocketModeWssClientId) {
        self.restart(id).await;
    }
}
