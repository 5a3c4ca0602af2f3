//! The fake Discord's REST API over real HTTP: sends, edits, deletes, nonce dedupe, the
//! 2000-character limit, replies, exact error bodies, 429s, typing, threads, DMs, commands.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use chela_testkit::discord::{ChannelSpec, FakeDiscord, UserSpec};
use serde_json::{Value, json};

const GUILD: u64 = 800;
const CHANNEL: u64 = 801;
const OTHER: u64 = 802;

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn call(fake: &FakeDiscord, method: &str, path: &str, body: Option<Value>) -> Answer {
    let url = format!("{}/api/v10{path}", fake.rest_url());
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = reqwest::Client::new()
        .request(method, url)
        .header("Authorization", format!("Bot {}", fake.token()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    };
    Answer {
        status,
        headers,
        body,
    }
}

async fn send(fake: &FakeDiscord, channel: u64, body: Value) -> Answer {
    call(
        fake,
        "POST",
        &format!("/channels/{channel}/messages"),
        Some(body),
    )
    .await
}

fn id(value: &Value) -> u64 {
    value.as_str().unwrap().parse().unwrap()
}

async fn fake_with_channels() -> FakeDiscord {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_channel(ChannelSpec::guild_text(GUILD, CHANNEL));
    fake.add_channel(ChannelSpec::guild_text(GUILD, OTHER));
    fake
}

#[tokio::test]
async fn send_edit_get_delete() {
    let fake = fake_with_channels().await;
    let sent = send(&fake, CHANNEL, json!({ "content": "hello", "tts": false })).await;
    assert_eq!(sent.status, 200);
    let m = &sent.body;
    assert_eq!(m["channel_id"], CHANNEL.to_string());
    assert_eq!(m["author"]["id"], FakeDiscord::BOT_ID.to_string());
    assert_eq!(m["author"]["bot"], true);
    assert_eq!(m["content"], "hello");
    assert_eq!(m["type"], 0);
    assert_eq!(m["edited_timestamp"], Value::Null);
    assert!(
        m.get("guild_id").is_none(),
        "REST messages carry no guild_id"
    );
    let mid = id(&m["id"]);

    let edited = call(
        &fake,
        "PATCH",
        &format!("/channels/{CHANNEL}/messages/{mid}"),
        Some(json!({ "content": "hello, world" })),
    )
    .await;
    assert_eq!(edited.status, 200);
    assert_eq!(edited.body["content"], "hello, world");
    assert!(edited.body["edited_timestamp"].is_string());
    let got = call(
        &fake,
        "GET",
        &format!("/channels/{CHANNEL}/messages/{mid}"),
        None,
    )
    .await;
    assert_eq!(got.body["content"], "hello, world");

    let messages = fake.sent(CHANNEL);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].id, mid);
    assert_eq!(messages[0].content, "hello, world");
    assert_eq!(messages[0].edits, 1);
    assert!(!messages[0].deleted);

    let deleted = call(
        &fake,
        "DELETE",
        &format!("/channels/{CHANNEL}/messages/{mid}"),
        None,
    )
    .await;
    assert_eq!(deleted.status, 204);
    assert!(fake.sent(CHANNEL)[0].deleted);

    let unknown = json!({ "code": 10008, "message": "Unknown Message" });
    for method in ["PATCH", "DELETE", "GET"] {
        let answer = call(
            &fake,
            method,
            &format!("/channels/{CHANNEL}/messages/{mid}"),
            Some(json!({ "content": "again" })),
        )
        .await;
        assert_eq!((answer.status, &answer.body), (404, &unknown), "{method}");
    }
    let nowhere = send(&fake, 12345, json!({ "content": "x" })).await;
    assert_eq!(nowhere.status, 404);
    assert_eq!(
        nowhere.body,
        json!({ "code": 10003, "message": "Unknown Channel" })
    );

    let calls = fake.calls();
    assert_eq!(calls[0].method, "POST");
    assert_eq!(calls[0].path, format!("/channels/{CHANNEL}/messages"));
    assert_eq!(calls[0].body["content"], "hello");
}

