//! Files: the bot's uploads (`files.getUploadURLExternal`, `POST /upload/{file_id}`,
//! `files.completeUploadExternal`) and downloads of files users sent (`GET
//! /files/{id}/{name}`, which needs the bot token as Slack's `url_private` does).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde_json::{Value, json};

use super::json::{self, BOT_TOKEN, BOT_USER};
use super::messages::Stored;
use super::multipart;
use super::params::Params;
use super::state::{FileRec, Shared};
use super::web::{ApiResult, bearer};

/// `files.getUploadURLExternal`: reserves a file id and its upload URL.
pub(crate) fn get_upload_url(shared: &Shared, params: &Params) -> ApiResult {
    let name = params.nonempty("filename").ok_or("invalid_arguments")?;
    let length = params.u64("length").ok_or("invalid_arguments")?;
    let mut state = shared.lock();
    let id = state.next_file_id();
    let file = FileRec {
        id: id.clone(),
        title: name.clone(),
        mimetype: json::mimetype(&name).to_owned(),
        name,
        bytes: None,
        length,
        user: BOT_USER.to_owned(),
    };
    state.files.insert(id.clone(), file);
    let upload_url = format!("{}/upload/{id}", shared.base_url);
    Ok(json!({ "upload_url": upload_url, "file_id": id }))
}

/// `POST /upload/{file_id}`: the bytes, raw or as the file part of a multipart form.
pub(crate) async fn upload(
    State(shared): State<Arc<Shared>>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let bytes = match multipart::parse(content_type, &body) {
        Some(parts) => {
            let file = parts
                .iter()
                .position(|p| p.filename.is_some())
                .or_else(|| (!parts.is_empty()).then_some(0));
            file.map(|i| parts[i].content.clone()).unwrap_or_default()
        }
        None => body.to_vec(),
    };
    let len = bytes.len();
    let stored = {
        let mut state = shared.lock();
        match state.files.get_mut(&file_id) {
            Some(file) => {
                file.bytes = Some(bytes);
                true
            }
            None => false,
        }
    };
    shared.touch();
    if stored {
        format!("OK - {len}").into_response()
    } else {
        (StatusCode::NOT_FOUND, "file not found").into_response()
    }
}

/// `files.completeUploadExternal`: finishes uploads; with `channel_id` (or `channels`) posts
/// one message of the bot carrying them, with `initial_comment` as its text.
pub(crate) fn complete_upload(shared: &Shared, params: &Params) -> ApiResult {
    let entries = match params.json("files") {
        Some(Value::Array(entries)) if !entries.is_empty() => entries,
        _ => return Err("invalid_arguments"),
    };
    let mut state = shared.lock();
    let mut ids = Vec::new();
    for entry in &entries {
        let id = entry["id"].as_str().unwrap_or_default();
        let uploaded = state.files.get(id).is_some_and(|f| f.bytes.is_some());
        if !uploaded {
            return Err("file_not_found");
        }
        ids.push((id.to_owned(), entry["title"].as_str().map(str::to_owned)));
    }
    let channel = params.nonempty("channel_id").or_else(|| {
        let channels = params.text("channels");
        channels
            .split(',')
            .next()
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
    });
    let target = match channel {
        Some(channel) => {
            let channel = state.resolve_channel(&channel)?;
            let thread_ts = match params.nonempty("thread_ts") {
                Some(ts) => Some(state.thread_root(&channel, &ts)?),
                None => None,
            };
            Some((channel, thread_ts))
        }
        None => None,
    };
    let mut answer = Vec::new();
    for (id, title) in &ids {
        if let Some(file) = state.files.get_mut(id) {
            if let Some(title) = title {
                file.title.clone_from(title);
            }
            answer.push(json!({ "id": file.id, "name": file.name, "title": file.title }));
        }
    }
    if let Some((channel, thread_ts)) = target {
        let message = Stored {
            user: BOT_USER.to_owned(),
            text: params.text("initial_comment"),
            thread_ts,
            files: ids.into_iter().map(|(id, _)| id).collect(),
            subtype: Some("file_share".to_owned()),
            from_bot: true,
            ..Stored::default()
        };
        state.store_and_dispatch(&channel, message);
    }
    Ok(json!({ "files": answer }))
}

/// `GET /files/{id}/{name}`: the bytes with `Authorization: Bearer xoxb-test`, else 403 with
/// an HTML page (what Slack serves a browser that is not signed in); 404 for unknown files.
pub(crate) async fn download(
    State(shared): State<Arc<Shared>>,
    Path((id, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if bearer(&headers).as_deref() != Some(BOT_TOKEN) {
        let page = "<!DOCTYPE html><html><head><title>Slack</title></head>\
                    <body>Sign in to Fake Slack to see this file.</body></html>";
        return (StatusCode::FORBIDDEN, Html(page)).into_response();
    }
    let found = {
        let mut state = shared.lock();
        let file = state
            .files
            .get(&id)
            .filter(|f| f.name == name)
            .and_then(|f| f.bytes.clone().map(|b| (b, f.mimetype.clone())));
        if file.is_some() {
            state.downloads.push(id);
        }
        file
    };
    shared.touch();
    match found {
        Some((bytes, mimetype)) => ([(CONTENT_TYPE, mimetype)], bytes).into_response(),
        None => (StatusCode::NOT_FOUND, "file not found").into_response(),
    }
}
