//! Files the bot sends: `sendPhoto`, `sendDocument` and `sendVoice` as multipart uploads
//! (a file given by `file_id` or URL instead is refused: the fake only takes uploads). Each
//! becomes a bot message with the file's Bot API object and its caption, and its bytes are
//! kept for the test to read ([`FakeTelegram::uploads`](super::FakeTelegram::uploads)).

use serde_json::{Value, json};
use tokio::time::Instant;

use super::body::{self, FilePart, Params};
use super::reply::{ApiError, ApiResult};
use super::state::{Shared, Stored, bot_user};

/// Longest caption the Bot API takes.
pub const CAPTION_LIMIT: usize = 1024;

/// A file the bot sent, as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The chat it went to.
    pub chat_id: i64,
    /// The message it made.
    pub message_id: i64,
    /// The method, lowercase (`sendphoto`, `senddocument`, `sendvoice`).
    pub method: String,
    /// The file name the client gave.
    pub file_name: String,
    /// The part's content type, if any.
    pub mime_type: Option<String>,
    /// The bytes, whole.
    pub bytes: Vec<u8>,
    /// Its caption, if any.
    pub caption: Option<String>,
    /// The forum topic it went to.
    pub thread_id: Option<i64>,
}

/// The file field of each upload method.
fn field_of(method: &str) -> Option<&'static str> {
    match method {
        "sendphoto" => Some("photo"),
        "senddocument" => Some("document"),
        "sendvoice" => Some("voice"),
        _ => None,
    }
}

/// Whether `method` (lowercase) is one of the upload methods.
pub(crate) fn is_upload(method: &str) -> bool {
    field_of(method).is_some()
}

/// `sendPhoto` / `sendDocument` / `sendVoice` with the file uploaded in `files`.
pub(crate) fn send_file(
    shared: &Shared,
    method: &str,
    params: &Params,
    files: &[FilePart],
) -> ApiResult {
    let field = field_of(method).ok_or_else(ApiError::not_found)?;
    let chat_id = body::chat_id(params)?;
    let thread = body::int(params, "message_thread_id")?;
    let caption = body::string(params, "caption").filter(|c| !c.is_empty());
    if caption
        .as_ref()
        .is_some_and(|c| c.chars().count() > CAPTION_LIMIT)
    {
        return Err(ApiError::bad_request("message caption is too long"));
    }
    let file = files
        .iter()
        .find(|f| f.field == field)
        .ok_or_else(|| ApiError::bad_request(&format!("there is no {field} in the request")))?;
    if file.bytes.is_empty() {
        return Err(ApiError::bad_request("file must be non-empty"));
    }
    let mut state = shared.lock();
    if state.failing_uploads.contains(&file.file_name) {
        return Err(ApiError::new(500, "Internal Server Error"));
    }
    let chat = state
        .chats
        .get(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let thread = chat.bot_thread(thread, false)?;
    let group = chat.spec.is_group_like();
    state
        .limiter
        .admit(chat_id, group, Instant::now())
        .map_err(ApiError::too_many_requests)?;
    let chat = state
        .chats
        .get_mut(&chat_id)
        .ok_or_else(ApiError::chat_not_found)?;
    let id = chat.allocate_id();
    let mut json = chat.message_json(id, bot_user(), "", None, thread, None);
    if let Some(map) = json.as_object_mut() {
        map.remove("text");
    }
    json[field] = file_object(field, id, file);
    if let Some(caption) = &caption {
        json["caption"] = json!(caption);
    }
    let mut stored =
        Stored::from_user(json.clone(), caption.as_deref().unwrap_or(""), thread, None);
    stored.from_bot = true;
    chat.messages.insert(id, stored);
    state.uploads.push(Upload {
        chat_id,
        message_id: id,
        method: method.to_owned(),
        file_name: file.file_name.clone(),
        mime_type: file.mime_type.clone(),
        bytes: file.bytes.clone(),
        caption,
        thread_id: thread,
    });
    drop(state);
    shared.touch();
    Ok(json)
}

/// The Bot API object of an uploaded file (`photo` is an array of sizes).
fn file_object(field: &str, id: i64, file: &FilePart) -> Value {
    let file_id = format!("up-{id}-{}", file.bytes.len());
    let size = file.bytes.len();
    match field {
        "photo" => json!([{
            "file_id": file_id, "file_unique_id": format!("u{id}"),
            "width": 800, "height": 600, "file_size": size,
        }]),
        "voice" => json!({
            "file_id": file_id, "file_unique_id": format!("u{id}"), "duration": 1,
            "mime_type": file.mime_type.clone().unwrap_or_else(|| "audio/ogg".into()),
            "file_size": size,
        }),
        _ => json!({
            "file_id": file_id, "file_unique_id": format!("u{id}"),
            "file_name": file.file_name, "mime_type": file.mime_type, "file_size": size,
        }),
    }
}
