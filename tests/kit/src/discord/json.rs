//! Discord JSON shapes: snowflakes, ISO timestamps, the bot user, channels, guilds and the
//! application, as serenity 0.12 deserializes them.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::types::{ChannelKind, ChannelSpec};

/// The bot's user id.
pub(crate) const BOT_ID: u64 = 1_234_567_890_123_456_789;
/// The application id (the bot's user id, as for every application made since 2016).
pub(crate) const APPLICATION_ID: u64 = BOT_ID;
/// The bot's username.
pub(crate) const BOT_USERNAME: &str = "chela_test";
/// The one accepted token (its first part is the bot id in base64, as in real tokens).
pub(crate) const TOKEN: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GfAkEd.chela-fake-discord-token";
/// The application flags in READY: `GATEWAY_MESSAGE_CONTENT` (1 << 19), the message content
/// intent is enabled for this bot.
pub(crate) const APPLICATION_FLAGS: u64 = 1 << 19;
/// Milliseconds from the Unix epoch to the Discord epoch (2015-01-01).
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A snowflake for now that is greater than `last` (ids grow with time and stay unique).
pub(crate) fn next_snowflake(last: u64) -> u64 {
    let stamped = now_ms().saturating_sub(DISCORD_EPOCH_MS) << 22;
    stamped.max(last.saturating_add(1))
}

/// `ms` since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`, as Discord writes times.
pub(crate) fn iso(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        (ms % 1000) * 1000
    )
}

