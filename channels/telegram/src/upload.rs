//! Files the bot sends: `sendPhoto` for pictures, `sendVoice` for ogg/opus voice notes,
//! `sendDocument` for anything else (and for pictures over Telegram's 10 MB photo limit), each
//! a multipart upload with an optional caption of at most 1,024 characters.

use chela_channel::{AttachmentKind, ChannelError, Conversation, OutboundFile, SentMessage};
use reqwest::multipart::{Form, Part};
use serde_json::json;

use super::api::Api;

/// Longest caption Telegram takes, in characters.
pub(crate) const CAPTION_LIMIT: usize = 1024;
/// Largest file a bot may upload.
pub(crate) const MAX_UPLOAD_BYTES: u64 = 50 * 1024 * 1024;
/// Largest picture `sendPhoto` takes; bigger ones go as documents.
const MAX_PHOTO_BYTES: u64 = 10 * 1024 * 1024;

/// The Bot API method and its file field for `file` of `size` bytes.
pub(crate) fn method_for(file: &OutboundFile, size: u64) -> (&'static str, &'static str) {
    match file.kind {
        AttachmentKind::Image if size <= MAX_PHOTO_BYTES => ("sendPhoto", "photo"),
        AttachmentKind::Voice => ("sendVoice", "voice"),
        _ => ("sendDocument", "document"),
    }
}

/// Uploads `file` into `to` (topic `topic`, if any) with `caption` under it.
pub(crate) async fn send_file(
    api: &Api,
    to: &Conversation,
    topic: Option<i32>,
    file: &OutboundFile,
    caption: Option<&str>,
) -> Result<SentMessage, ChannelError> {
    let bytes = tokio::fs::read(&file.path)
        .await
        .map_err(|e| ChannelError::Rejected(format!("cannot read {}: {e}", file.path.display())))?;
    let size = bytes.len() as u64;
    if size > MAX_UPLOAD_BYTES {
        return Err(ChannelError::Rejected(format!(
            "{} is {} MB; Telegram takes files up to 50 MB",
            file.file_name(),
            size.div_ceil(1024 * 1024)
        )));
    }
    let (method, field) = method_for(file, size);
    let part = Part::bytes(bytes)
        .file_name(file.file_name())
        .mime_str(file.mime_type())
        .map_err(|e| ChannelError::Rejected(e.to_string()))?;
    let mut form = Form::new()
        .text("chat_id", to.chat_id.clone())
        .part(field, part);
    if let Some(topic) = topic {
        form = form.text("message_thread_id", topic.to_string());
    }
    if let Some(caption) = caption.filter(|c| !c.trim().is_empty()) {
        let caption: String = caption.chars().take(CAPTION_LIMIT).collect();
        form = form.text("caption", caption);
    }
    let sent = api
        .call_multipart(method, form)
        .await
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
        let photo = OutboundFile::at("a.png".into());
        assert_eq!(method_for(&photo, 1000), ("sendPhoto", "photo"));
        assert_eq!(
            method_for(&photo, MAX_PHOTO_BYTES + 1),
            ("sendDocument", "document"),
            "a picture too big for sendPhoto goes as a document"
        );
        let voice = OutboundFile::at("v.ogg".into());
        assert_eq!(method_for(&voice, 1000), ("sendVoice", "voice"));
        let doc = OutboundFile::at("r.pdf".into());
        assert_eq!(method_for(&doc, 1000), ("sendDocument", "document"));
    }
}
