//! End-to-end, Slack's catch-up against the fake Slack: what was sent while `chela gateway`
//! was down (Slack keeps no events for an app that is not connected) is read back through
//! `conversations.history` and `conversations.replies`: DMs and thread replies, more than a
//! page of them oldest first, and a mention with its thread both sent while down.

use chela_testkit::slack::ChannelSpec;

use crate::common;
use crate::slack::{ann, bob};
use common::slack::{SlSetup, stop};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_sent_while_chela_was_down_is_caught_up() {
    let s = SlSetup::open().await;
    let dm = ChannelSpec::im("U1");
    let general = ChannelSpec::public("C1", "general");
    let gw = s.gateway().await;
    s.slack.user_sends(&dm, &ann(), "before");
    let topic = s.slack.user_sends(&general, &bob(), "<@UBOT> topic");
    s.wait("both answered", |s| {
        s.sent("DU1").len() == 1 && s.sent("C1").len() == 1
    })
    .await;
    stop(gw).await;

    s.slack.user_sends(&dm, &ann(), "while down one");
    s.slack.user_sends(&dm, &ann(), "while down two");
    s.slack
        .user_replies(&general, &bob(), &topic, "down in the thread");
    assert!(
        s.slack.undelivered_events().len() >= 3,
        "Slack does not keep them"
    );
    let gw = s.gateway().await;
    // Both missed DMs reach the model (the second steered into the first's run, or a run
    // of its own), and the thread's reply is answered.
    s.wait("the missed messages answered", |s| {
        let asked = serde_json::to_string(&s.setup.model_calls()).unwrap_or_default();
        s.sent("DU1").len() >= 2 && s.sent("C1").len() == 2 && asked.contains("while down two")
    })
    .await;
    stop(gw).await;

    let asked = s.asked();
    // Both missed DMs reach the model, the older first.
    let requests = serde_json::to_string(&s.setup.model_calls()).unwrap();
    let one = requests
        .find("while down one")
        .expect("the first missed DM was asked");
    let two = requests
        .find("while down two")
        .expect("the second missed DM was asked");
    assert!(one < two, "in the order they were sent");
    let thread = &s.sent("C1")[1];
    assert_eq!(thread.thread_ts.as_deref(), Some(topic.as_str()));
    assert_eq!(thread.text, "ok: down in the thread");
    assert!(s.slack.call_count("conversations.history") >= 1);
    assert!(s.slack.call_count("conversations.replies") >= 1);
    assert_eq!(
        asked.iter().filter(|a| a.as_str() == "before").count(),
        1,
        "nothing taken twice: {asked:#?}"
    );
}

/// The first model request whose text holds `needle`, as JSON text.
fn request_with(s: &SlSetup, needle: &str) -> Option<String> {
    s.setup
        .model_calls()
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .find(|c| c.contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_a_page_missed_in_a_dm_is_all_taken_oldest_first() {
    let s = SlSetup::open().await;
    // Collect mode with room for every missed message: the queued ones reach the model as
    // one turn, in the order they were taken (none folded into an overflow summary).
    let config = std::fs::read_to_string(s.setup.config()).unwrap().replacen(
        "mode = \"steer\"\n",
        "mode = \"collect\"\ncap = 200\n",
        1,
    );
    std::fs::write(s.setup.config(), config).unwrap();
    let dm = ChannelSpec::im("U1");
    let gw = s.gateway().await;
    s.slack.user_sends(&dm, &ann(), "before");
    s.wait("the first answer", |s| s.sent("DU1").len() == 1)
        .await;
    stop(gw).await;

    // Slack lists history newest first, 100 a page: 150 take two pages.
    for i in 1..=150 {
        s.slack.user_sends(&dm, &ann(), &format!("missed {i:03}"));
    }
    let gw = s.gateway().await;
    s.wait("the newest missed message asked", |s| {
        request_with(s, "missed 150").is_some()
    })
    .await;
    stop(gw).await;

    // Every one reached the model, the older first: a message's first mention in the
    // requests, in the order they were made, comes after the one before it.
    let requests = serde_json::to_string(&s.setup.model_calls()).unwrap();
    let mut last = 0;
    for i in 1..=150 {
        let at = requests
            .find(&format!("missed {i:03}"))
            .unwrap_or_else(|| panic!("missed {i:03} was not taken: {:#?}", s.asked()));
        assert!(at > last, "missed {i:03} is out of order: {:#?}", s.asked());
        last = at;
    }
    let pages = s
        .slack
        .calls()
        .into_iter()
        .filter(|c| c.method == "conversations.history")
        .count();
    assert!(pages >= 2, "paged through the history: {pages}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_and_its_thread_sent_while_chela_was_down_are_both_caught_up() {
    let s = SlSetup::open().await;
    let general = ChannelSpec::public("C1", "general");
    let gw = s.gateway().await;
    s.slack.user_sends(&general, &ann(), "<@UBOT> hello");
    s.wait("the first answer", |s| s.sent("C1").len() == 1)
        .await;
    stop(gw).await;

    // The thread has no cursor yet: only its parent, in the channel's history, leads to it.
    let topic = s.slack.user_sends(&general, &bob(), "<@UBOT> down topic");
    s.slack
        .user_replies(&general, &ann(), &topic, "down in the new thread");
    let gw = s.gateway().await;
    s.wait("the reply in the new thread asked", |s| {
        request_with(s, "down in the new thread").is_some()
    })
    .await;
    s.wait("an answer in the new thread", |s| {
        s.sent("C1")
            .iter()
            .any(|m| m.thread_ts.as_deref() == Some(topic.as_str()))
    })
    .await;
    stop(gw).await;

    let request = request_with(&s, "down in the new thread").unwrap();
    let (parent, reply) = (
        request.find("down topic").expect("the parent was taken"),
        request.find("down in the new thread").unwrap(),
    );
    assert!(parent < reply, "the parent first, in the thread's session");
    let replies_read = s
        .slack
        .calls()
        .iter()
        .any(|c| c.method == "conversations.replies" && c.params["ts"] == topic.as_str());
    assert!(replies_read, "{:#?}", s.calls_summary());
}
