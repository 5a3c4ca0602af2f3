//! The HTTP side: `/bot{token}/{method}` with any HTTP method, token check, parameter parsing,
//! call recording and dispatch by case-insensitive method name.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::body::{self, Params};
use super::reply::{self, ApiError, ApiResult};
use super::state::{Shared, TOKEN};
use super::types::RecordedCall;
use super::{messages, misc, updates};

/// The routes of the fake Bot API: everything goes through one handler.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// Splits `/bot{token}/{method}` (extra leading slashes allowed) into token and method.
fn split_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.trim_start_matches('/').strip_prefix("bot")?;
    let (token, method) = rest.split_once('/')?;
    (!method.is_empty() && !method.contains('/')).then_some((token, method))
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    if let Some(rest) = uri.path().strip_prefix("/file/bot") {
        return match rest.split_once('/') {
            Some((token, _)) if token != TOKEN => ApiError::unauthorized().into_response(),
            Some((_, path)) => match super::files::download(&shared, path) {
                Some(data) => data.into_response(),
                None => ApiError::not_found().into_response(),
            },
            None => ApiError::not_found().into_response(),
        };
    }
    let Some((token, method)) = split_path(uri.path()) else {
        return ApiError::not_found().into_response();
    };
    if token != TOKEN {
        return ApiError::unauthorized().into_response();
    }
    let method = method.to_ascii_lowercase();
    let parsed = body::parse(&headers, uri.query(), &bytes);
    let recorded = match &parsed {
        Ok((params, files)) => {
            let mut recorded = params.clone();
            for file in files {
                // The file's name and size stand for it in the record; the bytes are kept
                // with the upload.
                recorded.insert(
                    file.field.clone(),
                    json!({"file_name": file.file_name, "size": file.bytes.len()}),
                );
            }
            Value::Object(recorded)
        }
        Err(_) => json!(String::from_utf8_lossy(&bytes)),
    };
    shared.lock().calls.push(RecordedCall {
        method: method.clone(),
        body: recorded,
    });
    let fault = shared.lock().faults.draw(&method);
    shared.touch();
    if let Some(fault) = fault.filter(|f| *f != super::faults::Fault::AnswerLost) {
        return fault.response();
    }
    let result = match parsed {
        Ok((params, files)) if super::uploads::is_upload(&method) => {
            super::uploads::send_file(&shared, &method, &params, &files)
        }
        Ok((params, files)) if !files.is_empty() => {
            let _ = params;
            Err(ApiError::bad_request(
                "file uploads are not supported by the fake for this method",
            ))
        }
        Ok((params, _)) => dispatch(&shared, &method, &params).await,
        Err(error) => Err(error),
    };
    if let Some(lost) = fault {
        // Carried out; the answer never arrives.
        return lost.response();
    }
    let raw_texts = shared.lock().raw_texts.clone();
    match result {
        Ok(value) if !raw_texts.is_empty() => reply::ok_raw(value, &raw_texts),
        Ok(value) => reply::ok(value),
        Err(error) => error.into_response(),
    }
}

async fn dispatch(shared: &Arc<Shared>, method: &str, params: &Params) -> ApiResult {
    match method {
        "getme" => misc::get_me(),
        "getfile" => super::files::get_file(shared, params),
        "getupdates" => updates::get_updates(shared, params).await,
        "sendmessage" => messages::send_message(shared, params),
        "editmessagetext" => messages::edit_message_text(shared, params),
        "deletemessage" => messages::delete_message(shared, params),
        "sendchataction" => misc::send_chat_action(shared, params),
        "setmycommands" => misc::set_my_commands(shared, params),
        "getmycommands" => misc::get_my_commands(shared, params),
        "deletemycommands" => misc::delete_my_commands(shared, params),
        "createforumtopic" => misc::create_forum_topic(shared, params),
        "getchatmember" => misc::get_chat_member(shared, params),
        "setwebhook" => misc::set_webhook(shared, params),
        "deletewebhook" => misc::delete_webhook(shared, params),
        "getwebhookinfo" => misc::get_webhook_info(shared),
        "answercallbackquery" => Ok(json!(true)),
        "setmessagereaction" => super::actions::set_message_reaction(shared, params),
        "pinchatmessage" => super::actions::pin_chat_message(shared, params),
        "sendpoll" => super::actions::send_poll(shared, params),
        _ => Err(ApiError::not_found()),
    }
}
