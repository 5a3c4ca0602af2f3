//! End-to-end, tap to answer on Discord: an exec approval comes with Allow once / Always /
//! Deny buttons (message components), here in a DM; a press is acknowledged at once with a private
//! deferred answer (Discord's 3 s), then answered privately. A press by someone who is no
//! owner is refused and changes nothing; an owner's answers the approval, the message is
//! edited to say who answered what and loses its buttons, and a late press is told the
//! question ended. `/queue` with no mode offers its modes as a select menu.

use crate::common;

use chela_testkit::discord::{BotMessage, ChannelSpec, InteractionInfo, UserSpec};
use common::discord::{DcConfig, DcSetup, Gateway};

/// Open DMs; ann (7001) owns the bot; exec needs an approval.
const ASKS: &str = "group_policy = \"open\"\ndm_policy = \"open\"\n[commands]\n\
                    owner_allow_from = [\"discord:7001\"]\n[tools]\nexec_approvals = \"ask\"\n\
                    approval_timeout_s = 120";
/// Ann's DM with the bot: exec runs in a DM (a guild channel has no exec).
const CHAN: u64 = 2_000_030;

fn ann() -> UserSpec {
    UserSpec::new(7001, "ann")
}

/// The bot's message in the channel that asks for an approval.
fn question(s: &DcSetup) -> Option<BotMessage> {
    s.sent(CHAN)
        .into_iter()
        .find(|m| m.content.starts_with("🔐 Approval needed"))
}

/// The custom_id of the button labelled `label` under `message`.
fn button(message: &BotMessage, label: &str) -> String {
    let found = message.buttons.iter().find(|(l, _)| l == label);
    found
        .map(|(_, id)| id.clone())
        .unwrap_or_else(|| panic!("no {label}: {message:#?}"))
}

