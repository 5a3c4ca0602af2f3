//! Directory methods (`users.info`, `conversations.open`, `conversations.info`) and
//! ephemeral messages.

use serde_json::json;

use super::Api;
use crate::slack::{ChannelSpec, FakeSlack, UserSpec};

#[tokio::test]
async fn users_conversations_and_ephemerals() {
    let slack = FakeSlack::start().await.unwrap();
    slack.add_user(&UserSpec::new("U2", "bo").admin());
    slack.add_channel(&ChannelSpec::private("G1", "secret"));
    let api = Api::new(&slack);
    let user = api.ok("users.info", json!({ "user": "U2" })).await;
    assert_eq!(user["user"]["name"], "bo");
    assert_eq!(user["user"]["is_admin"], true);
    assert_eq!(user["user"]["profile"]["display_name"], "bo");
    assert_eq!(
        api.error("users.info", json!({ "user": "U9" })).await,
        "user_not_found"
    );
    let opened = api.ok("conversations.open", json!({ "users": "U2" })).await;
    assert_eq!(opened["channel"]["id"], "DU2");
    let open_unknown = json!({ "users": "U9" });
    assert_eq!(
        api.error("conversations.open", open_unknown).await,
        "user_not_found"
    );
    let info = api
        .ok("conversations.info", json!({ "channel": "DU2" }))
        .await;
    assert_eq!(
        (
            info["channel"]["is_im"].clone(),
            info["channel"]["user"].clone()
        ),
        (json!(true), json!("U2"))
    );
    let info = api
        .ok("conversations.info", json!({ "channel": "G1" }))
        .await;
    assert_eq!(info["channel"]["name"], "secret");
    assert_eq!(info["channel"]["is_private"], true);
    assert_eq!(info["channel"]["is_group"], true);
    let unknown = json!({ "channel": "C9" });
    assert_eq!(
        api.error("conversations.info", unknown).await,
        "channel_not_found"
    );

    api.ok(
        "chat.postMessage",
        json!({ "channel": "DU2", "text": "hi bo" }),
    )
    .await;
    assert_eq!(slack.sent("DU2")[0].text, "hi bo");
    let answer = api
        .ok(
            "chat.postEphemeral",
            json!({ "channel": "G1", "user": "U2", "text": "psst" }),
        )
        .await;
    let ephemerals = slack.ephemerals();
    assert_eq!(
        ephemerals[0].message_ts,
        answer["message_ts"].as_str().unwrap()
    );
    assert_eq!(
        (ephemerals[0].user.as_str(), ephemerals[0].text.as_str()),
        ("U2", "psst")
    );
    assert!(slack.sent("G1").is_empty());
}
