//! Telegram media -> [`Attachment`]s, and the download URL of a file (`getFile`).

use chela_channel::{Attachment, AttachmentKind};
use teloxide::types::{FileMeta, Message};

/// The files of `message`: the largest size of a photo, a document, a voice note, an audio
/// file, a video (an animation or a round video note counts as one) or a sticker.
pub fn attachments(message: &Message) -> Vec<Attachment> {
    let one = |kind, file: &FileMeta, mime: Option<String>, name: Option<&String>| Attachment {
        kind,
        file_ref: file.id.0.clone(),
        mime_type: mime,
        // Telegram fills in u32::MAX when it gave no size.
        size: (file.size != u32::MAX).then_some(u64::from(file.size)),
        file_name: name.cloned(),
    };
    let mut out = Vec::new();
    if let Some(largest) = message.photo().and_then(|sizes| {
        sizes
            .iter()
            .max_by_key(|p| u64::from(p.width) * u64::from(p.height))
    }) {
        out.push(one(
            AttachmentKind::Image,
            &largest.file,
            Some("image/jpeg".into()),
            None,
        ));
    }
    if let Some(d) = message.document() {
        let m = d.mime_type.as_ref().map(|m| m.essence_str().to_owned());
        let kind = if m.as_deref().is_some_and(|m| m.starts_with("image/")) {
            AttachmentKind::Image
        } else {
            AttachmentKind::Document
        };
        out.push(one(kind, &d.file, m, d.file_name.as_ref()));
    }
    if let Some(v) = message.voice() {
        let m = v
            .mime_type
            .as_ref()
            .map(|m| m.essence_str().to_owned())
            .or_else(|| Some("audio/ogg".into()));
        out.push(one(AttachmentKind::Voice, &v.file, m, None));
    }
    if let Some(a) = message.audio() {
        out.push(one(
            AttachmentKind::Audio,
            &a.file,
            a.mime_type.as_ref().map(|m| m.essence_str().to_owned()),
            a.file_name.as_ref(),
        ));
    }
    if let Some(v) = message.video() {
        out.push(one(
            AttachmentKind::Video,
            &v.file,
            v.mime_type.as_ref().map(|m| m.essence_str().to_owned()),
            v.file_name.as_ref(),
        ));
    }
    if let Some(a) = message.animation() {
        out.push(one(
            AttachmentKind::Video,
            &a.file,
            a.mime_type.as_ref().map(|m| m.essence_str().to_owned()),
            a.file_name.as_ref(),
        ));
    }
    if let Some(v) = message.video_note() {
        out.push(one(
            AttachmentKind::Video,
            &v.file,
            Some("video/mp4".into()),
            None,
        ));
    }
    if let Some(s) = message.sticker() {
        let m = if s.is_video() {
            "video/webm"
        } else if s.is_animated() {
            "application/x-tgsticker"
        } else {
            "image/webp"
        };
        out.push(one(AttachmentKind::Sticker, &s.file, Some(m.into()), None));
    }
    out
}

/// The download URL of the file at `file_path` (from `getFile`): `{api}/file/bot{token}/{path}`.
pub fn file_url(api_url: &str, token: &str, file_path: &str) -> String {
    format!(
        "{}/file/bot{token}/{}",
        api_url.trim_end_matches('/'),
        file_path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(extra: serde_json::Value) -> Message {
        let mut json = serde_json::json!({
            "message_id": 5,
            "date": 1_700_000_000,
            "chat": {"id": 42, "type": "private", "first_name": "Ann"},
            "from": {"id": 42, "is_bot": false, "first_name": "Ann"},
        });
        if let (Some(map), Some(more)) = (json.as_object_mut(), extra.as_object()) {
            map.extend(more.clone());
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_photo_is_its_largest_size() {
        let m = message(serde_json::json!({
            "caption": "look",
            "photo": [
                {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 60, "file_size": 100},
                {"file_id": "big", "file_unique_id": "b", "width": 1280, "height": 853, "file_size": 90000},
                {"file_id": "mid", "file_unique_id": "m", "width": 320, "height": 213, "file_size": 9000}
            ]
        }));
        let got = attachments(&m);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, AttachmentKind::Image);
        assert_eq!(got[0].file_ref, "big");
        assert_eq!(got[0].size, Some(90000));
        assert_eq!(got[0].mime_type.as_deref(), Some("image/jpeg"));
    }

    #[test]
    fn documents_voice_and_stickers_keep_their_kind_name_and_type() {
        let doc = message(serde_json::json!({"document": {
            "file_id": "d", "file_unique_id": "du", "file_name": "report.pdf",
            "mime_type": "application/pdf", "file_size": 31_457_280
        }}));
        let got = &attachments(&doc)[0];
        assert_eq!(got.kind, AttachmentKind::Document);
        assert_eq!(got.file_name.as_deref(), Some("report.pdf"));
        assert_eq!(got.mime_type.as_deref(), Some("application/pdf"));
        let png = message(serde_json::json!({"document": {
            "file_id": "p", "file_unique_id": "pu", "mime_type": "image/png"
        }}));
        assert_eq!(attachments(&png)[0].kind, AttachmentKind::Image);
        assert_eq!(attachments(&png)[0].size, None);
        let voice = message(serde_json::json!({"voice": {
            "file_id": "v", "file_unique_id": "vu", "duration": 3, "file_size": 4000,
            "mime_type": "audio/ogg"
        }}));
        assert_eq!(attachments(&voice)[0].kind, AttachmentKind::Voice);
        assert_eq!(
            attachments(&voice)[0].mime_type.as_deref(),
            Some("audio/ogg")
        );
    }

    #[test]
    fn the_file_url_carries_the_token_and_path() {
        assert_eq!(
            file_url("http://h:1/", "1:T", "photos/file_0.jpg"),
            "http://h:1/file/bot1:T/photos/file_0.jpg"
        );
    }
}