#[tokio::test]
async fn user_messages_cannot_be_edited_and_are_listed() {
    let fake = fake_with_channels().await;
    let user = fake.user_sends(
        ChannelSpec::guild_text(GUILD, CHANNEL),
        UserSpec::new(900, "alice"),
        "hi",
    );
    let answer = call(
        &fake,
        "PATCH",
        &format!("/channels/{CHANNEL}/messages/{user}"),
        Some(json!({ "content": "mine now" })),
    )
    .await;
    assert_eq!(answer.status, 403);
    assert_eq!(
        answer.body,
        json!({ "code": 50005, "message": "Cannot edit a message authored by another user" })
    );
    send(&fake, CHANNEL, json!({ "content": "one" })).await;
    send(&fake, CHANNEL, json!({ "content": "two" })).await;
    // serenity writes query strings as `?&key=value`.
    let page = call(
        &fake,
        "GET",
        &format!("/channels/{CHANNEL}/messages?&limit=2"),
        None,
    )
    .await;
    let contents: Vec<&str> = page
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["two", "one"]);
    assert_eq!(
        fake.calls().last().unwrap().query.as_deref(),
        Some("&limit=2")
    );
}

#[tokio::test]
async fn enforce_nonce_dedupes_repeated_sends_per_channel() {
    let fake = fake_with_channels().await;
    let body = json!({ "content": "once", "nonce": "n-1", "enforce_nonce": true });
    let first = send(&fake, CHANNEL, body.clone()).await;
    let again = send(&fake, CHANNEL, body.clone()).await;
    assert_eq!(first.status, 200);
    assert_eq!(again.status, 200);
    assert_eq!(first.body["id"], again.body["id"]);
    assert_eq!(first.body["nonce"], "n-1");
    assert_eq!(fake.sent(CHANNEL).len(), 1);
    assert_eq!(fake.sent(CHANNEL)[0].nonce.as_deref(), Some("n-1"));
    // Numeric nonces dedupe too.
    let numeric = json!({ "content": "num", "nonce": 42, "enforce_nonce": true });
    let a = send(&fake, CHANNEL, numeric.clone()).await;
    let b = send(&fake, CHANNEL, numeric).await;
    assert_eq!(a.body["id"], b.body["id"]);
    // Another channel, or no enforce_nonce: new messages.
    let elsewhere = send(&fake, OTHER, body).await;
    assert_ne!(elsewhere.body["id"], first.body["id"]);
    send(&fake, CHANNEL, json!({ "content": "once", "nonce": "n-1" })).await;
    assert_eq!(fake.sent(CHANNEL).len(), 3);
    assert_eq!(fake.sent(OTHER).len(), 1);
    // A dedupe hit does not use up an injected 429.
    fake.inject_429(1, 0.5);
    let dup = send(
        &fake,
        CHANNEL,
        json!({ "content": "once", "nonce": "n-1", "enforce_nonce": true }),
    )
    .await;
    assert_eq!(dup.status, 200);
    assert_eq!(fake.rate_limited_count(), 0);
}

#[tokio::test]
async fn content_limit_and_empty_messages() {
    let fake = fake_with_channels().await;
    // 2000 characters (not bytes) pass.
    let at_limit = "é".repeat(FakeDiscord::MAX_CONTENT);
    let ok = send(&fake, CHANNEL, json!({ "content": at_limit })).await;
    assert_eq!(ok.status, 200);
    let too_long = send(&fake, CHANNEL, json!({ "content": "x".repeat(2001) })).await;
    assert_eq!(too_long.status, 400);
    assert_eq!(too_long.body["code"], 50035);
    assert_eq!(too_long.body["message"], "Invalid Form Body");
    assert_eq!(
        too_long.body["errors"]["content"]["_errors"][0]["code"],
        "BASE_TYPE_MAX_LENGTH"
    );
    let mid = id(&ok.body["id"]);
    let edit = call(
        &fake,
        "PATCH",
        &format!("/channels/{CHANNEL}/messages/{mid}"),
        Some(json!({ "content": "y".repeat(2001) })),
    )
    .await;
    assert_eq!((edit.status, &edit.body["code"]), (400, &json!(50035)));
    assert_eq!(fake.sent(CHANNEL)[0].edits, 0);

    let empty = send(&fake, CHANNEL, json!({ "content": "" })).await;
    assert_eq!(empty.status, 400);
    assert_eq!(
        empty.body,
        json!({ "code": 50006, "message": "Cannot send an empty message" })
    );
    let embed_only = send(&fake, CHANNEL, json!({ "embeds": [{ "title": "t" }] })).await;
    assert_eq!(embed_only.status, 200);
    let not_json = reqwest::Client::new()
        .post(format!(
            "{}/api/v10/channels/{CHANNEL}/messages",
            fake.rest_url()
        ))
        .header("Authorization", format!("Bot {}", fake.token()))
        .header("Content-Type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    assert_eq!(not_json.json::<Value>().await.unwrap()["code"], 50109);
}

#[tokio::test]
async fn replies_reference_the_message_and_mention_its_author() {
    let fake = fake_with_channels().await;
    let alice = UserSpec::new(900, "alice");
    let asked = fake.user_sends(ChannelSpec::guild_text(GUILD, CHANNEL), alice, "question");
    let reply = send(
        &fake,
        CHANNEL,
        json!({
            "content": "answer",
            "message_reference": { "message_id": asked.to_string(), "fail_if_not_exists": true },
            "allowed_mentions": { "parse": [], "replied_user": true },
        }),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["type"], 19);
    assert_eq!(
        reply.body["message_reference"]["message_id"],
        asked.to_string()
    );
    assert_eq!(reply.body["referenced_message"]["content"], "question");
    assert_eq!(reply.body["mentions"][0]["id"], "900");
    let sent = &fake.sent(CHANNEL)[0];
    assert_eq!(sent.reference, Some(asked));
    assert_eq!(
        sent.allowed_mentions,
        Some(json!({ "parse": [], "replied_user": true }))
    );

    let missing = send(
        &fake,
        CHANNEL,
        json!({ "content": "x", "message_reference": { "message_id": "1" } }),
    )
    .await;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.body["code"], 50035);
    assert_eq!(
        missing.body["errors"]["message_reference"]["_errors"][0]["code"],
        "MESSAGE_REFERENCE_UNKNOWN_MESSAGE"
    );
    let lenient = send(
        &fake,
        CHANNEL,
        json!({
            "content": "x",
            "message_reference": { "message_id": "1", "fail_if_not_exists": false },
        }),
    )
    .await;
    assert_eq!((lenient.status, &lenient.body["type"]), (200, &json!(0)));
}

