//! Files users send: [`FakeTelegram::user_sends_file`] queues a photo, document, voice note,
//! audio, video or sticker message; `getFile` answers its `file_path` (400 `Bad Request:
//! file is too big` above 20 MB, as the real API does for bots) and
//! `GET /file/bot{token}/{file_path}` serves its bytes.

use serde_json::{Value, json};

use super::FakeTelegram;
use super::body::{self, Params};
use super::reply::{ApiError, ApiResult};
use super::state::{Shared, Stored};
use super::types::{ChatKind, ChatSpec, UserSpec};

/// The most a bot may download through `getFile` (20 MB).
pub const GET_FILE_LIMIT: usize = 20 * 1024 * 1024;

/// What kind of file a user sends (the message field it goes into).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `photo`: sizes of one picture (the fake sends a thumbnail and the full size).
    Photo,
    /// `document`: any file.
    Document,
    /// `voice`: a voice note (`audio/ogg`).
    Voice,
    /// `audio`: a music file.
    Audio,
    /// `video`.
    Video,
    /// `sticker` (a static `image/webp` one).
    Sticker,
}

/// A file a user sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// Which kind.
    pub kind: FileKind,
    /// Its bytes (the size the message declares is their length).
    pub data: Vec<u8>,
    /// The sender's file name (documents, audio, video).
    pub file_name: Option<String>,
    /// MIME type (documents, audio, video, voice).
    pub mime_type: Option<String>,
}

impl FileSpec {
    /// A photo with `data` as its full size.
    pub fn photo(data: Vec<u8>) -> FileSpec {
        FileSpec {
            kind: FileKind::Photo,
            data,
            file_name: None,
            mime_type: None,
        }
    }

    /// A document `name` of type `mime`.
    pub fn document(name: &str, mime: &str, data: Vec<u8>) -> FileSpec {
        FileSpec {
            kind: FileKind::Document,
            data,
            file_name: Some(name.to_owned()),
            mime_type: Some(mime.to_owned()),
        }
    }
}

/// A file the fake holds, by `file_id`.
#[derive(Debug, Clone)]
pub(crate) struct StoredFile {
    pub(crate) path: String,
    pub(crate) data: Vec<u8>,
}

impl FakeTelegram {
    /// `from` sends `file` in `chat` with `caption` (empty: none): queues a `message` update
    /// carrying the file; returns the message id.
    pub fn user_sends_file(
        &self,
        chat: ChatSpec,
        from: UserSpec,
        caption: &str,
        file: FileSpec,
    ) -> i64 {
        let mut chat = chat;
        if chat.kind == ChatKind::Private {
            chat.first_name
                .get_or_insert_with(|| from.first_name.clone());
        }
        let mut state = self.shared.lock();
        let n = state.files.len();
        let file_id = format!("file-{n}");
        let size = file.data.len();
        let meta =
            json!({"file_id": file_id, "file_unique_id": format!("u{n}"), "file_size": size});
        let field = media_json(&file, meta);
        state.files.insert(
            file_id.clone(),
            StoredFile {
                path: format!("{}/file_{n}", folder(file.kind)),
                data: file.data,
            },
        );
        let chat = state.upsert_chat(chat);
        let id = chat.allocate_id();
        let mut json = chat.message_json(id, from.to_json(), "", None, None, None);
        if let Some(map) = json.as_object_mut() {
            map.remove("text");
            if !caption.is_empty() {
                map.insert("caption".into(), json!(caption));
            }
            map.insert(field.0.into(), field.1);
        }
        chat.messages
            .insert(id, Stored::from_user(json.clone(), caption, None, None));
        state.push_update("message", json);
        drop(state);
        self.shared.new_update.notify_waiters();
        self.shared.touch();
        id
    }

    /// How many times a file was downloaded (`GET /file/bot{token}/...`).
    pub fn file_downloads(&self) -> usize {
        self.shared.lock().file_downloads
    }
}

fn folder(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Photo => "photos",
        FileKind::Document => "documents",
        FileKind::Voice => "voice",
        FileKind::Audio => "music",
        FileKind::Video => "videos",
        FileKind::Sticker => "stickers",
    }
}

/// The message field and its JSON for `file` (`meta`: id, unique id, size).
fn media_json(file: &FileSpec, meta: Value) -> (&'static str, Value) {
    let with = |extra: Value| {
        let mut v = meta.clone();
        if let (Some(map), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
            map.extend(extra.clone());
        }
        v
    };
    let named = json!({"file_name": file.file_name, "mime_type": file.mime_type});
    match file.kind {
        FileKind::Photo => {
            let thumb = json!({"file_id": "thumb", "file_unique_id": "thumb", "width": 90, "height": 60, "file_size": 10});
            (
                "photo",
                json!([thumb, with(json!({"width": 1280, "height": 853}))]),
            )
        }
        FileKind::Document => ("document", with(named)),
        FileKind::Voice => (
            "voice",
            with(
                json!({"duration": 3, "mime_type": file.mime_type.clone().unwrap_or_else(|| "audio/ogg".into())}),
            ),
        ),
        FileKind::Audio => (
            "audio",
            with(json!({"duration": 3, "file_name": file.file_name, "mime_type": file.mime_type})),
        ),
        FileKind::Video => (
            "video",
            with(
                json!({"duration": 3, "width": 640, "height": 480, "file_name": file.file_name, "mime_type": file.mime_type}),
            ),
        ),
        FileKind::Sticker => (
            "sticker",
            with(
                json!({"type": "regular", "width": 512, "height": 512, "is_animated": false, "is_video": false}),
            ),
        ),
    }
}

/// `getFile`.
pub(crate) fn get_file(shared: &Shared, params: &Params) -> ApiResult {
    let id =
        body::string(params, "file_id").ok_or_else(|| ApiError::bad_request("file_id is empty"))?;
    let state = shared.lock();
    let file = state
        .files
        .get(&id)
        .ok_or_else(|| ApiError::bad_request("invalid file_id"))?;
    if file.data.len() > GET_FILE_LIMIT {
        return Err(ApiError::bad_request("file is too big"));
    }
    Ok(json!({
        "file_id": id,
        "file_unique_id": format!("u-{id}"),
        "file_size": file.data.len(),
        "file_path": file.path,
    }))
}

/// The bytes of the file at `path` (`/file/bot{token}/{file_path}`), if any.
pub(crate) fn download(shared: &Shared, path: &str) -> Option<Vec<u8>> {
    let mut state = shared.lock();
    state.file_downloads += 1;
    state
        .files
        .values()
        .find(|f| f.path == path)
        .map(|f| f.data.clone())
}
