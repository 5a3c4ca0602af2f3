//! Socket Mode: hello, envelopes and acks, redelivery, events while no connection is open,
//! disconnects, buttons and slash commands.

use std::time::Duration;

use serde_json::json;

use super::{Api, Seen, Socket, WAIT, ann, general};
use crate::slack::{ChannelSpec, FakeSlack};

const SHORT: Duration = Duration::from_millis(300);

#[tokio::test]
async fn hello_then_events_in_envelopes_that_are_acked() {
    let slack = FakeSlack::start().await.unwrap();
    let (mut socket, hello) = Socket::connect(&slack).await;
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["num_connections"], 1);
    assert_eq!(hello["connection_info"]["app_id"], "A1");
    assert!(slack.wait_for(FakeSlack::connected, WAIT).await);

    let ts = slack.user_sends(&ChannelSpec::im("U1"), &ann(), "hi <@UBOT>");
    let envelope = socket.recv().await;
    assert_eq!(envelope["type"], "events_api");
    assert_eq!(envelope["retry_attempt"], 0);
    assert_eq!(envelope["payload"]["type"], "event_callback");
    assert_eq!(envelope["payload"]["authorizations"][0]["user_id"], "UBOT");
    let event = &envelope["payload"]["event"];
    assert_eq!(event["type"], "message");
    assert_eq!(event["channel"], "DU1");
    assert_eq!(event["channel_type"], "im");
    assert_eq!(event["user"], "U1");
    assert_eq!(event["text"], "hi <@UBOT>");
    assert_eq!(
        (event["ts"].as_str(), event["event_ts"].as_str()),
        (Some(ts.as_str()), Some(ts.as_str()))
    );
    assert_eq!(
        event["blocks"][0]["elements"][0]["elements"][1]["user_id"],
        "UBOT"
    );
    socket.ack(&envelope, None).await;
    let id = envelope["envelope_id"].as_str().unwrap().to_owned();
    assert!(slack.wait_for(|s| s.acks() == [id.clone()], WAIT).await);
    assert!(slack.pending_envelopes().is_empty());

    // The bot's own message comes back as an event it must ignore.
    let api = Api::new(&slack);
    api.ok(
        "chat.postMessage",
        json!({ "channel": "DU1", "text": "hello ann" }),
    )
    .await;
    let own = socket.recv().await;
    assert_eq!(own["payload"]["event"]["bot_id"], "BBOT");
    assert_eq!(own["payload"]["event"]["user"], "UBOT");
    socket.ack(&own, None).await;

    let edited = slack.user_edits(&ChannelSpec::im("U1"), &ann(), &ts, "hi again");
    assert!(edited);
    let change = socket.recv().await;
    let event = &change["payload"]["event"];
    assert_eq!(event["subtype"], "message_changed");
    assert_eq!(event["message"]["text"], "hi again");
    assert_eq!(event["previous_message"]["text"], "hi <@UBOT>");
    socket.ack(&change, None).await;
    slack.user_joins(&general(), &ann());
    assert_eq!(
        socket.recv().await["payload"]["event"]["subtype"],
        "channel_join"
    );
}

#[tokio::test]
async fn unacked_envelopes_come_again_then_are_dropped() {
    let slack = FakeSlack::start().await.unwrap();
    slack.set_ack_timeout(Duration::from_millis(400));
    let (mut socket, _) = Socket::connect(&slack).await;
    slack.user_sends(&general(), &ann(), "one");
    let first = socket.recv().await;
    let again = socket.recv().await;
    assert_eq!(again["envelope_id"], first["envelope_id"]);
    assert_eq!(again["retry_attempt"], 1);
    assert_eq!(again["retry_reason"], "timeout");
    socket.ack(&again, None).await;
    socket.silent_for(SHORT).await;

    slack.set_ack_timeout(Duration::from_millis(100));
    slack.user_sends(&general(), &ann(), "two");
    for attempt in 0..=3 {
        assert_eq!(socket.recv().await["retry_attempt"], attempt);
    }
    socket.silent_for(SHORT).await;
    assert!(slack.wait_for(|s| s.dropped_envelopes() == 1, WAIT).await);
    assert!(slack.pending_envelopes().is_empty());
    assert_eq!(slack.envelopes_sent().len(), 6);
}

