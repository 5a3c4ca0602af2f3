//! Files both ways. In: a message's files are fetched from their `url_private_download` with
//! the bot token, so only URLs on Slack's file host (or the configured API's own host, a
//! local fake) are handed out with it. Out: `files.getUploadURLExternal`, the bytes streamed
//! from the open file to the upload URL, then `files.completeUploadExternal` shares the file
//! into the conversation (its thread too) with the caption as its comment.

use chela_channel::{ChannelError, Conversation, OutboundFile, SentMessage};
use serde_json::json;

use crate::api::Api;

/// Where Slack serves the files people upload (a remote file's URL, which can point
/// anywhere, is never fetched).
pub const FILE_HOST: &str = "https://files.slack.com/files-pri/";
/// Where Slack's slash-command `response_url`s point.
pub const HOOKS_HOST: &str = "https://hooks.slack.com/";

/// Whether `url` may be given the bot token or sent an answer: on one of Slack's `hosts`,
/// or, for a stand-in API on this machine (a local fake), on its own origin.
pub fn trusted(url: &str, api_base: &str, hosts: &[&str]) -> bool {
    if hosts.iter().any(|host| url.starts_with(host)) {
        return true;
    }
    // An API origin is no file host: a URL there with the bot token would be a Web API
    // call made for whoever chose the URL. Only a stand-in API on this machine (a local
    // fake) serves its files on its own origin.
    let base = api_base.trim().to_ascii_lowercase();
    let local = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
    if !local.iter().any(|prefix| base.starts_with(prefix)) {
        return false;
    }
    let origin = |u: &str| {
        let rest_at = u.find("://")? + 3;
        let end = u[rest_at..].find('/').map_or(u.len(), |i| rest_at + i);
        Some(u[..end].to_ascii_lowercase())
    };
    matches!((origin(url), origin(api_base)), (Some(a), Some(b)) if a == b && !url[a.len()..].starts_with('@'))
}

/// Uploads `file` and shares it into `to` with `caption`; the id of the shared file (Slack
/// posts the message that carries it on its own, so there is no message id to give).
pub async fn send(
    api: &Api,
    to: &Conversation,
    file: &OutboundFile,
    caption: Option<&str>,
    limit: u64,
) -> Result<SentMessage, ChannelError> {
    if file.size() > limit {
        return Err(ChannelError::Rejected(format!(
            "{} is {} MiB; this Slack bot sends files up to {} MiB (channels.slack.upload_mb)",
            file.file_name(),
            file.size().div_ceil(1024 * 1024),
            limit / (1024 * 1024)
        )));
    }
    let params = [
        ("filename", file.file_name().to_string()),
        ("length", file.size().to_string()),
    ];
    let slot = api.get("files.getUploadURLExternal", &params).await?;
    let (Some(url), Some(id)) = (slot["upload_url"].as_str(), slot["file_id"].as_str()) else {
        return Err(ChannelError::Rejected(
            "files.getUploadURLExternal gave no upload URL".into(),
        ));
    };
    upload(url, file).await?;
    let mut body = json!({
        "files": [{ "id": id, "title": file.file_name() }],
        "channel_id": to.chat_id,
    });
    if let Some(thread) = &to.thread_id {
        body["thread_ts"] = json!(thread);
    }
    if let Some(caption) = caption.filter(|c| !c.trim().is_empty()) {
        body["initial_comment"] = json!(crate::markup::to_mrkdwn(caption));
    }
    api.post("files.completeUploadExternal", &body).await?;
    Ok(SentMessage {
        message_id: format!("file:{id}"),
    })
}

/// Streams the file's bytes to the upload URL Slack gave.
async fn upload(url: &str, file: &OutboundFile) -> Result<(), ChannelError> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ChannelError::Transport(e.to_string()))?;
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, file.mime_type())
        .header(reqwest::header::CONTENT_LENGTH, file.size())
        .body(reqwest::Body::wrap_stream(file.chunks()))
        .send()
        .await
        .map_err(|e| ChannelError::Transport(e.without_url().to_string()))?;
    match response.status() {
        s if s.is_success() => Ok(()),
        s if s.as_u16() == 429 || s.is_server_error() => {
            Err(ChannelError::Transport(format!("the upload answered {s}")))
        }
        s => Err(ChannelError::Rejected(format!("the upload answered {s}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bot_token_goes_only_to_slack_or_the_configured_api() {
        let api = "http://127.0.0.1:4000/api";
        assert!(trusted(
            "https://files.slack.com/files-pri/T1-F1/a.png",
            "https://slack.com/api",
            &[FILE_HOST]
        ));
        assert!(trusted(
            "http://127.0.0.1:4000/files/F1/a.png",
            api,
            &[FILE_HOST]
        ));
        for real in [
            "https://slack.com",
            "https://slack.com/api",
            "https://slack-gov.com/api",
        ] {
            let call = format!("{real}/conversations.history");
            assert!(!trusted(&call, real, &[FILE_HOST]), "{real}");
        }
        assert!(
            !trusted(
                "https://slack.com/api/conversations.history?channel=D9",
                "https://slack.com/api",
                &[FILE_HOST]
            ),
            "Slack's API is no file host"
        );
        assert!(!trusted(
            "https://files.slack.com/files-tmb/x",
            "https://slack.com/api",
            &[FILE_HOST]
        ));
        for bad in [
            "https://files.slack.com.evil.test/x",
            "http://127.0.0.1:4001/files/F1",
            "http://127.0.0.1:40000/files/F1",
            "https://evil.test/?https://files.slack.com/",
            "http://127.0.0.1:4000@evil.test/x",
        ] {
            assert!(!trusted(bad, api, &[FILE_HOST]), "{bad}");
        }
    }
}
