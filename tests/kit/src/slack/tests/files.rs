//! Files: the bot's upload flow and downloads of users' files.

use reqwest::StatusCode;
use serde_json::json;

use super::{Api, ann, general};
use crate::slack::FakeSlack;

#[tokio::test]
async fn upload_flow_shares_files_in_a_message() {
    let slack = FakeSlack::start().await.unwrap();
    slack.add_channel(&general());
    let api = Api::new(&slack);
    let reserved = api
        .ok(
            "files.getUploadURLExternal",
            json!({ "filename": "notes.txt", "length": "5" }),
        )
        .await;
    let file_id = reserved["file_id"].as_str().unwrap().to_owned();
    let upload_url = reserved["upload_url"].as_str().unwrap();
    assert_eq!(upload_url, format!("{}/upload/{file_id}", slack.base_url()));
    let response = api
        .http
        .post(upload_url)
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "OK - 5");
    assert_eq!(slack.uploaded(&file_id).as_deref(), Some(&b"hello"[..]));

    // A multipart upload of a second file, never completed with a channel.
    let second = api
        .ok(
            "files.getUploadURLExternal",
            json!({ "filename": "b.bin", "length": 3 }),
        )
        .await;
    let part = reqwest::multipart::Part::bytes(vec![1u8, 2, 3]).file_name("b.bin");
    let form = reqwest::multipart::Form::new().part("file", part);
    let url = second["upload_url"].as_str().unwrap();
    let response = api.http.post(url).multipart(form).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "OK - 3");
    let second_id = second["file_id"].as_str().unwrap();
    let unshared = json!({ "files": [{ "id": second_id }] });
    api.ok("files.completeUploadExternal", unshared).await;
    assert_eq!(slack.uploaded(second_id), Some(vec![1, 2, 3]));
    assert!(slack.sent("C1").is_empty());

    let never = api
        .ok(
            "files.getUploadURLExternal",
            json!({ "filename": "c.txt", "length": 1 }),
        )
        .await;
    let missing = json!({ "files": [{ "id": never["file_id"] }], "channel_id": "C1" });
    assert_eq!(
        api.error("files.completeUploadExternal", missing).await,
        "file_not_found"
    );

    let files = json!([{ "id": file_id, "title": "Notes" }]).to_string();
    let done = api
        .form(
            "files.completeUploadExternal",
            &[
                ("files", &files),
                ("channel_id", "C1"),
                ("initial_comment", "here"),
            ],
        )
        .await;
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(
        done["files"],
        json!([{ "id": file_id, "name": "notes.txt", "title": "Notes" }])
    );
    let sent = slack.sent("C1");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "here");
    assert_eq!(sent[0].files, [(file_id.clone(), "notes.txt".to_owned())]);
    let history = api
        .ok("conversations.history", json!({ "channel": "C1" }))
        .await;
    assert_eq!(history["messages"][0]["files"][0]["id"], file_id.as_str());
}

#[tokio::test]
async fn users_files_download_only_with_the_bot_token() {
    let slack = FakeSlack::start().await.unwrap();
    let ts = slack.user_sends_file(
        &general(),
        &ann(),
        "see this",
        "my pic.png",
        "image/png",
        b"PNGDATA",
    );
    let message = slack.messages("C1").pop().unwrap();
    assert_eq!(message["ts"], ts.as_str());
    assert_eq!(message["subtype"], "file_share");
    let file = &message["files"][0];
    assert_eq!(file["name"], "my pic.png");
    assert_eq!(file["mimetype"], "image/png");
    assert_eq!(file["filetype"], "png");
    assert_eq!(file["size"], 7);
    let url = file["url_private_download"].as_str().unwrap();
    assert_eq!(file["url_private"], url);
    assert!(url.ends_with("/my%20pic.png"), "{url}");

    let http = reqwest::Client::new();
    let refused = http.get(url).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("<html>"));
    let wrong = http
        .get(url)
        .bearer_auth("xoxb-other")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let got = http
        .get(url)
        .bearer_auth(FakeSlack::BOT_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(got.bytes().await.unwrap().as_ref(), b"PNGDATA");
    assert_eq!(slack.downloads(), [file["id"].as_str().unwrap()]);
}
