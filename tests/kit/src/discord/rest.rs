//! The HTTP side: the gateway upgrade at `/gateway`, and REST under `/api/v10` (any
//! `/api/vN` or bare `/api` prefix) with the bot token check, call recording and routing.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::body::{self, Body};
use super::error::{ApiError, ApiResult, Reply};
use super::json::{self, TOKEN};
use super::state::Shared;
use super::types::RecordedCall;
use super::{channels, commands, gateway, interactions, messages};

/// The routes of the fake Discord.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/gateway", get(gateway::upgrade))
        .route("/attachments/{channel}/{id}/{name}", get(attachment_file))
        .fallback(handle)
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// The CDN: the bytes of an attachment a user sent with [`AttachmentSpec::served`]
/// (`crate::discord::AttachmentSpec`); 404 for others. Downloads are recorded as `GET` calls.
async fn attachment_file(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    let data = {
        let mut state = shared.lock();
        state.calls.push(RecordedCall {
            method: "GET".to_owned(),
            path: path.clone(),
            query: None,
            body: Value::Null,
        });
        state.files.get(&path).cloned()
    };
    match data {
        Some(data) => data.into_response(),
        None => axum::http::StatusCode::NOT_FOUND.into_response(),
    }
}

/// `/api/v10/channels/1` -> `/channels/1`; `None` outside `/api`.
fn strip_api(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api")?;
    if rest.is_empty() || rest == "/" {
        return Some("/");
    }
    let rest = rest.strip_prefix('/')?;
    let first = rest.split('/').next().unwrap_or("");
    let versioned =
        first.len() > 1 && first.starts_with('v') && first[1..].chars().all(|c| c.is_ascii_digit());
    if !versioned {
        return Some(&path[4..]);
    }
    let tail = &rest[first.len()..];
    Some(if tail.is_empty() { "/" } else { tail })
}

/// Decodes `%XX` escapes (emoji in reaction paths).
fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = segment.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `key=value` pairs of a query string (Discord clients send `?&key=value`).
pub(crate) fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| percent_decode(v))
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let Some(path) = strip_api(uri.path()) else {
        return ApiError::not_found().into_response();
    };
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    // The gateway URL, and what the interaction token itself authorizes.
    let public = (method == Method::GET && segments.first().is_some_and(|s| s == "gateway"))
        || segments
            .first()
            .is_some_and(|s| s == "interactions" || s == "webhooks");
    let authorized = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {TOKEN}"));
    if !public && !authorized {
        return ApiError::unauthorized().into_response();
    }
    let parsed = body::parse(&headers, &bytes);
    let recorded = match &parsed {
        Ok(body) => body.json.clone(),
        Err(_) => json!(String::from_utf8_lossy(&bytes)),
    };
    shared.lock().calls.push(RecordedCall {
        method: method.as_str().to_owned(),
        path: path.to_owned(),
        query: uri.query().map(str::to_owned),
        body: recorded,
    });
    shared.touch();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    if method == Method::DELETE && matches!(segments.as_slice(), ["channels", _, "messages", _]) {
        // Held by the test: answered once released.
        let mut held = shared.hold_deletes.subscribe();
        let _ = held.wait_for(|on| !on).await;
    }
    let result = match parsed {
        Ok(body) => route(&shared, &method, &segments, uri.query(), &body),
        Err(error) => Err(error),
    };
    shared.touch();
    if method == Method::POST
        && matches!(segments.as_slice(), ["channels", _, "messages"])
        && result.is_ok()
    {
        // Made, but the answer is held by the test (a sender that dies before it hears back).
        let mut held = shared.hold_creates.subscribe();
        let _ = held.wait_for(|on| !on).await;
    }
    match result {
        Ok(reply) => reply.into_response(),
        Err(error) => error.into_response(),
    }
}

/// Parses a snowflake path segment; a malformed one is 404, like an unknown route.
fn id(segment: &str) -> Result<u64, ApiError> {
    segment.parse().map_err(|_| ApiError::not_found())
}