/// Now as an ISO timestamp.
pub(crate) fn iso_now() -> String {
    iso(now_ms())
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// The bot as a Discord `User`.
pub(crate) fn bot_user() -> Value {
    json!({
        "id": BOT_ID.to_string(),
        "username": BOT_USERNAME,
        "discriminator": "0",
        "global_name": null,
        "avatar": null,
        "bot": true,
        "public_flags": 0,
    })
}

/// The bot as `GET /users/@me` and READY's `user` describe it.
pub(crate) fn current_user() -> Value {
    let mut user = bot_user();
    user["verified"] = json!(true);
    user["mfa_enabled"] = json!(false);
    user["flags"] = json!(0);
    user["email"] = Value::Null;
    user["locale"] = json!("en-US");
    user
}

/// `GET /applications/@me`.
pub(crate) fn application() -> Value {
    json!({
        "id": APPLICATION_ID.to_string(),
        "name": "chela test",
        "icon": null,
        "description": "",
        "rpc_origins": [],
        "bot_public": true,
        "bot_require_code_grant": false,
        "bot": bot_user(),
        "owner": {
            "id": "1000000000000000001",
            "username": "owner",
            "discriminator": "0",
            "global_name": null,
            "avatar": null,
            "public_flags": 0,
        },
        "verify_key": "0000000000000000000000000000000000000000000000000000000000000000",
        "team": null,
        "flags": APPLICATION_FLAGS,
        "tags": [],
        "interactions_endpoint_url": null,
        "redirect_uris": [],
    })
}

/// What the fake knows of a thread beyond its [`ChannelSpec`].
#[derive(Debug, Clone)]
pub(crate) struct ThreadMeta {
    pub(crate) owner_id: u64,
    pub(crate) starter_message_id: Option<u64>,
    pub(crate) archived: bool,
    pub(crate) locked: bool,
    pub(crate) auto_archive_duration: u64,
    pub(crate) created: String,
    pub(crate) message_count: u64,
}

/// The Discord `Channel` object of `spec` (`recipient` for DMs, `thread` for threads).
pub(crate) fn channel(
    spec: &ChannelSpec,
    recipient: Option<&Value>,
    thread: Option<&ThreadMeta>,
    last_message_id: Option<u64>,
) -> Value {
    let last = last_message_id.map(|id| id.to_string());
    match spec.kind {
        ChannelKind::Dm => json!({
            "id": spec.id.to_string(),
            "type": 1,
            "last_message_id": last,
            "flags": 0,
            "recipients": recipient.map(|r| vec![r.clone()]).unwrap_or_default(),
        }),
        ChannelKind::GuildText => json!({
            "id": spec.id.to_string(),
            "type": 0,
            "guild_id": spec.guild_id.map(|g| g.to_string()),
            "name": spec.display_name(),
            "position": 0,
            "permission_overwrites": [],
            "nsfw": false,
            "parent_id": null,
            "topic": null,
            "last_message_id": last,
            "rate_limit_per_user": 0,
            "flags": 0,
        }),
        ChannelKind::PublicThread | ChannelKind::PrivateThread => {
            let meta = thread.cloned().unwrap_or(ThreadMeta {
                owner_id: BOT_ID,
                starter_message_id: None,
                archived: false,
                locked: false,
                auto_archive_duration: 1440,
                created: iso_now(),
                message_count: 0,
            });
            json!({
                "id": spec.id.to_string(),
                "type": spec.kind.type_id(),
                "guild_id": spec.guild_id.map(|g| g.to_string()),
                "parent_id": spec.parent_id.map(|p| p.to_string()),
                "owner_id": meta.owner_id.to_string(),
                "name": spec.display_name(),
                "last_message_id": last,
                "rate_limit_per_user": 0,
                "flags": 0,
                "message_count": meta.message_count,
                "member_count": 1,
                "total_message_sent": meta.message_count,
                "thread_metadata": {
                    "archived": meta.archived,
                    "auto_archive_duration": meta.auto_archive_duration,
                    "archive_timestamp": meta.created,
                    "locked": meta.locked,
                    "create_timestamp": meta.created,
                },
            })
        }
    }
}

/// The `GUILD_CREATE` payload of guild `id`: the bot as its only listed member, `channels`
/// and `threads` as given.
pub(crate) fn guild(id: u64, name: &str, channels: Vec<Value>, threads: Vec<Value>) -> Value {
    let joined = iso_now();
    let mut guild = json!({
        "id": id.to_string(),
        "name": name,
        "icon": null,
        "icon_hash": null,
        "splash": null,
        "discovery_splash": null,
        "owner_id": "1000000000000000001",
        "widget_enabled": false,
        "widget_channel_id": null,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [],
        "emojis": [],
        "features": [],
        "mfa_level": 0,
        "application_id": null,
        "system_channel_id": null,
        "system_channel_flags": 0,
        "rules_channel_id": null,
        "max_presences": null,
        "max_members": 500_000,
        "vanity_url_code": null,
        "description": null,
        "banner": null,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "preferred_locale": "en-US",
        "public_updates_channel_id": null,
        "max_video_channel_users": 25,
        "max_stage_video_channel_users": 50,
        "nsfw_level": 0,
        "stickers": [],
        "premium_progress_bar_enabled": false,
        "safety_alerts_channel_id": null,
    });
    // The GUILD_CREATE extras (split off: one `json!` this size hits the recursion limit).
    let extras = json!({
        "joined_at": joined,
        "large": false,
        "unavailable": false,
        "member_count": 2,
        "voice_states": [],
        "members": [{
            "user": bot_user(),
            "nick": null,
            "avatar": null,
            "roles": [],
            "joined_at": joined,
            "premium_since": null,
            "deaf": false,
            "mute": false,
            "flags": 0,
            "pending": false,
        }],
        "channels": channels,
        "threads": threads,
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    });
    if let (Some(guild), Value::Object(extras)) = (guild.as_object_mut(), extras) {
        guild.extend(extras);
    }
    guild
}

/// A guild member object for `MESSAGE_CREATE.member` (the user is the message's author).
pub(crate) fn member() -> Value {
    json!({
        "roles": [],
        "nick": null,
        "avatar": null,
        "joined_at": iso_now(),
        "premium_since": null,
        "deaf": false,
        "mute": false,
        "flags": 0,
        "pending": false,
    })
}

/// A snowflake as it appears in JSON: a string (a number is accepted too).
pub(crate) fn snowflake(value: &Value) -> Option<u64> {
    match value {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// A nonce as text: strings as they are, numbers in decimal.
pub(crate) fn nonce_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn iso_formats_known_instants() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(iso(1_709_251_199_123), "2024-02-29T23:59:59.123000+00:00");
        assert_eq!(iso(1_420_070_400_000), "2015-01-01T00:00:00.000000+00:00");
    }

    #[test]
    fn snowflakes_grow() {
        let a = next_snowflake(0);
        let b = next_snowflake(a);
        assert!(b > a);
        assert!(a >> 22 > 0);
    }
}
