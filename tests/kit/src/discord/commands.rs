//! Application commands (global and per guild: list, bulk overwrite, create, get, edit,
//! delete), recorded for tests.

use std::sync::Arc;

use axum::http::Method;
use serde_json::{Value, json};

use super::body::Body;
use super::error::{ApiError, ApiResult, Reply};
use super::json::{APPLICATION_ID, snowflake};
use super::state::{Shared, State};

/// 404 `{"code":10063,"message":"Unknown application command"}`.
fn unknown_command() -> ApiError {
    ApiError::new(404, 10063, "Unknown application command")
}

/// The application in the path must be the fake's.
fn check_app(app: &str) -> Result<(), ApiError> {
    if app.parse::<u64>().ok() == Some(APPLICATION_ID) {
        Ok(())
    } else {
        Err(ApiError::new(404, 10002, "Unknown Application"))
    }
}

/// A command as Discord stores it: `id` (kept from `existing`), `application_id`,
/// `version`, defaults for `type`, `description`, `options` and the rest.
fn normalize(
    state: &mut State,
    guild: Option<u64>,
    input: &Value,
    existing: Option<&Value>,
) -> Result<Value, ApiError> {
    let name = input.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() || name.chars().count() > 32 {
        return Err(ApiError::invalid_form(
            "name",
            "BASE_TYPE_BAD_LENGTH",
            "Must be between 1 and 32 in length.",
        ));
    }
    let mut command = input.clone();
    if !command.is_object() {
        command = json!({});
    }
    let id = existing
        .and_then(|e| e.get("id").cloned())
        .unwrap_or_else(|| json!(state.next_id().to_string()));
    let version = state.next_id().to_string();
    let defaults = [
        ("type", json!(1)),
        ("description", json!("")),
        ("options", json!([])),
        ("default_member_permissions", Value::Null),
        ("nsfw", json!(false)),
        ("integration_types", json!([0])),
        ("contexts", Value::Null),
    ];
    for (key, value) in defaults {
        if command.get(key).is_none() {
            command[key] = value;
        }
    }
    command["id"] = id;
    command["application_id"] = json!(APPLICATION_ID.to_string());
    command["version"] = json!(version);
    match guild {
        Some(guild) => command["guild_id"] = json!(guild.to_string()),
        None => {
            if command.get("dm_permission").is_none() {
                command["dm_permission"] = json!(true);
            }
        }
    }
    Ok(command)
}

/// The same command: same name and type.
fn same(a: &Value, b: &Value) -> bool {
    let kind = |v: &Value| v.get("type").and_then(Value::as_u64).unwrap_or(1);
    a.get("name") == b.get("name") && kind(a) == kind(b)
}

/// `/applications/{app}/commands` and `/applications/{app}/guilds/{guild}/commands`:
/// `GET` lists, `PUT` overwrites all, `POST` creates or replaces one by name.
pub(crate) fn list_route(
    shared: &Arc<Shared>,
    method: &Method,
    app: &str,
    guild: Option<u64>,
    body: &Body,
) -> ApiResult {
    check_app(app)?;
    let mut state = shared.lock();
    let current = state.commands.get(&guild).cloned().unwrap_or_default();
    match *method {
        Method::GET => Ok(Reply::Json(Value::Array(current))),
        Method::PUT => {
            let Some(inputs) = body.json.as_array() else {
                return Err(ApiError::invalid_form(
                    "_errors",
                    "BASE_TYPE_ARRAY",
                    "Must be an array.",
                ));
            };
            let mut stored = Vec::new();
            for input in inputs {
                let existing = current.iter().find(|c| same(c, input));
                stored.push(normalize(&mut state, guild, input, existing)?);
            }
            state.commands.insert(guild, stored.clone());
            Ok(Reply::Json(Value::Array(stored)))
        }
        Method::POST => {
            let position = current.iter().position(|c| same(c, &body.json));
            let existing = position.and_then(|p| current.get(p));
            let command = normalize(&mut state, guild, &body.json, existing)?;
            let list = state.commands.entry(guild).or_default();
            match position {
                Some(p) => {
                    if let Some(slot) = list.get_mut(p) {
                        *slot = command.clone();
                    }
                    Ok(Reply::Json(command))
                }
                None => {
                    list.push(command.clone());
                    Ok(Reply::Created(command))
                }
            }
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// `/applications/{app}/commands/{id}` (and per guild): `GET`, `PATCH`, `DELETE`.
pub(crate) fn one_route(
    shared: &Arc<Shared>,
    method: &Method,
    app: &str,
    guild: Option<u64>,
    command: &str,
    body: &Body,
) -> ApiResult {
    check_app(app)?;
    let id = command.parse::<u64>().map_err(|_| unknown_command())?;
    let mut state = shared.lock();
    let current = state.commands.get(&guild).cloned().unwrap_or_default();
    let position = current
        .iter()
        .position(|c| c.get("id").and_then(snowflake) == Some(id))
        .ok_or_else(unknown_command)?;
    match *method {
        Method::GET => Ok(Reply::Json(current[position].clone())),
        Method::PATCH => {
            let mut merged = current[position].clone();
            if let (Some(target), Some(changes)) = (merged.as_object_mut(), body.json.as_object()) {
                for (key, value) in changes {
                    target.insert(key.clone(), value.clone());
                }
            }
            let command = normalize(&mut state, guild, &merged, Some(&current[position]))?;
            if let Some(slot) = state
                .commands
                .get_mut(&guild)
                .and_then(|l| l.get_mut(position))
            {
                *slot = command.clone();
            }
            Ok(Reply::Json(command))
        }
        Method::DELETE => {
            if let Some(list) = state.commands.get_mut(&guild) {
                list.remove(position);
            }
            Ok(Reply::NoContent)
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