#[tokio::test]
async fn injected_429s_answer_sends_and_edits_then_run_out() {
    let fake = fake_with_channels().await;
    let ok = send(&fake, CHANNEL, json!({ "content": "first" })).await;
    let mid = id(&ok.body["id"]);
    fake.inject_429(2, 1.5);
    // Invalid sends are rejected before the rate limit and do not use one up.
    let invalid = send(&fake, CHANNEL, json!({ "content": "" })).await;
    assert_eq!(invalid.status, 400);
    let limited = send(&fake, CHANNEL, json!({ "content": "second" })).await;
    assert_eq!(limited.status, 429);
    assert_eq!(
        limited.body,
        json!({ "message": "You are being rate limited.", "retry_after": 1.5, "global": false })
    );
    assert_eq!(limited.headers["retry-after"], "2");
    assert_eq!(limited.headers["x-ratelimit-remaining"], "0");
    assert_eq!(limited.headers["x-ratelimit-reset-after"], "1.500");
    assert_eq!(limited.headers["x-ratelimit-scope"], "user");
    let edit = call(
        &fake,
        "PATCH",
        &format!("/channels/{CHANNEL}/messages/{mid}"),
        Some(json!({ "content": "edited" })),
    )
    .await;
    assert_eq!(edit.status, 429);
    let through = send(&fake, CHANNEL, json!({ "content": "third" })).await;
    assert_eq!(through.status, 200);
    let contents: Vec<String> = fake.sent(CHANNEL).into_iter().map(|m| m.content).collect();
    assert_eq!(contents, ["first", "third"]);
    assert_eq!(fake.rate_limited_count(), 2);
}

#[tokio::test]
async fn enforced_rate_limit_is_five_per_five_seconds_per_channel() {
    let fake = fake_with_channels().await;
    fake.enforce_rate_limits(true);
    for i in 0..5 {
        let ok = send(&fake, CHANNEL, json!({ "content": format!("m{i}") })).await;
        assert_eq!(ok.status, 200, "send {i}");
    }
    let limited = send(&fake, CHANNEL, json!({ "content": "m5" })).await;
    assert_eq!(limited.status, 429);
    let retry = limited.body["retry_after"].as_f64().unwrap();
    assert!(retry > 0.0 && retry <= 5.0, "{retry}");
    assert_eq!(limited.body["global"], false);
    assert_eq!(limited.headers["x-ratelimit-limit"], "5");
    let other = send(&fake, OTHER, json!({ "content": "elsewhere" })).await;
    assert_eq!(other.status, 200, "limits are per channel");

    // A short window shows the limit lifting.
    fake.set_rate_limit(2, Duration::from_millis(300));
    let c = ChannelSpec::guild_text(GUILD, 803);
    fake.add_channel(c);
    assert_eq!(
        send(&fake, 803, json!({ "content": "a" })).await.status,
        200
    );
    assert_eq!(
        send(&fake, 803, json!({ "content": "b" })).await.status,
        200
    );
    assert_eq!(
        send(&fake, 803, json!({ "content": "c" })).await.status,
        429
    );
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(
        send(&fake, 803, json!({ "content": "d" })).await.status,
        200
    );
}

