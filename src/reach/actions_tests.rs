//! The `message` tool's actions through the gateway, on the test channel: sends report their
//! ids, only the agent's own messages are edited and deleted, polls are never edited, and a
//! reaction or a pin without an id goes to the message the run answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use chela_channel::{Channel, Inbound, Poll, Sender};

use crate::agent::tools::message_action::MessageAction;
use crate::agent::tools::sessions::{Caller, SessionsApi};
use crate::config::{Config, ProviderKind};
use crate::gateway::Gateway;
use crate::reach::ReachTools;
use crate::store::PendingTurn;
use crate::test_channel::{TestChannel, direct_chat};

const KEY: &str = "agent:main:test:direct:7";

/// A gateway on the test channel.
async fn started(dir: &std::path::Path) -> (Gateway, Arc<TestChannel>, ReachTools) {
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = dir.join("store");
    config.agent.workspace = dir.join("ws");
    let channel = TestChannel::new(1_000);
    let gateway = Gateway::start(config, vec![channel.clone() as Arc<dyn Channel>])
        .await
        .unwrap();
    let api = gateway.reach_tools();
    (gateway, channel, api)
}

/// A run `run_id` of the test chat's session.
fn caller(run_id: &str) -> Caller {
    Caller {
        session: KEY.into(),
        run_id: run_id.into(),
        reply_to: Some(direct_chat()),
    }
}

fn edit(id: &str, text: &str) -> MessageAction {
    MessageAction::Edit {
        message_id: id.into(),
        text: text.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_messages_the_agent_sent_are_edited_or_deleted_and_polls_are_never_edited() {
    let dir = tempfile::tempdir().unwrap();
    let (_gateway, channel, api) = started(dir.path()).await;
    let sent = api
        .send(caller("run-1"), None, "draft".into())
        .await
        .unwrap();
    assert!(sent.ends_with("; message id s1)"), "{sent}");

    // Another session's run in the same conversation does not touch it.
    let other = Caller {
        session: "agent:main:test:direct:8".into(),
        ..caller("run-9")
    };
    let refused = api.act(other, None, edit("s1", "hijacked")).await;
    assert!(refused.is_err(), "{refused:?}");
    let edited = api.act(caller("run-2"), None, edit("s1", "final")).await;
    assert_eq!(edited.unwrap(), "edited message s1");
    let refused = api.act(caller("run-2"), None, edit("u9", "mine now")).await;
    let refused = refused.unwrap_err().to_string();
    assert!(
        refused.contains("message u9 is not one you sent"),
        "{refused}"
    );

    let poll = Poll {
        question: "Lunch?".into(),
        options: vec!["pizza".into(), "soup".into()],
        multiple: false,
    };
    let polled = api
        .act(caller("run-2"), None, MessageAction::Poll(poll))
        .await
        .unwrap();
    assert!(polled.ends_with("message id s2)"), "{polled}");
    let refused = api.act(caller("run-2"), None, edit("s2", "x")).await;
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("a poll cannot be edited")
    );

    for id in ["s1", "s2"] {
        let delete = MessageAction::Delete {
            message_id: id.into(),
        };
        let deleted = api.act(caller("run-3"), None, delete).await.unwrap();
        assert_eq!(deleted, format!("deleted message {id}"));
    }
    // Deleted: no longer the agent's to edit.
    assert!(
        api.act(caller("run-3"), None, edit("s1", "y"))
            .await
            .is_err()
    );
    let calls = channel.calls();
    let acted: Vec<&String> = calls.iter().filter(|c| !c.starts_with("send")).collect();
    assert_eq!(
        acted,
        [
            "edit final",
            "poll Lunch? [pizza|soup]",
            "delete s1",
            "delete s2"
        ],
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_and_pins_go_to_the_message_named_or_the_one_the_run_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, channel, api) = started(dir.path()).await;
    let inbound = Inbound {
        conversation: direct_chat(),
        sender: Sender {
            id: "7".into(),
            name: "Ann".into(),
            username: None,
        },
        message_id: "u5".into(),
        text: "pin this".into(),
        reply_to: None,
        mentioned: true,
        timestamp_ms: 1,
        interaction: None,
        attachments: Vec::new(),
    };
    let turn = PendingTurn {
        session_key: KEY.into(),
        inbound,
        queued_ms: 1,
    };
    let seq = gateway.store().enqueue(&turn).await.unwrap();
    let run = format!("run-{seq}");

    let react = |id: Option<&str>| MessageAction::React {
        message_id: id.map(str::to_owned),
        emoji: "👍".into(),
    };
    let done = api.act(caller(&run), None, react(None)).await.unwrap();
    assert_eq!(done, "reacted 👍 to message u5");
    api.act(caller(&run), None, react(Some("u3")))
        .await
        .unwrap();
    let pin = MessageAction::Pin { message_id: None };
    assert_eq!(
        api.act(caller(&run), None, pin).await.unwrap(),
        "pinned message u5"
    );
    // A run that answers no message must name one.
    let pin = MessageAction::Pin { message_id: None };
    let refused = api.act(caller("run-999"), None, pin).await.unwrap_err();
    assert!(
        refused.to_string().contains("pin needs `message_id`"),
        "{refused}"
    );
    assert_eq!(channel.calls(), ["react u5 👍", "react u3 👍", "pin u5"]);
}
