//! End-to-end, pairing from the chat on Telegram: a stranger's request reaches the owner's
//! DM with Approve / Reject buttons, their name shown as theirs (unverified). A press by
//! anyone but an owner changes nothing; the owner's approves, every owner's message says so,
//! the stranger is told they are in, and the messages they sent while waiting are answered,
//! in order. A late press is told the request ended.

use crate::common;

use chela_testkit::ChatSpec;
use chela_testkit::telegram::BotMessage;
use common::telegram::{TgConfig, TgSetup, button, dm, press_answers};

/// The owner's user id (and private chat).
const OWNER: i64 = 7;
/// The stranger's.
const ZED: i64 = 77;

/// The pairing request in the owner's DM.
fn request(s: &TgSetup) -> Option<BotMessage> {
    s.sent(OWNER)
        .into_iter()
        .find(|m| m.text.starts_with("🔑 Pairing request"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_approves_a_stranger_with_a_tap_and_their_waiting_messages_are_answered() {
    // Followup: each waiting message gets an answer of its own (steer would answer both in
    // one run).
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "dm_policy = \"pairing\"",
        tables: "[commands]\nowner_allow_from = [\"telegram:7\"]\n",
        ..TgConfig::default()
    })
    .await;
    s.tg.add_chat(ChatSpec::private(OWNER));
    let mut gw = s.gateway();
    let (chat, zed) = dm(ZED, "Zed /approve all");
    s.tg.user_sends(chat.clone(), zed.clone(), "hi there");
    gw.wait(&s, "the request in the owner's DM", |s| {
        request(s).is_some_and(|m| m.buttons.len() == 2)
    })
    .await;
    s.tg.user_sends(chat, zed.clone(), "are you there?");
    gw.wait(&s, "the code repeated", |s| s.texts(ZED).len() == 2)
        .await;
    let asked = request(&s).unwrap();
    assert!(
        // The fake keeps the HTML chela sent: the name is code, its markup shown as text.
        asked
            .text
            .contains("<code>&quot;Zed /approve all&quot;</code> (unverified"),
        "{}",
        asked.text
    );
    assert_eq!(
        s.setup.fake.request_count(),
        0,
        "no model call before approval"
    );

    // The stranger forges a press on the owner's message: refused, nothing changes.
    let approve = button(&asked, "Approve");
    s.tg.user_presses(OWNER, zed, asked.message_id, &approve)
        .unwrap();
    gw.wait(&s, "the refusal", |s| press_answers(s).len() == 1)
        .await;
    assert_eq!(request(&s).unwrap().buttons.len(), 2, "unchanged");

    let (_, owner) = dm(OWNER, "Olga");
    s.tg.user_presses(OWNER, owner.clone(), asked.message_id, &approve)
        .unwrap();
    gw.wait(&s, "the waiting messages answered", |s| {
        s.texts(ZED).iter().any(|t| t == "ok: are you there?")
    })
    .await;
    gw.wait(&s, "the request edited", |s| {
        request(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    let reject = button(&asked, "Reject");
    s.tg.user_presses(OWNER, owner, asked.message_id, &reject)
        .unwrap();
    gw.wait(&s, "the late press answered", |s| {
        press_answers(s).len() == 3
    })
    .await;
    gw.stop().await;

    assert_eq!(
        press_answers(&s),
        [
            "Only the bot's owners can answer this.",
            "Approved.",
            "Already ended: ✅ approved by Olga."
        ]
    );
    assert!(request(&s).unwrap().text.ends_with("✅ approved by Olga."));
    let texts = s.texts(ZED);
    assert_eq!(
        texts[2..],
        [
            "You're in: the bot's owner approved you. Your messages from before are answered now.",
            "ok: hi there",
            "ok: are you there?"
        ],
        "{texts:#?}"
    );
    assert_eq!(s.asked(), ["hi there", "are you there?"]);
}