#[tokio::test]
async fn events_while_down_are_lost_unless_queued() {
    let slack = FakeSlack::start().await.unwrap();
    let lost = slack.user_sends(&general(), &ann(), "while down");
    assert_eq!(slack.messages("C1")[0]["ts"], lost.as_str());
    assert_eq!(slack.undelivered_events().len(), 1);
    let (mut socket, _) = Socket::connect(&slack).await;
    socket.silent_for(SHORT).await;
    drop(socket);
    assert!(slack.wait_for(|s| !s.connected(), WAIT).await);

    slack.set_deliver_while_down(true);
    let queued = slack.user_sends(&general(), &ann(), "queued");
    assert_eq!(slack.pending_envelopes().len(), 1);
    let (mut socket, hello) = Socket::connect(&slack).await;
    assert_eq!(hello["num_connections"], 1);
    let envelope = socket.recv().await;
    assert_eq!(envelope["payload"]["event"]["ts"], queued.as_str());
    assert_eq!(slack.connections_opened(), 2);
}

#[tokio::test]
async fn disconnect_and_dropped_connections() {
    let slack = FakeSlack::start().await.unwrap();
    slack.set_ack_timeout(Duration::from_secs(1));
    let (mut old, _) = Socket::connect(&slack).await;
    assert_eq!(slack.disconnect("refresh_requested"), 1);
    let frame = old.recv().await;
    assert_eq!(frame["type"], "disconnect");
    assert_eq!(frame["reason"], "refresh_requested");
    let (mut new, hello) = Socket::connect(&slack).await;
    assert_eq!(hello["num_connections"], 2);
    // Envelopes go to the new connection while the old one winds down.
    slack.user_sends(&general(), &ann(), "to the new one");
    let envelope = new.recv().await;
    new.ack(&envelope, None).await;
    assert!(matches!(
        old.next_within(WAIT).await,
        Some(Seen::Closed | Seen::Reset)
    ));
    assert!(slack.wait_for(|s| s.open_connections() == 1, WAIT).await);

    // An envelope out when the connection drops comes again on the next one.
    slack.user_sends(&general(), &ann(), "lost in flight");
    let unacked = new.recv().await;
    assert_eq!(slack.drop_connections(), 1);
    assert!(!slack.connected());
    assert!(matches!(
        new.next_within(WAIT).await,
        Some(Seen::Reset | Seen::Closed)
    ));
    let (mut third, _) = Socket::connect(&slack).await;
    let again = third.recv().await;
    assert_eq!(again["envelope_id"], unacked["envelope_id"]);
    assert_eq!(again["retry_attempt"], 1);
}

#[tokio::test]
async fn buttons_and_slash_commands_with_response_urls() {
    let slack = FakeSlack::start().await.unwrap();
    let (mut socket, _) = Socket::connect(&slack).await;
    let api = Api::new(&slack);
    slack.add_channel(&general());
    let posted = api
        .ok(
            "chat.postMessage",
            json!({ "channel": "C1", "text": "pick" }),
        )
        .await;
    let own = socket.recv().await;
    socket.ack(&own, None).await;
    let ts = posted["ts"].as_str().unwrap();
    let sent = slack.user_presses(&general(), &ann(), ts, "approve", "yes");
    let press = socket.recv().await;
    assert_eq!(press["envelope_id"], sent["envelope_id"]);
    assert_eq!(press["type"], "interactive");
    let payload = &press["payload"];
    assert_eq!(payload["type"], "block_actions");
    assert_eq!(payload["user"]["id"], "U1");
    assert_eq!(payload["container"]["message_ts"], ts);
    assert_eq!(payload["message"]["text"], "pick");
    assert_eq!(payload["actions"][0]["action_id"], "approve");
    assert_eq!(payload["actions"][0]["value"], "yes");
    socket.ack(&press, None).await;
    let url = payload["response_url"].as_str().unwrap();
    assert!(url.ends_with("/respond/1"), "{url}");
    let reply = json!({ "text": "done", "replace_original": true });
    let answer = api.http.post(url).json(&reply).send().await.unwrap();
    assert_eq!(answer.text().await.unwrap(), "ok");
    assert_eq!(slack.responses(1), [reply]);

    let n = slack.user_runs_command(&general(), &ann(), "/new", "fresh start");
    assert_eq!(n, 2);
    let command = socket.recv().await;
    assert!(
        command["payload"]["response_url"]
            .as_str()
            .unwrap()
            .ends_with("/respond/2")
    );
    assert_eq!(command["type"], "slash_commands");
    assert_eq!(command["accepts_response_payload"], true);
    assert_eq!(command["payload"]["command"], "/new");
    assert_eq!(command["payload"]["text"], "fresh start");
    assert_eq!(command["payload"]["channel_name"], "general");
    let ack = json!({ "text": "starting over" });
    socket.ack(&command, Some(ack.clone())).await;
    let id = command["envelope_id"].as_str().unwrap().to_owned();
    assert!(
        slack
            .wait_for(|s| s.ack_payloads() == [(id.clone(), ack.clone())], WAIT)
            .await
    );
}