fn route(
    shared: &Arc<Shared>,
    method: &Method,
    segments: &[&str],
    query: Option<&str>,
    body: &Body,
) -> ApiResult {
    use Method as M;
    let m = method.clone();
    match segments {
        ["gateway"] => only(&m, M::GET, || {
            Ok(Reply::Json(json!({ "url": shared.lock().gateway_url })))
        }),
        ["gateway", "bot"] => only(&m, M::GET, || {
            Ok(Reply::Json(json!({
                "url": shared.lock().gateway_url,
                "shards": shared.lock().recommended_shards,
                "session_start_limit": {
                    "total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1,
                },
            })))
        }),
        ["users", "@me"] => only(&m, M::GET, || Ok(Reply::Json(json::current_user()))),
        ["users", "@me", "channels"] => only(&m, M::POST, || channels::create_dm(shared, body)),
        ["applications", "@me"] | ["oauth2", "applications", "@me"] => {
            only(&m, M::GET, || Ok(Reply::Json(json::application())))
        }
        ["applications", app, "commands"] => commands::list_route(shared, &m, app, None, body),
        ["applications", app, "commands", command] => {
            commands::one_route(shared, &m, app, None, command, body)
        }
        ["applications", app, "guilds", guild, "commands"] => {
            commands::list_route(shared, &m, app, Some(id(guild)?), body)
        }
        ["applications", app, "guilds", guild, "commands", command] => {
            commands::one_route(shared, &m, app, Some(id(guild)?), command, body)
        }
        ["interactions", interaction, token, "callback"] => only(&m, M::POST, || {
            interactions::callback(shared, interaction, token, body)
        }),
        ["webhooks", app, token] => only(&m, M::POST, || {
            interactions::followup(shared, app, token, body)
        }),
        ["webhooks", app, token, "messages", "@original"] => {
            interactions::original(shared, &m, app, token, body)
        }
        ["guilds", guild, "members", user] => only(&m, M::GET, || {
            let (guild, user) = (id(guild)?, id(user)?);
            let state = shared.lock();
            let user_json = if user == json::BOT_ID {
                json::bot_user()
            } else {
                state
                    .users
                    .get(&user)
                    .ok_or_else(ApiError::not_found)?
                    .to_json()
            };
            let mut member = json::member();
            member["user"] = user_json;
            member["roles"] = json!(
                state
                    .member_roles
                    .get(&(guild, user))
                    .map(|r| r.iter().map(u64::to_string).collect::<Vec<_>>())
                    .unwrap_or_default()
            );
            member["guild_id"] = json!(guild.to_string());
            Ok(Reply::Json(member))
        }),
        ["channels", channel] => {
            let channel = id(channel)?;
            match m {
                M::GET => channels::get(shared, channel),
                M::PATCH => channels::patch(shared, channel, body),
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        ["channels", channel, "messages"] => {
            let channel = id(channel)?;
            match m {
                M::GET => messages::list(shared, channel, query),
                M::POST => messages::create(shared, channel, body),
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        ["channels", channel, "messages", message] => {
            let (channel, message) = (id(channel)?, id(message)?);
            match m {
                M::GET => messages::get(shared, channel, message),
                M::PATCH => messages::edit(shared, channel, message, body),
                M::DELETE => messages::delete(shared, channel, message),
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        [
            "channels",
            channel,
            "messages",
            message,
            "reactions",
            emoji,
            "@me",
        ] => {
            let (channel, message) = (id(channel)?, id(message)?);
            match m {
                M::PUT => messages::react(shared, channel, message, emoji, true),
                M::DELETE => messages::react(shared, channel, message, emoji, false),
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        ["channels", channel, "pins", message] => {
            let (channel, message) = (id(channel)?, id(message)?);
            match m {
                M::PUT => messages::pin(shared, channel, message, true),
                M::DELETE => messages::pin(shared, channel, message, false),
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        ["channels", channel, "messages", message, "threads"] => {
            let (channel, message) = (id(channel)?, id(message)?);
            only(&m, M::POST, || {
                channels::thread_from_message(shared, channel, message, body)
            })
        }
        ["channels", channel, "threads"] => {
            let channel = id(channel)?;
            only(&m, M::POST, || channels::thread(shared, channel, body))
        }
        ["channels", channel, "typing"] => {
            let channel = id(channel)?;
            only(&m, M::POST, || channels::typing(shared, channel))
        }
        _ => Err(ApiError::not_found()),
    }
}

/// Runs `f` if `method` is `allowed`, else 405.
fn only(method: &Method, allowed: Method, f: impl FnOnce() -> ApiResult) -> ApiResult {
    if *method == allowed {
        f()
    } else {
        Err(ApiError::method_not_allowed())
    }
}

/// A JSON string field, `""` when absent.
pub(crate) fn str_field<'a>(body: &'a Value, key: &str) -> &'a str {
    body.get(key).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn api_prefixes_are_stripped() {
        assert_eq!(strip_api("/api/v10/channels/1"), Some("/channels/1"));
        assert_eq!(strip_api("/api/v9/gateway"), Some("/gateway"));
        assert_eq!(strip_api("/api/users/@me"), Some("/users/@me"));
        assert_eq!(strip_api("/bot/x"), None);
    }

    #[test]
    fn queries_with_a_leading_ampersand_parse() {
        assert_eq!(
            query_param(Some("&limit=5&before=9"), "limit").as_deref(),
            Some("5")
        );
        assert_eq!(query_param(Some("&limit=5"), "after"), None);
        assert_eq!(percent_decode("%F0%9F%91%80"), "👀");
    }
}
