//! [`SlackChannel`]: the [`Channel`] of Slack.

use std::sync::Arc;

use chela_channel::{
    Attachment, BoxFuture, Channel, ChannelError, ChatKind, Conversation, InboundSink, Limits,
    OutboundFile, PREVIEWS_OFF_MS, SentMessage,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::commands::Commands;
use crate::intake::Intake;
use crate::state::State;
use crate::{SlackSettings, emoji, files, markup, socket, start};

/// Longest message chela sends: Slack takes 40,000 characters but folds messages longer
/// than 4,000, so longer answers go in parts.
pub const MAX_CHARS: usize = 4_000;
/// Least time between two edits of one message (`chat.update` is Tier 3, about 50 a minute).
const EDIT_INTERVAL_MS: u64 = 1_200;

/// The Slack channel.
pub struct SlackChannel {
    settings: SlackSettings,
    api: Arc<Api>,
    state: Arc<State>,
}

impl SlackChannel {
    /// The channel of `settings` (nothing is asked of Slack before [`Channel::run`]).
    pub fn new(settings: SlackSettings) -> Arc<SlackChannel> {
        let api = Arc::new(Api::new(&settings.api_url, &settings.bot_token));
        Arc::new(SlackChannel {
            settings,
            api,
            state: Arc::new(State::default()),
        })
    }

    async fn post_message(
        &self,
        to: &Conversation,
        text: &str,
    ) -> Result<SentMessage, ChannelError> {
        let mut body = json!({ "channel": to.chat_id, "text": markup::to_mrkdwn(text) });
        if let Some(thread) = &to.thread_id {
            body["thread_ts"] = json!(thread);
        }
        let answer = self.api.post("chat.postMessage", &body).await?;
        message_ts(&answer)
    }
}

impl SlackChannel {
    /// The bot's workspace id: kept from `auth.test` at start, else asked now (on a cluster
    /// a node that does not run the intake never ran it); empty when Slack names none.
    async fn team(&self) -> Result<String, ChannelError> {
        if let Some(team) = self.state.team() {
            return Ok(team.to_string());
        }
        let me = self.api.post("auth.test", &json!({})).await?;
        let team = me["team_id"].as_str().unwrap_or_default().to_string();
        if team.is_empty() {
            tracing::warn!("slack: auth.test named no workspace; nobody counts as its admin");
        }
        self.state.set_team(&team);
        Ok(team)
    }
}

/// The `ts` of a posted message.
fn message_ts(answer: &Value) -> Result<SentMessage, ChannelError> {
    answer["ts"]
        .as_str()
        .map(|ts| SentMessage {
            message_id: ts.to_string(),
        })
        .ok_or_else(|| ChannelError::Rejected("Slack gave no message ts".into()))
}

/// A message id chela can edit: a posted message's `ts` (a shared file has none).
fn editable(message: &SentMessage) -> Result<&str, ChannelError> {
    match message.message_id.strip_prefix("file:") {
        Some(_) => Err(ChannelError::Unsupported("editing a file message")),
        None => Ok(&message.message_id),
    }
}

impl Channel for SlackChannel {
    fn name(&self) -> &str {
        "slack"
    }

    fn limits(&self) -> Limits {
        let interval = if self.settings.stream_previews {
            EDIT_INTERVAL_MS
        } else {
            PREVIEWS_OFF_MS
        };
        Limits {
            max_chars: MAX_CHARS,
            max_lines: None,
            edit_interval_ms: interval,
            group_edit_interval_ms: interval,
            threads: true,
        }
    }

    fn connected(&self) -> bool {
        self.state.connected()
    }

    fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            let Some((bot_user, team)) = start::who_am_i(&self.api, &shutdown).await? else {
                return Ok(());
            };
            self.state.set_bot_user(&bot_user);
            self.state.set_team(&team);
            if !start::app_token_taken(&self.api, &self.settings.app_token, &shutdown).await? {
                return Ok(());
            }
            let intake = Intake {
                sink,
                state: self.state.clone(),
                api: self.api.clone(),
                account: self.settings.account.clone(),
                channels: self.settings.channels.clone().into(),
            };
            let commands = Commands {
                intake: intake.clone(),
            };
            let manager = socket::start(&self.api, &self.settings.app_token, intake, commands)
                .await
                .map_err(ChannelError::Transport)?;
            shutdown.cancelled().await;
            manager.shutdown().await;
            self.state.disconnected();
            Ok(())
        })
    }

    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(self.post_message(to, text))
    }

    fn edit<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let ts = editable(message)?;
            let body = json!({ "channel": to.chat_id, "ts": ts, "text": markup::to_mrkdwn(text) });
            self.api.post("chat.update", &body).await.map(drop)
        })
    }

    fn delete<'a>(
        &'a self,
        to: &'a Conversation,
        message: &'a SentMessage,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let ts = editable(message)?;
            self.api
                .post("chat.delete", &json!({ "channel": to.chat_id, "ts": ts }))
                .await
                .map(drop)
        })
    }

    fn react<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
        emoji: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let name = emoji::name(emoji).map_err(ChannelError::Rejected)?;
            let body = json!({ "channel": to.chat_id, "timestamp": message_id, "name": name });
            match self.api.post("reactions.add", &body).await {
                Err(ChannelError::Rejected(code)) if code == "already_reacted" => Ok(()),
                other => other.map(drop),
            }
        })
    }

    fn pin<'a>(
        &'a self,
        to: &'a Conversation,
        message_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let body = json!({ "channel": to.chat_id, "timestamp": message_id });
            match self.api.post("pins.add", &body).await {
                Err(ChannelError::Rejected(code)) if code == "already_pinned" => Ok(()),
                other => other.map(drop),
            }
        })
    }

    fn block_streaming(&self) -> bool {
        self.settings.block_streaming
    }

    fn open_thread<'a>(
        &'a self,
        parent: &'a Conversation,
        title: &'a str,
    ) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        Box::pin(async move {
            let top = Conversation {
                thread_id: None,
                ..parent.clone()
            };
            let sent = self.post_message(&top, title).await?;
            Ok(Conversation {
                thread_id: Some(sent.message_id),
                ..parent.clone()
            })
        })
    }

    fn direct<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, Result<Conversation, ChannelError>> {
        Box::pin(async move {
            let answer = self
                .api
                .post("conversations.open", &json!({ "users": user_id }))
                .await?;
            let id = answer["channel"]["id"].as_str().ok_or_else(|| {
                ChannelError::Rejected("conversations.open gave no channel".into())
            })?;
            Ok(Conversation {
                channel: "slack".into(),
                account: self.settings.account.clone(),
                kind: ChatKind::Direct,
                chat_id: id.to_string(),
                thread_id: None,
            })
        })
    }

    fn is_admin<'a>(
        &'a self,
        _conversation: &'a Conversation,
        user_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, ChannelError>> {
        Box::pin(async move {
            let answer = self
                .api
                .get("users.info", &[("user", user_id.to_string())])
                .await?;
            let user = &answer["user"];
            // An admin of this workspace only: a Slack Connect guest's own org's flags, or a
            // restricted (guest) account, count for nothing here.
            let team = self.team().await?;
            let in_teams = |teams: &Value| {
                teams
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| *t == team.as_str()))
            };
            let ours = !team.is_empty()
                && (user["team_id"] == team.as_str()
                    || in_teams(&user["enterprise_user"]["teams"]));
            let guest = user["is_restricted"] == true || user["is_ultra_restricted"] == true;
            Ok(ours && !guest && (user["is_admin"] == true || user["is_owner"] == true))
        })
    }

    fn answer_command<'a>(
        &'a self,
        _to: &'a Conversation,
        interaction: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            if !files::trusted(interaction, self.api.base(), &[files::HOOKS_HOST]) {
                return Err(ChannelError::Rejected(
                    "a command's response_url is not Slack's".into(),
                ));
            }
            let body = json!({ "response_type": "ephemeral", "text": markup::to_mrkdwn(text) });
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| ChannelError::Transport(e.to_string()))?;
            let response = client
                .post(interaction)
                .json(&body)
                .send()
                .await
                .map_err(|e| ChannelError::Transport(e.without_url().to_string()))?;
            match response.status() {
                s if s.is_success() => Ok(()),
                s if s.as_u16() == 429 || s.is_server_error() => Err(ChannelError::Transport(
                    format!("response_url answered {s}"),
                )),
                s => Err(ChannelError::Rejected(format!("response_url answered {s}"))),
            }
        })
    }

    fn media_url<'a>(
        &'a self,
        attachment: &'a Attachment,
    ) -> BoxFuture<'a, Result<String, ChannelError>> {
        Box::pin(async move {
            if files::trusted(&attachment.file_ref, self.api.base(), &[files::FILE_HOST]) {
                Ok(attachment.file_ref.clone())
            } else {
                Err(ChannelError::Rejected(
                    "the file is not on Slack's file host".into(),
                ))
            }
        })
    }

    fn media_authorization(&self) -> Option<String> {
        Some(format!("Bearer {}", self.api.bot_token()))
    }

    fn caption_limit(&self) -> usize {
        MAX_CHARS
    }

    fn max_file_bytes(&self) -> Option<u64> {
        Some(self.settings.max_upload_bytes)
    }

    fn send_file<'a>(
        &'a self,
        to: &'a Conversation,
        file: &'a OutboundFile,
        caption: Option<&'a str>,
        key: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        let _ = key;
        Box::pin(files::send(
            &self.api,
            to,
            file,
            caption,
            self.settings.max_upload_bytes,
        ))
    }
}
