//! The fake Telegram's bot side over real HTTP: sends, edits and their errors, length and
//! markup checks, forum topics, chat actions, commands, deletes, 404 and 401.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chela_testkit::telegram::{BotCommand, ChatAction, ChatSpec, FakeTelegram, UserSpec};
use serde_json::{Value, json};

const FORUM: i64 = -1_009_876_543_210;

async fn call(tg: &FakeTelegram, method: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/bot{}/{method}", tg.api_url(), tg.token());
    let response = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn bad_request(body: &Value, what: &str) {
    assert_eq!(
        body,
        &json!({ "ok": false, "error_code": 400, "description": format!("Bad Request: {what}") })
    );
}

async fn with_private_chat() -> FakeTelegram {
    let tg = FakeTelegram::start().await.unwrap();
    tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), "hi");
    tg
}

#[tokio::test]
async fn send_edit_not_modified_and_not_found() {
    let tg = with_private_chat().await;
    let (status, sent) = call(
        &tg,
        "SendMessage",
        json!({ "chat_id": 42, "text": "draft", "reply_parameters": { "message_id": 1 } }),
    )
    .await;
    assert_eq!(status, 200);
    let message = &sent["result"];
    assert_eq!(message["message_id"], 2);
    assert_eq!(message["from"]["is_bot"], true);
    assert_eq!(message["chat"]["id"], 42);
    assert!(message["date"].is_i64());
    assert_eq!(message["reply_to_message"]["text"], "hi");

    let (status, edited) = call(
        &tg,
        "EditMessageText",
        json!({ "chat_id": 42, "message_id": 2, "text": "final" }),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(edited["result"]["text"], "final");
    assert_eq!(edited["result"]["message_id"], 2);
    assert!(edited["result"]["edit_date"].as_i64().unwrap() >= message["date"].as_i64().unwrap());

    let (status, same) = call(
        &tg,
        "editMessageText",
        json!({ "chat_id": 42, "message_id": 2, "text": "final" }),
    )
    .await;
    assert_eq!(status, 400);
    bad_request(
        &same,
        "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
    );

    let (status, missing) = call(
        &tg,
        "editMessageText",
        json!({ "chat_id": 42, "message_id": 99, "text": "x" }),
    )
    .await;
    assert_eq!(status, 400);
    bad_request(&missing, "message to edit not found");

    let (_, users) = call(
        &tg,
        "editMessageText",
        json!({ "chat_id": 42, "message_id": 1, "text": "x" }),
    )
    .await;
    bad_request(&users, "message can't be edited");

    let sent = tg.sent(42);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (
            sent[0].message_id,
            sent[0].text.as_str(),
            sent[0].edits,
            sent[0].reply_to
        ),
        (2, "final", 1, Some(1))
    );

    let (status, deleted) = call(
        &tg,
        "deleteMessage",
        json!({ "chat_id": 42, "message_id": 2 }),
    )
    .await;
    assert_eq!((status, &deleted["result"]), (200, &json!(true)));
    assert!(tg.sent(42)[0].deleted);
    let (_, again) = call(
        &tg,
        "deleteMessage",
        json!({ "chat_id": 42, "message_id": 2 }),
    )
    .await;
    bad_request(&again, "message to delete not found");
    let (_, gone) = call(
        &tg,
        "editMessageText",
        json!({ "chat_id": 42, "message_id": 2, "text": "zzz" }),
    )
    .await;
    bad_request(&gone, "message to edit not found");
}

#[tokio::test]
async fn text_length_empty_chat_and_reply_errors() {
    let tg = with_private_chat().await;
    let (status, long) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "a".repeat(4097) }),
    )
    .await;
    assert_eq!(status, 400);
    bad_request(&long, "message is too long");
    let (status, _) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "a".repeat(4096) }),
    )
    .await;
    assert_eq!(status, 200);
    // UTF-16 code units: 2049 emoji are 4098 units.
    let (_, emoji) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "😀".repeat(2049) }),
    )
    .await;
    bad_request(&emoji, "message is too long");
    let (_, empty) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "  " })).await;
    bad_request(&empty, "message text is empty");
    let (_, nowhere) = call(&tg, "sendMessage", json!({ "chat_id": 777, "text": "x" })).await;
    bad_request(&nowhere, "chat not found");
    let (_, no_reply) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "x", "reply_parameters": { "message_id": 50 } }),
    )
    .await;
    bad_request(&no_reply, "message to be replied not found");
    let (status, _) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "x", "reply_parameters": { "message_id": 50, "allow_sending_without_reply": true } })).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn parse_mode_errors() {
    let tg = with_private_chat().await;
    let (_, dot) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "Done.", "parse_mode": "MarkdownV2" }),
    )
    .await;
    bad_request(
        &dot,
        "can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'",
    );
    let (_, bold) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "*bold", "parse_mode": "MarkdownV2" }),
    )
    .await;
    bad_request(
        &bold,
        "can't parse entities: Can't find end of Bold entity at byte offset 0",
    );
    let (_, html) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "<b>bold", "parse_mode": "HTML" }),
    )
    .await;
    bad_request(
        &html,
        "can't parse entities: Can't find end tag corresponding to start tag \"b\"",
    );
    let (status, ok) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": 42, "text": "*Done*\\.", "parse_mode": "MarkdownV2" }),
    )
    .await;
    assert_eq!(status, 200);
    let (_, edit) = call(&tg, "editMessageText", json!({ "chat_id": 42, "message_id": ok["result"]["message_id"], "text": "a-b", "parse_mode": "MarkdownV2" })).await;
    bad_request(
        &edit,
        "can't parse entities: Character '-' is reserved and must be escaped with the preceding '\\'",
    );
    assert_eq!(tg.sent(42)[0].parse_mode.as_deref(), Some("MarkdownV2"));
}