#[tokio::test]
async fn auth_gateway_and_current_user() {
    let fake = FakeDiscord::start().await.unwrap();
    let anonymous = reqwest::get(format!("{}/api/v10/users/@me", fake.rest_url()))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.json::<Value>().await.unwrap(),
        json!({ "code": 0, "message": "401: Unauthorized" })
    );
    // `GET /gateway` needs no token.
    let gateway: Value = reqwest::get(format!("{}/api/v10/gateway", fake.rest_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(gateway, json!({ "url": fake.gateway_url() }));
    let bot = call(&fake, "GET", "/gateway/bot", None).await;
    assert_eq!(bot.body["shards"], 1);
    let me = call(&fake, "GET", "/users/@me", None).await;
    assert_eq!(me.body["id"], FakeDiscord::BOT_ID.to_string());
    assert_eq!(me.body["username"], "chela_test");
    let app = call(&fake, "GET", "/applications/@me", None).await;
    assert_eq!(app.body["id"], FakeDiscord::APPLICATION_ID.to_string());
    let nowhere = call(&fake, "GET", "/nothing/here", None).await;
    assert_eq!(
        (nowhere.status, nowhere.body),
        (404, json!({ "code": 0, "message": "404: Not Found" }))
    );
}

#[tokio::test]
async fn typing_reactions_and_dms() {
    let fake = fake_with_channels().await;
    let typing = call(&fake, "POST", &format!("/channels/{CHANNEL}/typing"), None).await;
    assert_eq!(typing.status, 204);
    call(&fake, "POST", &format!("/channels/{CHANNEL}/typing"), None).await;
    assert_eq!(fake.typing(CHANNEL), 2);

    let alice = UserSpec::new(900, "alice");
    let asked = fake.user_sends(ChannelSpec::guild_text(GUILD, CHANNEL), alice.clone(), "hi");
    let react = call(
        &fake,
        "PUT",
        &format!("/channels/{CHANNEL}/messages/{asked}/reactions/%F0%9F%91%80/@me"),
        None,
    )
    .await;
    assert_eq!(react.status, 204);
    assert_eq!(fake.reactions(CHANNEL, asked), ["👀"]);

    let dm = call(
        &fake,
        "POST",
        "/users/@me/channels",
        Some(json!({ "recipient_id": "900" })),
    )
    .await;
    assert_eq!(dm.body["type"], 1);
    assert_eq!(dm.body["recipients"][0]["id"], "900");
    let dm_id = id(&dm.body["id"]);
    assert_eq!(
        send(&fake, dm_id, json!({ "content": "psst" }))
            .await
            .status,
        200
    );
    assert_eq!(fake.sent(dm_id)[0].content, "psst");
    let again = call(
        &fake,
        "POST",
        "/users/@me/channels",
        Some(json!({ "recipient_id": "900" })),
    )
    .await;
    assert_eq!(again.body["id"], dm.body["id"], "one DM channel per user");
    let stranger = call(
        &fake,
        "POST",
        "/users/@me/channels",
        Some(json!({ "recipient_id": "4242" })),
    )
    .await;
    assert_eq!(
        (stranger.status, stranger.body),
        (
            400,
            json!({ "code": 50033, "message": "Invalid Recipient(s)" })
        )
    );
}

#[tokio::test]
async fn threads_from_a_message_and_standalone() {
    let fake = fake_with_channels().await;
    let starter = fake.user_sends(
        ChannelSpec::guild_text(GUILD, CHANNEL),
        UserSpec::new(900, "alice"),
        "let's discuss",
    );
    let path = format!("/channels/{CHANNEL}/messages/{starter}/threads");
    let made = call(
        &fake,
        "POST",
        &path,
        Some(json!({ "name": "discussion", "auto_archive_duration": 60 })),
    )
    .await;
    assert_eq!(made.status, 200);
    let t = &made.body;
    assert_eq!(t["id"], starter.to_string(), "thread id = message id");
    assert_eq!(t["type"], 11);
    assert_eq!(t["parent_id"], CHANNEL.to_string());
    assert_eq!(t["guild_id"], GUILD.to_string());
    assert_eq!(t["name"], "discussion");
    assert_eq!(t["thread_metadata"]["auto_archive_duration"], 60);
    let twice = call(&fake, "POST", &path, Some(json!({ "name": "again" }))).await;
    assert_eq!(
        (twice.status, twice.body),
        (
            400,
            json!({ "code": 160004, "message": "A thread has already been created for this message" })
        )
    );
    // The bot can write in the thread: it is a channel.
    assert_eq!(
        send(&fake, starter, json!({ "content": "in" }))
            .await
            .status,
        200
    );
    assert_eq!(fake.sent(starter).len(), 1);

    let standalone = call(
        &fake,
        "POST",
        &format!("/channels/{CHANNEL}/threads"),
        Some(json!({ "name": "side", "type": 11 })),
    )
    .await;
    assert_eq!(standalone.body["type"], 11);
    let private = call(
        &fake,
        "POST",
        &format!("/channels/{CHANNEL}/threads"),
        Some(json!({ "name": "quiet" })),
    )
    .await;
    assert_eq!(private.body["type"], 12, "Discord's default is private");

    let threads = fake.threads();
    assert_eq!(threads.len(), 3);
    assert_eq!(threads[0].starter_message_id, Some(starter));
    assert_eq!(threads[0].owner_id, FakeDiscord::BOT_ID);

    // Archiving through PATCH /channels/{id}.
    let archived = call(
        &fake,
        "PATCH",
        &format!("/channels/{starter}"),
        Some(json!({ "archived": true })),
    )
    .await;
    assert_eq!(archived.body["thread_metadata"]["archived"], true);
    assert!(fake.threads()[0].archived);

    fake.user_sends(ChannelSpec::dm(700), UserSpec::new(900, "alice"), "dm");
    let in_dm = call(
        &fake,
        "POST",
        "/channels/700/threads",
        Some(json!({ "name": "nope" })),
    )
    .await;
    assert_eq!(
        (in_dm.status, in_dm.body),
        (
            400,
            json!({ "code": 50024, "message": "Cannot execute action on this channel type" })
        )
    );
}

#[tokio::test]
async fn application_commands_are_recorded_and_echoed() {
    let fake = FakeDiscord::start().await.unwrap();
    let app = FakeDiscord::APPLICATION_ID;
    let put = call(
        &fake,
        "PUT",
        &format!("/applications/{app}/commands"),
        Some(json!([
            { "name": "new", "description": "Start a new session" },
            { "name": "stop", "description": "Stop the run", "type": 1 },
        ])),
    )
    .await;
    assert_eq!(put.status, 200);
    let echoed = put.body.as_array().unwrap();
    assert_eq!(echoed.len(), 2);
    assert_eq!(echoed[0]["name"], "new");
    assert_eq!(echoed[0]["application_id"], app.to_string());
    assert_eq!(echoed[0]["type"], 1);
    assert!(echoed[0]["id"].is_string() && echoed[0]["version"].is_string());
    assert_eq!(fake.commands().len(), 2);
    let listed = call(&fake, "GET", &format!("/applications/{app}/commands"), None).await;
    assert_eq!(listed.body, put.body);
    // Overwriting keeps the ids of commands that stay.
    let again = call(
        &fake,
        "PUT",
        &format!("/applications/{app}/commands"),
        Some(json!([{ "name": "new", "description": "Fresh" }])),
    )
    .await;
    assert_eq!(again.body[0]["id"], echoed[0]["id"]);
    assert_eq!(fake.commands().len(), 1);
    let created = call(
        &fake,
        "POST",
        &format!("/applications/{app}/guilds/{GUILD}/commands"),
        Some(json!({ "name": "status", "description": "Show status" })),
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(fake.guild_commands(GUILD)[0]["guild_id"], GUILD.to_string());
    let callback = call(
        &fake,
        "POST",
        "/interactions/123/tok/callback",
        Some(json!({ "type": 4, "data": { "content": "hi" } })),
    )
    .await;
    assert_eq!(callback.status, 204);
    assert_eq!(fake.interaction_callbacks()[0]["body"]["type"], 4);
}

#[tokio::test]
async fn multipart_uploads_read_payload_json() {
    let fake = fake_with_channels().await;
    let body = "--XYZ\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n{\"content\":\"see file\"}\r\n--XYZ\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"log.txt\"\r\n\r\nabc\r\n--XYZ--\r\n";
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/api/v10/channels/{CHANNEL}/messages",
            fake.rest_url()
        ))
        .header("Authorization", format!("Bot {}", fake.token()))
        .header("Content-Type", "multipart/form-data; boundary=XYZ")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let message: Value = answer.json().await.unwrap();
    assert_eq!(message["content"], "see file");
    assert_eq!(message["attachments"][0]["filename"], "log.txt");
    assert_eq!(message["attachments"][0]["size"], 3);
    assert_eq!(fake.sent(CHANNEL)[0].attachments, ["log.txt"]);
}
