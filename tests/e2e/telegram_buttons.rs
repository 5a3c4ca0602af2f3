//! End-to-end, tap to answer on Telegram: an exec approval comes with Allow once / Always /
//! Deny buttons; an owner's press answers it, the message is edited to say who answered
//! what and loses its buttons, a press after that is told the question ended; a press by
//! someone who is no owner is refused privately and changes nothing. The typed `/approve`
//! stays in the message for those who type. `/queue` and `/model` with nothing after them
//! offer their choices (for `/model`, the models the server lists) as buttons.

use crate::common;

use chela_testkit::telegram::{BotMessage, UserSpec};
use common::telegram::{TgConfig, TgSetup, button, dm, press_answers};

/// Exec needs an approval; `owners` may give it.
async fn setup(owners: &str, timeout_s: u64) -> TgSetup {
    let tables = format!(
        "[tools]\nexec_approvals = \"ask\"\napproval_timeout_s = {timeout_s}\n[commands]\nowner_allow_from = [{owners}]\n"
    );
    TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &tables,
        ..TgConfig::default()
    })
    .await
}

/// The bot's message in Ann's chat that asks for an approval.
fn question(s: &TgSetup) -> Option<BotMessage> {
    s.sent(42)
        .into_iter()
        .find(|m| m.text.starts_with("🔐 Approval needed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_press_answers_the_approval_and_the_message_says_who() {
    let s = setup("\"telegram:42\"", 120).await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann.clone(),
        r#"tool exec {"command": "touch pressed.txt"}"#,
    );
    gw.wait(&s, "the question with buttons", |s| {
        question(s).is_some_and(|m| m.buttons.len() == 3)
    })
    .await;
    let asked = question(&s).unwrap();
    let labels: Vec<&str> = asked.buttons.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["Allow once", "Always", "Deny"]);
    assert!(
        asked.text.contains("/approve "),
        "the typed form stays: {}",
        asked.text
    );
    for (_, data) in &asked.buttons {
        assert_eq!(data.len(), 32, "an opaque token: {data}");
        assert!(!asked.text.contains(data.as_str()));
    }
    assert!(
        !s.setup.path("ws/pressed.txt").exists(),
        "ran before approval"
    );

    let once = button(&asked, "Allow once");
    s.tg.user_presses(42, ann.clone(), asked.message_id, &once)
        .unwrap();
    gw.wait(&s, "the run's answer", |s| {
        s.texts(42).iter().any(|t| t.starts_with("done:"))
    })
    .await;
    assert!(s.setup.path("ws/pressed.txt").exists());
    gw.wait(&s, "the question edited to its answer", |s| {
        question(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    let ended = question(&s).unwrap();
    assert!(
        ended.text.ends_with("✅ allowed once by Ann."),
        "{}",
        ended.text
    );

    // A second press (a client still showing the old buttons) changes nothing.
    let deny = button(&asked, "Deny");
    s.tg.user_presses(42, ann, asked.message_id, &deny).unwrap();
    gw.wait(&s, "the late press answered", |s| {
        press_answers(s).len() == 2
    })
    .await;
    gw.stop().await;
    assert_eq!(
        press_answers(&s),
        ["Allowed once.", "Already ended: ✅ allowed once by Ann."]
    );
    let calls = s.tg.calls();
    let runs = calls.iter().filter(|c| c.method == "sendmessage");
    assert_eq!(
        runs.filter(|c| c.body["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("done:")))
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_by_someone_who_is_no_owner_is_refused_and_changes_nothing() {
    // Ann may talk to the bot but is no owner; nobody answers, so the approval expires.
    let s = setup("\"telegram:7\"", 3).await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann.clone(),
        r#"tool exec {"command": "touch refused.txt"}"#,
    );
    gw.wait(&s, "the question with buttons", |s| {
        question(s).is_some_and(|m| m.buttons.len() == 3)
    })
    .await;
    let asked = question(&s).unwrap();
    let once = button(&asked, "Allow once");
    s.tg.user_presses(42, ann.clone(), asked.message_id, &once)
        .unwrap();
    gw.wait(&s, "the refusal", |s| press_answers(s).len() == 1)
        .await;
    assert_eq!(
        press_answers(&s),
        ["Only the bot's owners can answer this (as /approve)."]
    );
    assert_eq!(question(&s).unwrap().buttons.len(), 3, "unchanged");
    gw.wait(&s, "the approval expired", |s| {
        question(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    let ended = question(&s).unwrap();
    assert!(
        ended.text.ends_with("⌛ no answer in time: denied."),
        "{}",
        ended.text
    );
    let mallory = UserSpec::new(666, "Mallory");
    s.tg.user_presses(42, mallory, asked.message_id, "forged-data")
        .unwrap();
    gw.wait(&s, "the forged press answered", |s| {
        press_answers(s).len() == 2
    })
    .await;
    gw.stop().await;
    assert_eq!(
        press_answers(&s)[1],
        "This question has ended, or waits on another node: type the answer the message shows (/approve, allow or deny, or the command)."
    );
    assert!(!s.setup.path("ws/refused.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_without_a_mode_offers_the_modes_and_a_press_sets_one() {
    let s = setup("\"telegram:7\"", 120).await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann.clone(), "/queue");
    let menu = |s: &TgSetup| {
        s.sent(42)
            .into_iter()
            .find(|m| m.text.starts_with("Queue: steer"))
    };
    gw.wait(&s, "the menu", |s| {
        menu(s).is_some_and(|m| m.buttons.len() == 5)
    })
    .await;
    let asked = menu(&s).unwrap();
    let labels: Vec<&str> = asked.buttons.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["steer", "followup", "collect", "interrupt", "Reset"]
    );
    // Ann is no owner: /queue is anyone's, so her press counts like her typing it.
    let collect = button(&asked, "collect");
    s.tg.user_presses(42, ann.clone(), asked.message_id, &collect)
        .unwrap();
    gw.wait(&s, "the mode set", |s| {
        s.texts(42).iter().any(|t| t.starts_with("Queue: collect"))
    })
    .await;
    gw.wait(&s, "the menu edited", |s| {
        menu(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    // The menu is used up: a second press says so and changes nothing.
    s.tg.user_presses(42, ann, asked.message_id, &button(&asked, "interrupt"))
        .unwrap();
    gw.wait(&s, "the late press answered", |s| {
        press_answers(s).len() == 2
    })
    .await;
    gw.stop().await;
    assert_eq!(
        press_answers(&s),
        [
            "Chosen: /queue collect",
            "This menu was used already: type the command to choose again."
        ]
    );
    assert!(menu(&s).unwrap().text.ends_with("Chosen: collect."));
    assert!(
        !s.texts(42)
            .iter()
            .any(|t| t.starts_with("Queue: interrupt")),
        "{:#?}",
        s.texts(42)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_left_open_by_a_kill_9_ends_at_the_next_start_and_loses_its_buttons() {
    let s = setup("\"telegram:42\"", 120).await;
    let mut gw = s.gateway_env(&[("RUST_LOG", "warn,chela::questions=debug")]);
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann.clone(),
        r#"tool exec {"command": "touch late.txt"}"#,
    );
    gw.wait(&s, "the question with buttons", |s| {
        question(s).is_some_and(|m| m.buttons.len() == 3)
    })
    .await;
    let asked = question(&s).unwrap();
    // Killed once the question is in the store (it is there before the run waits on it).
    gw.wait_log("question kept open in the store").await;
    gw.kill().await;

    // The next start ends the question the killed process left open: no button stays.
    let mut gw = s.gateway();
    gw.wait(&s, "the old question ended", |s| {
        s.sent(42)
            .iter()
            .any(|m| m.message_id == asked.message_id && m.buttons.is_empty())
    })
    .await;
    // A press a client still shows is told the question ended; nothing runs.
    s.tg.user_presses(42, ann, asked.message_id, &button(&asked, "Allow once"))
        .unwrap();
    gw.wait(&s, "the press answered", |s| !press_answers(s).is_empty())
        .await;
    gw.stop().await;
    let ended = s
        .sent(42)
        .into_iter()
        .find(|m| m.message_id == asked.message_id)
        .unwrap();
    assert!(
        ended
            .text
            .ends_with("⌛ ended: the gateway restarted; ask again."),
        "{}",
        ended.text
    );
    assert_eq!(
        press_answers(&s)[0],
        "This question has ended, or waits on another node: type the answer the message shows (/approve, allow or deny, or the command)."
    );
    assert!(!s.setup.path("ws/late.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_without_a_name_offers_the_servers_models_to_an_owner() {
    let s = setup("\"telegram:42\"", 120).await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann.clone(), "/model");
    let menu = |s: &TgSetup| {
        s.sent(42)
            .into_iter()
            .find(|m| m.text.starts_with("Model: openai/"))
    };
    gw.wait(&s, "the menu", |s| {
        menu(s).is_some_and(|m| !m.buttons.is_empty())
    })
    .await;
    let asked = menu(&s).unwrap();
    let labels: Vec<&str> = asked.buttons.iter().map(|(l, _)| l.as_str()).collect();
    // The fake model server lists one model (GET /v1/models).
    assert_eq!(labels, ["fake-model", "Default"]);
    s.tg.user_presses(42, ann, asked.message_id, &button(&asked, "fake-model"))
        .unwrap();
    gw.wait(&s, "the model chosen", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.contains("openai/fake-model (this conversation's"))
    })
    .await;
    gw.stop().await;
    assert_eq!(press_answers(&s), ["Chosen: /model fake-model"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_without_a_name_offers_no_menu_to_who_may_not_switch() {
    let s = setup("\"telegram:7\"", 120).await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "/model");
    gw.wait(&s, "the answer", |s| {
        s.texts(42).iter().any(|t| t.starts_with("Model: openai/"))
    })
    .await;
    gw.stop().await;
    let answer = s.sent(42);
    assert!(answer.iter().all(|m| m.buttons.is_empty()), "{answer:#?}");
}