/// Presses `label` under the question as `user`; the private answer it got.
async fn press(
    gw: &mut Gateway,
    s: &DcSetup,
    user: UserSpec,
    asked: &BotMessage,
    label: &str,
) -> InteractionInfo {
    let id =
        s.dc.user_presses(ChannelSpec::dm(CHAN), user, asked.id, &button(asked, label))
            .unwrap();
    gw.wait(s, "the private answer to the press", |s| {
        s.dc.interaction(id).is_some_and(|i| i.response.is_some())
    })
    .await;
    let info = s.dc.interaction(id).unwrap();
    assert_eq!((info.kind, info.message_id), (3, Some(asked.id)));
    assert_eq!(info.callback_type, Some(5), "deferred at once: {info:#?}");
    assert!(info.ephemeral, "only the presser sees it: {info:#?}");
    info
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_press_answers_the_approval_and_anyone_elses_is_refused() {
    let s = DcSetup::with(DcConfig {
        discord: ASKS,
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    s.dc.user_sends(
        ChannelSpec::dm(CHAN),
        ann(),
        r#"tool exec {"command": "touch pressed.txt"}"#,
    );
    gw.wait(&s, "the question with buttons", |s| {
        question(s).is_some_and(|m| m.buttons.len() == 3)
    })
    .await;
    let asked = question(&s).unwrap();
    let labels: Vec<&str> = asked.buttons.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["Allow once", "Always", "Deny"]);
    assert!(asked.content.contains("/approve "), "{}", asked.content);
    for (_, id) in &asked.buttons {
        assert_eq!(id.len(), 32, "an opaque token: {id}");
    }

    let bob = press(
        &mut gw,
        &s,
        UserSpec::new(7002, "bob"),
        &asked,
        "Allow once",
    )
    .await;
    assert_eq!(
        bob.response.as_deref(),
        Some("Only the bot's owners can answer this (as /approve).")
    );
    assert_eq!(question(&s).unwrap().buttons.len(), 3, "unchanged");
    assert!(
        !s.setup.path("ws/pressed.txt").exists(),
        "ran before approval"
    );

    let once = press(&mut gw, &s, ann(), &asked, "Allow once").await;
    assert_eq!(once.response.as_deref(), Some("Allowed once."));
    gw.wait(&s, "the run's answer", |s| {
        s.texts(CHAN).iter().any(|t| t.contains("done:"))
    })
    .await;
    assert!(s.setup.path("ws/pressed.txt").exists());
    gw.wait(&s, "the question edited to its answer", |s| {
        question(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    let ended = question(&s).unwrap();
    assert!(
        ended.content.ends_with("✅ allowed once by ann."),
        "{}",
        ended.content
    );

    let late = press(&mut gw, &s, ann(), &asked, "Deny").await;
    gw.stop().await;
    assert_eq!(
        late.response.as_deref(),
        Some("Already ended: ✅ allowed once by ann.")
    );
    let done = s.texts(CHAN).iter().filter(|t| t.contains("done:")).count();
    assert_eq!(done, 1, "{:#?}", s.texts(CHAN));
}

/// Pairing by DM; ann (7001) owns the bot.
const PAIRING: &str = "group_policy = \"open\"\ndm_policy = \"pairing\"\n[commands]\n\
                       owner_allow_from = [\"discord:7001\"]";
/// Ann's DM with the bot, and a stranger's.
const ANN_DM: u64 = 2_000_040;
const ZED_DM: u64 = 2_000_041;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_request_reaches_the_owners_dm_and_a_tap_lets_them_in() {
    let s = DcSetup::with(DcConfig {
        mode: "followup",
        discord: PAIRING,
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    // Ann has a DM with the bot (the fake opens it again for the bot, as Discord does).
    s.dc.user_runs_command(ChannelSpec::dm(ANN_DM), ann(), "whoami", None);
    let zed = UserSpec::new(7003, "zed");
    s.dc.user_sends(ChannelSpec::dm(ZED_DM), zed.clone(), "hi there");
    let request = |s: &DcSetup| {
        s.sent(ANN_DM)
            .into_iter()
            .find(|m| m.content.starts_with("🔑 Pairing request"))
    };
    gw.wait(&s, "the request in the owner's DM", |s| {
        request(s).is_some_and(|m| m.buttons.len() == 2)
    })
    .await;
    let asked = request(&s).unwrap();
    assert!(
        asked.content.contains("`\"zed\"` (unverified"),
        "the name is inline code: {}",
        asked.content
    );
    let approve = &asked.buttons[0].1;
    assert_eq!(asked.buttons[0].0, "Approve");
    let id =
        s.dc.user_presses(ChannelSpec::dm(ANN_DM), ann(), asked.id, approve)
            .unwrap();
    gw.wait(&s, "the waiting message answered", |s| {
        s.texts(ZED_DM).iter().any(|t| t == "ok: hi there")
    })
    .await;
    gw.wait(&s, "the request edited", |s| {
        request(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    gw.stop().await;
    assert_eq!(
        s.dc.interaction(id).unwrap().response.as_deref(),
        Some("Approved.")
    );
    assert!(
        request(&s)
            .unwrap()
            .content
            .ends_with("✅ approved by ann.")
    );
    let texts = s.texts(ZED_DM);
    assert!(
        texts.iter().any(|t| t.starts_with("You're in:")),
        "{texts:#?}"
    );
}

/// Ann's DM for the menu test.
const MENU_DM: u64 = 2_000_050;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_without_a_mode_offers_a_select_menu_and_a_choice_sets_the_mode() {
    let s = DcSetup::with(DcConfig {
        discord: ASKS,
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    s.dc.user_sends(ChannelSpec::dm(MENU_DM), ann(), "/queue");
    let menu = |s: &DcSetup| {
        s.sent(MENU_DM)
            .into_iter()
            .find(|m| m.content.starts_with("Queue: steer"))
    };
    gw.wait(&s, "the select menu", |s| {
        menu(s).is_some_and(|m| m.menu.is_some())
    })
    .await;
    let asked = menu(&s).unwrap();
    assert!(asked.buttons.is_empty(), "a menu, not buttons: {asked:#?}");
    let (_, options) = asked.menu.clone().unwrap();
    let labels: Vec<&str> = options.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["steer", "followup", "collect", "interrupt", "Reset"]
    );
    let collect = &options[2].1;
    assert_eq!(collect.len(), 32, "an opaque value: {collect}");
    let id =
        s.dc.user_chooses(ChannelSpec::dm(MENU_DM), ann(), asked.id, collect)
            .unwrap();
    gw.wait(&s, "the mode set", |s| {
        s.texts(MENU_DM)
            .iter()
            .any(|t| t.starts_with("Queue: collect"))
    })
    .await;
    gw.wait(&s, "the menu edited and gone", |s| {
        menu(s).is_some_and(|m| m.menu.is_none())
    })
    .await;
    gw.wait(&s, "the private answer to the choice", |s| {
        s.dc.interaction(id).is_some_and(|i| i.response.is_some())
    })
    .await;
    gw.stop().await;
    let info = s.dc.interaction(id).unwrap();
    assert!(info.ephemeral, "{info:#?}");
    assert_eq!(info.response.as_deref(), Some("Chosen: /queue collect"));
    assert!(menu(&s).unwrap().content.ends_with("Chosen: collect."));
}
