//! Files the bot sends: a message with one attachment (multipart `files[0]` and
//! `payload_json`), the caption as its content, with a nonce and `enforce_nonce` like every
//! send: a keyed send (a final's file) derives its nonce from the key, so the same file sent
//! again after a restart is answered with the first message. Each attempt streams the file
//! from its open handle again (never whole in memory).

use chela_channel::{ChannelError, Conversation, OutboundFile, SentMessage};
use serde_json::{Value, json};

use super::{DiscordChannel, SEND_ATTEMPTS, nonce, sent, target};

/// Longest caption: the message content limit.
pub(crate) const CAPTION_LIMIT: usize = super::MAX_CHARS;

impl DiscordChannel {
    /// Sends `file` into `to` with `caption` as the message's content (see the module doc).
    pub(crate) async fn send_file_once(
        &self,
        to: &Conversation,
        file: &OutboundFile,
        caption: Option<&str>,
        key: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        let channel = target(to)?;
        let limit = self.settings.max_upload_bytes;
        if file.size() > limit {
            return Err(ChannelError::Rejected(format!(
                "{} is {} MiB; this Discord bot attaches files up to {} MiB \
                 (channels.discord.upload_mb)",
                file.file_name(),
                file.size().div_ceil(1024 * 1024),
                limit / (1024 * 1024)
            )));
        }
        let caption: String = caption.unwrap_or("").chars().take(CAPTION_LIMIT).collect();
        let Some(key) = key else {
            let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_string();
            return self
                .create_file(channel.get(), file, &caption, &nonce)
                .await
                .map(sent);
        };
        for round in 0..nonce::KEYED_ROUNDS {
            let since = nonce::snowflake_now();
            let nonce = nonce::derive(key, round);
            let id = self
                .create_file(channel.get(), file, &caption, &nonce)
                .await?;
            if id >= since || self.still_there(channel, id).await {
                return Ok(sent(id));
            }
            tracing::info!(
                message = id,
                "discord: a resent file's nonce answered with a deleted message; sending it anew"
            );
        }
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_string();
        self.create_file(channel.get(), file, &caption, &nonce)
            .await
            .map(sent)
    }

    /// One upload with `nonce`, tried again on transport errors with the same nonce.
    async fn create_file(
        &self,
        channel: u64,
        file: &OutboundFile,
        caption: &str,
        nonce: &str,
    ) -> Result<u64, ChannelError> {
        let payload = payload(file.file_name(), caption, nonce);
        let mut attempt = 0;
        loop {
            let created = self.rest.create_with_file(channel, &payload, file).await;
            match created {
                Ok(id) => return Ok(id),
                Err(error) => {
                    attempt += 1;
                    if !matches!(error, ChannelError::Transport(_)) || attempt >= SEND_ATTEMPTS {
                        return Err(error);
                    }
                    tracing::debug!(error = %error, "discord upload failed; retrying with the same nonce");
                }
            }
        }
    }
}

/// The `payload_json` of a message carrying one file named `name`.
fn payload(name: &str, caption: &str, nonce: &str) -> Value {
    json!({
        "content": caption,
        "nonce": nonce,
        "enforce_nonce": true,
        "allowed_mentions": {"parse": []},
        "attachments": [{"id": 0, "filename": name}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_names_the_file_and_enforces_the_nonce() {
        let p = payload("chart.png", "here", "k123");
        assert_eq!(p["attachments"][0]["filename"], "chart.png");
        assert_eq!(p["attachments"][0]["id"], 0);
        assert_eq!(p["enforce_nonce"], true);
        assert_eq!(p["nonce"], "k123");
        assert_eq!(p["content"], "here");
    }
}
