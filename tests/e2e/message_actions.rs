//! End-to-end, the `message` tool's actions through `chela gateway` (the fake model calls
//! them on request): on a fake Telegram, a reaction to the message being answered, a send
//! that reports its id, that message edited, pinned and deleted, a poll, an edit of someone
//! else's message refused, and a group whose `messaging` profile refuses pinning by policy;
//! on a fake Discord, react, edit, pin, delete and a poll in a DM.

use crate::common;

use chela_testkit::discord::{ChannelSpec, UserSpec as DcUser};
use chela_testkit::{ChatSpec, UserSpec};
use common::discord::DcSetup;
use common::telegram::{Gateway, TgConfig, TgSetup, at_bot, dm};

/// Ann's Telegram id, and a group where the messaging profile applies.
const ANN: i64 = 42;
const GROUP: i64 = -4001;

/// The id of the bot's live message in `chat` whose text is `text`.
fn tg_id(s: &TgSetup, chat: i64, text: &str) -> i64 {
    let found = s.sent(chat).into_iter().find(|m| m.text == text);
    found
        .unwrap_or_else(|| panic!("no {text:?}: {:#?}", s.sent(chat)))
        .message_id
}

/// Ann sends `text` in `chat`; waits for the bot's answer starting with `answer`.
async fn tg_turn(s: &TgSetup, gw: &mut Gateway, chat: ChatSpec, text: &str, answer: &str) -> i64 {
    let id =
        s.tg.user_sends(chat.clone(), UserSpec::new(ANN, "Ann"), text);
    let chat = chat.id;
    gw.wait(s, answer, |s| {
        s.texts(chat).iter().any(|t| t.starts_with(answer))
    })
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_telegram_the_agent_reacts_edits_pins_polls_and_deletes_its_own_only() {
    let tables = format!("[tools.groups.\"telegram:{GROUP}\"]\nprofile = \"messaging\"\n");
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &tables,
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (chat, _) = dm(ANN, "Ann");
    let react = r#"tool message {"action": "react", "emoji": "👍"}"#;
    let asked = tg_turn(&s, &mut gw, chat.clone(), react, "done: reacted").await;
    assert_eq!(s.tg.reactions(ANN, asked), ["👍"]);

    let send = r#"tool message {"text": "draft note"}"#;
    tg_turn(&s, &mut gw, chat.clone(), send, "done: sent to").await;
    let note = tg_id(&s, ANN, "draft note");
    let reported = format!("; message id {note})");
    // The answer quoting the tool's result may still be streaming: wait for all of it.
    gw.wait(&s, "the whole report of the send", |s| {
        s.texts(ANN).iter().any(|t| t.ends_with(&reported))
    })
    .await;
    assert!(
        s.texts(ANN).iter().any(|t| t.ends_with(&reported)),
        "{:?}",
        s.texts(ANN)
    );

    let edit = format!(
        r#"tool message {{"action": "edit", "message_id": "{note}", "text": "final note"}}"#
    );
    tg_turn(&s, &mut gw, chat.clone(), &edit, "done: edited").await;
    assert_eq!(tg_id(&s, ANN, "final note"), note);
    let pin = format!(r#"tool message {{"action": "pin", "message_id": {note}}}"#);
    tg_turn(&s, &mut gw, chat.clone(), &pin, "done: pinned").await;
    assert_eq!(s.tg.pinned(ANN), [note]);

    let poll = r#"tool message {"action": "poll", "question": "Lunch?", "options": ["pizza", "soup"], "multiple": true}"#;
    tg_turn(&s, &mut gw, chat.clone(), poll, "done: sent a poll").await;
    let polls = s.tg.polls(ANN);
    assert_eq!(polls.len(), 1, "{polls:?}");
    assert_eq!(polls[0].1["question"], "Lunch?");
    assert_eq!(polls[0].1["allows_multiple_answers"], true);

    // Ann's own message is not the bot's to edit: refused before Telegram is asked.
    let hijack =
        format!(r#"tool message {{"action": "edit", "message_id": "{asked}", "text": "mine"}}"#);
    tg_turn(
        &s,
        &mut gw,
        chat.clone(),
        &hijack,
        &format!("done: message {asked} is not one you sent"),
    )
    .await;
    let edits_of_ann = s.tg.calls().into_iter().filter(|c| {
        c.method == "editmessagetext"
            && c.body["message_id"].to_string().trim_matches('"') == asked.to_string()
    });
    assert_eq!(edits_of_ann.count(), 0);

    let delete = format!(r#"tool message {{"action": "delete", "message_id": "{note}"}}"#);
    tg_turn(&s, &mut gw, chat, &delete, "done: deleted").await;
    assert!(s.sent(ANN).iter().all(|m| m.message_id != note));

    // The group's messaging profile reacts, but pinning is not in it.
    let group = ChatSpec::group(GROUP, "Team");
    let pin = format!("{} tool message {{\"action\": \"pin\"}}", at_bot());
    let asked = tg_turn(
        &s,
        &mut gw,
        group.clone(),
        &pin,
        "done: The tool message:pin is not allowed",
    )
    .await;
    assert!(s.tg.pinned(GROUP).is_empty());
    let react = format!(
        "{} tool message {{\"action\": \"react\", \"emoji\": \"🎉\"}}",
        at_bot()
    );
    let reacted = tg_turn(&s, &mut gw, group, &react, "done: reacted").await;
    assert_eq!(s.tg.reactions(GROUP, reacted), ["🎉"]);
    assert!(s.tg.reactions(GROUP, asked).is_empty());
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_discord_the_agent_reacts_edits_pins_polls_and_deletes_its_own() {
    const CHAN: u64 = 2_000_070;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let ann = DcUser::new(7001, "ann");
    let mut turn = async |text: &str, answer: &str| -> u64 {
        let id = s.dc.user_sends(ChannelSpec::dm(CHAN), ann.clone(), text);
        gw.wait(&s, answer, |s| {
            s.texts(CHAN).iter().any(|t| t.starts_with(answer))
        })
        .await;
        id
    };
    let asked = turn(
        r#"tool message {"action": "react", "emoji": "👍"}"#,
        "done: reacted",
    )
    .await;
    assert_eq!(s.dc.reactions(CHAN, asked), ["👍"]);

    turn(r#"tool message {"text": "draft note"}"#, "done: sent to").await;
    let note = s
        .sent(CHAN)
        .into_iter()
        .find(|m| m.content == "draft note")
        .unwrap()
        .id;
    let edit = format!(
        r#"tool message {{"action": "edit", "message_id": "{note}", "text": "final note"}}"#
    );
    turn(&edit, "done: edited").await;
    let edited = s.sent(CHAN).into_iter().find(|m| m.id == note).unwrap();
    assert_eq!(edited.content, "final note");
    turn(
        &format!(r#"tool message {{"action": "pin", "message_id": "{note}"}}"#),
        "done: pinned",
    )
    .await;
    assert_eq!(s.dc.pinned(CHAN), [note]);

    let poll =
        r#"tool message {"action": "poll", "question": "Lunch?", "options": ["pizza", "soup"]}"#;
    turn(poll, "done: sent a poll").await;
    let polls = s.dc.polls(CHAN);
    assert_eq!(polls.len(), 1, "{polls:?}");
    assert_eq!(polls[0].1["question"]["text"], "Lunch?");
    assert_eq!(polls[0].1["answers"][1]["poll_media"]["text"], "soup");

    let hijack = format!(r#"tool message {{"action": "delete", "message_id": "{asked}"}}"#);
    turn(
        &hijack,
        &format!("done: message {asked} is not one you sent"),
    )
    .await;
    turn(
        &format!(r#"tool message {{"action": "delete", "message_id": "{note}"}}"#),
        "done: deleted",
    )
    .await;
    assert!(s.sent(CHAN).iter().all(|m| m.id != note));
    assert!(
        s.dc.messages(CHAN)
            .iter()
            .any(|m| m["id"].as_str() == Some(asked.to_string().as_str())),
        "Ann's stays"
    );
    gw.stop().await;
}
