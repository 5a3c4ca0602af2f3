//! Files the bot sends: `sendPhoto` for pictures, `sendVoice` for ogg/opus voice notes,
//! `sendDocument` for anything else (and for pictures over Telegram's 10 MB photo limit), each
//! a multipart upload streamed from the file's open handle, with an optional caption of at
//! most 1,024 characters (HTML, like the text of messages) and a timeout that grows with the
//! file's size.

use std::time::Duration;

use chela_channel::{AttachmentKind, ChannelError, Conversation, OutboundFile, SentMessage};
use reqwest::multipart::{Form, Part};
use serde_json::json;

use teloxide::ApiError;

use super::api::{Api, CallError};

/// Longest caption Telegram takes, in characters.
pub(crate) const CAPTION_LIMIT: usize = 1024;
/// Largest file a bot may upload.
pub(crate) const MAX_UPLOAD_BYTES: u64 = 50 * 1024 * 1024;
/// Largest picture `sendPhoto` takes; bigger ones go as documents.
const MAX_PHOTO_BYTES: u64 = 10 * 1024 * 1024;
/// An upload's timeout: this much ...
const UPLOAD_BASE_TIMEOUT: Duration = Duration::from_secs(40);
/// ... plus a second per this many bytes (a slow uplink of 256 KB/s still gets through).
const UPLOAD_BYTES_PER_SECOND: u64 = 256 * 1024;

/// The Bot API method and its file field for a file of `kind` and `size` bytes.
pub(crate) fn method_for(kind: AttachmentKind, size: u64) -> (&'static str, &'static str) {
    match kind {
        AttachmentKind::Image if size <= MAX_PHOTO_BYTES => ("sendPhoto", "photo"),
        AttachmentKind::Voice => ("sendVoice", "voice"),
        _ => ("sendDocument", "document"),
    }
}

/// How long an upload of `size` bytes may take, answer included.
pub(crate) fn timeout_for(size: u64) -> Duration {
    UPLOAD_BASE_TIMEOUT + Duration::from_secs(size.div_ceil(UPLOAD_BYTES_PER_SECOND))
}

/// Uploads `file` into `to` (topic `topic`, if any) with `caption` (HTML) under it.
pub(crate) async fn send_file(
    api: &Api,
    to: &Conversation,
    topic: Option<i32>,
    file: &OutboundFile,
    caption: Option<&str>,
) -> Result<SentMessage, ChannelError> {
    let size = file.size();
    if size > MAX_UPLOAD_BYTES {
        return Err(ChannelError::Rejected(format!(
            "{} is {} MB; Telegram takes files up to 50 MB",
            file.file_name(),
            size.div_ceil(1024 * 1024)
        )));
    }
    let (method, field) = method_for(file.kind, size);
    let form = |caption: Option<(String, bool)>| -> Result<Form, ChannelError> {
        let body = reqwest::Body::wrap_stream(file.chunks());
        let part = Part::stream_with_length(body, size)
            .file_name(file.file_name().to_owned())
            .mime_str(file.mime_type())
            .map_err(|e| ChannelError::Rejected(e.to_string()))?;
        let mut form = Form::new()
            .text("chat_id", to.chat_id.clone())
            .part(field, part);
        if let Some(topic) = topic {
            form = form.text("message_thread_id", topic.to_string());
        }
        if let Some((caption, html)) = caption {
            form = form.text("caption", caption);
            if html {
                form = form.text("parse_mode", "HTML");
            }
        }
        Ok(form)
    };
    let caption = caption.filter(|c| !c.trim().is_empty());
    let timeout = timeout_for(size);
    let html = caption.map(|c| (super::format::to_html(c), true));
    let sent = match api.call_multipart(method, form(html)?, timeout).await {
        // The caption as plain text when Telegram cannot parse its HTML.
        Err(CallError::Api(ApiError::CantParseEntities(_))) => {
            let plain = caption.map(|c| (c.to_owned(), false));
            api.call_multipart(method, form(plain)?, timeout).await
        }
        other => other,
    }
    .map_err(ChannelError::from)?;
    match sent["message_id"].as_i64() {
        Some(id) => Ok(SentMessage {
            message_id: id.to_string(),
        }),
        None => Err(ChannelError::Transport(format!(
            "{method} answered without a message_id: {}",
            json!(sent)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_goes_through_its_method() {
        let photo = AttachmentKind::Image;
        assert_eq!(method_for(photo, 1000), ("sendPhoto", "photo"));
        assert_eq!(
            method_for(photo, MAX_PHOTO_BYTES + 1),
            ("sendDocument", "document"),
            "a picture too big for sendPhoto goes as a document"
        );
        assert_eq!(
            method_for(AttachmentKind::Voice, 1000),
            ("sendVoice", "voice")
        );
        assert_eq!(
            method_for(AttachmentKind::Document, 1000),
            ("sendDocument", "document")
        );
    }

    #[test]
    fn an_uploads_timeout_grows_with_the_file() {
        assert_eq!(timeout_for(0), UPLOAD_BASE_TIMEOUT);
        assert_eq!(
            timeout_for(MAX_UPLOAD_BYTES),
            UPLOAD_BASE_TIMEOUT + Duration::from_secs(200),
            "50 MB at 256 KB/s"
        );
    }
}