#[tokio::test]
async fn forum_general_topic_is_rejected_and_topics_work() {
    let tg = FakeTelegram::start().await.unwrap();
    tg.add_chat(ChatSpec::forum(FORUM, "Team"));
    let (status, created) = call(
        &tg,
        "CreateForumTopic",
        json!({ "chat_id": FORUM, "name": "Deploys" }),
    )
    .await;
    assert_eq!(status, 200);
    let topic = created["result"]["message_thread_id"].as_i64().unwrap();
    assert_eq!(created["result"]["name"], "Deploys");
    assert!(created["result"]["icon_color"].is_i64());
    assert_eq!(tg.topics(FORUM)[0].name, "Deploys");

    let (status, general) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": FORUM, "text": "x", "message_thread_id": 1 }),
    )
    .await;
    assert_eq!(status, 400);
    bad_request(&general, "message thread not found");
    let (_, unknown) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": FORUM, "text": "x", "message_thread_id": 999 }),
    )
    .await;
    bad_request(&unknown, "message thread not found");

    let (status, in_topic) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": FORUM, "text": "deployed", "message_thread_id": topic }),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(in_topic["result"]["message_thread_id"], topic);
    assert_eq!(in_topic["result"]["is_topic_message"], true);
    let (status, plain) = call(
        &tg,
        "sendMessage",
        json!({ "chat_id": FORUM, "text": "general" }),
    )
    .await;
    assert_eq!(status, 200);
    assert!(plain["result"].get("message_thread_id").is_none());

    for thread in [1, topic] {
        let (status, ok) = call(
            &tg,
            "sendChatAction",
            json!({ "chat_id": FORUM, "action": "typing", "message_thread_id": thread }),
        )
        .await;
        assert_eq!((status, &ok["result"]), (200, &json!(true)));
    }
    let (_, bad_action) = call(
        &tg,
        "sendChatAction",
        json!({ "chat_id": FORUM, "action": "dancing" }),
    )
    .await;
    bad_request(&bad_action, "wrong parameter action in request");
    assert_eq!(
        tg.chat_actions(FORUM),
        vec![
            ChatAction {
                action: "typing".into(),
                thread_id: Some(1)
            },
            ChatAction {
                action: "typing".into(),
                thread_id: Some(topic)
            },
        ]
    );
    let sent = tg.sent(FORUM);
    assert_eq!(
        sent.iter().map(|m| m.thread_id).collect::<Vec<_>>(),
        vec![Some(topic), None]
    );

    tg.add_chat(ChatSpec::group(-4001, "Pals"));
    let (_, not_forum) = call(
        &tg,
        "createForumTopic",
        json!({ "chat_id": -4001, "name": "x" }),
    )
    .await;
    bad_request(&not_forum, "the chat is not a forum");
}

#[tokio::test]
async fn commands_webhook_and_callbacks() {
    let tg = FakeTelegram::start().await.unwrap();
    let commands = json!([{ "command": "stop", "description": "Stop the run" }, { "command": "new", "description": "New session" }]);
    let (status, ok) = call(&tg, "setMyCommands", json!({ "commands": commands })).await;
    assert_eq!((status, &ok["result"]), (200, &json!(true)));
    assert_eq!(
        tg.commands()[0],
        BotCommand {
            command: "stop".into(),
            description: "Stop the run".into()
        }
    );
    let (_, got) = call(&tg, "getMyCommands", json!({})).await;
    assert_eq!(got["result"], commands);
    let (_, invalid) = call(
        &tg,
        "setMyCommands",
        json!({ "commands": [{ "command": "Stop", "description": "x" }] }),
    )
    .await;
    bad_request(&invalid, "BOT_COMMAND_INVALID");
    let (_, deleted) = call(&tg, "deleteMyCommands", json!({})).await;
    assert_eq!(deleted["result"], true);
    assert!(tg.commands().is_empty());

    let (_, set) = call(
        &tg,
        "setWebhook",
        json!({ "url": "https://example.invalid/hook" }),
    )
    .await;
    assert_eq!(set["result"], true);
    let (status, _) = call(&tg, "getUpdates", json!({})).await;
    assert_eq!(status, 409);
    let (_, info) = call(&tg, "getWebhookInfo", json!({})).await;
    assert_eq!(info["result"]["url"], "https://example.invalid/hook");
    call(&tg, "deleteWebhook", json!({})).await;
    let (status, _) = call(&tg, "getUpdates", json!({})).await;
    assert_eq!(status, 200);
    let (_, answered) = call(
        &tg,
        "answerCallbackQuery",
        json!({ "callback_query_id": "1" }),
    )
    .await;
    assert_eq!(answered["result"], true);
}

#[tokio::test]
async fn unknown_method_is_404_and_wrong_token_is_401() {
    let tg = FakeTelegram::start().await.unwrap();
    let (status, body) = call(&tg, "sendTelepathy", json!({})).await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({ "ok": false, "error_code": 404, "description": "Not Found" })
    );
    assert_eq!(tg.calls().last().unwrap().method, "sendtelepathy");

    let url = format!("{}/bot999:WRONG/getMe", tg.api_url());
    let response = reqwest::Client::new()
        .post(url)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({ "ok": false, "error_code": 401, "description": "Unauthorized" })
    );

    let response = reqwest::get(format!("{}/nothing", tg.api_url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    // A double slash (api URL with a trailing slash) still reaches the method.
    let url = format!("{}//bot{}/getMe", tg.api_url(), tg.token());
    let response = reqwest::Client::new()
        .post(url)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}
