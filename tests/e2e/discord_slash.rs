//! End-to-end, Discord slash commands through `chela gateway` against the fake Discord: the
//! commands are registered at start, a slash command is acknowledged at once with a deferred
//! private (ephemeral) answer and answered by editing it, never in the channel; `/new` resets
//! the session and runs its text; what the sender may not run is refused privately; a
//! redelivered interaction is answered once; typed commands keep working (also after
//! unmentioned chatter).

use crate::common;

use chela_testkit::FakeDiscord;
use chela_testkit::discord::{ChannelSpec, InteractionInfo, UserSpec};
use common::discord::{DcConfig, DcSetup, GUILD, Gateway, text_channel};
use common::{messages, text_of};

/// Open guild channels and DMs; ann (7001) owns the bot.
const OWNED: &str = "group_policy = \"open\"\ndm_policy = \"open\"\n[commands]\nowner_allow_from = [\"discord:7001\"]";

fn ann() -> UserSpec {
    UserSpec::new(7001, "ann")
}

fn bob() -> UserSpec {
    UserSpec::new(7002, "bob")
}

/// Waits until interaction `id` has an answer in its original response; returns it.
async fn answered(gw: &mut Gateway, s: &DcSetup, id: u64) -> InteractionInfo {
    gw.wait(s, "the private answer", |s| {
        s.dc.interaction(id).is_some_and(|i| i.response.is_some())
    })
    .await;
    s.dc.interaction(id).unwrap()
}

/// The answer was a deferred ephemeral acknowledgement (type 5, flags 64), then an edit of
/// the original response.
fn assert_private(s: &DcSetup, info: &InteractionInfo) {
    assert_eq!(info.callback_type, Some(5), "{info:#?}");
    assert!(info.ephemeral, "{info:#?}");
    let callbacks = s.dc.interaction_callbacks();
    let callback = callbacks
        .iter()
        .find(|c| c["interaction_id"].as_str() == Some(&*info.id.to_string()))
        .expect("a callback");
    assert_eq!(callback["body"]["type"], 5, "{callback:#}");
    assert_eq!(callback["body"]["data"]["flags"], 64, "{callback:#}");
    let original = format!(
        "/webhooks/{}/{}/messages/@original",
        FakeDiscord::APPLICATION_ID,
        info.token
    );
    assert_eq!(s.dc.call_count("PATCH", &original), 1, "one edit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_registered_at_start_and_typed_commands_still_work() {
    const CHAN: u64 = 2_000_001;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    gw.wait(&s, "the registered commands", |s| {
        s.dc.commands().len() >= 9
    })
    .await;
    let commands = s.dc.commands();
    let names: Vec<&str> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "new", "reset", "stop", "status", "queue", "help", "whoami", "acp", "session",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert_eq!(
        s.dc.call_count(
            "PUT",
            &format!("/applications/{}/commands", FakeDiscord::APPLICATION_ID)
        ),
        1,
        "one bulk overwrite"
    );
    for command in &commands {
        let name = command["name"].as_str().unwrap();
        let options = command["options"].as_array().unwrap();
        if [
            "new", "reset", "queue", "acp", "session", "approve", "model",
        ]
        .contains(&name)
        {
            assert_eq!(options.len(), 1, "{command:#}");
            assert_eq!(options[0]["name"], "args");
            assert_eq!(options[0]["type"], 3, "a string");
            assert_eq!(options[0]["required"], false);
        } else {
            assert!(options.is_empty(), "{command:#}");
        }
        let description = command["description"].as_str().unwrap();
        assert!((1..=100).contains(&description.chars().count()));
    }

    // A typed command is answered in the channel, as before, even after unmentioned chatter
    // (kept as context for the next turn, not framed around the command).
    s.dc.user_sends(text_channel(CHAN), bob(), "lunch at noon?");
    gw.wait_log(&s, "unmentioned group message kept as context")
        .await;
    s.dc.user_sends(text_channel(CHAN), ann(), "/status");
    let key = format!("agent:main:discord:channel:{CHAN}");
    gw.wait(&s, "the typed /status answer", |s| {
        s.texts(CHAN).iter().any(|t| t.contains(&key))
    })
    .await;
    gw.stop().await;
    assert!(s.dc.interaction_callbacks().is_empty());
    assert_eq!(
        s.setup.fake.request_count(),
        0,
        "commands never reach the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_status_is_answered_privately_in_the_session_of_its_channel() {
    const CHAN: u64 = 2_000_010;
    const THREAD: u64 = 2_000_011;
    let s = DcSetup::open().await;
    s.dc.add_channel(text_channel(CHAN));
    let mut gw = s.gateway().await;

    let id =
        s.dc.user_runs_command(text_channel(CHAN), ann(), "status", None);
    let info = answered(&mut gw, &s, id).await;
    assert_private(&s, &info);
    let text = info.response.as_deref().unwrap();
    assert!(
        text.contains(&format!("Session: agent:main:discord:channel:{CHAN}\n")),
        "{text}"
    );

    let thread = ChannelSpec::thread(GUILD, THREAD, CHAN);
    let in_thread = s.dc.user_runs_command(thread, bob(), "status", None);
    let info = answered(&mut gw, &s, in_thread).await;
    assert_private(&s, &info);
    let text = info.response.as_deref().unwrap();
    assert!(
        text.contains(&format!(
            "Session: agent:main:discord:channel:{CHAN}:thread:{THREAD}"
        )),
        "{text}"
    );

    // /acp is for owners: anyone else is refused privately, never sent to the model.
    let acp =
        s.dc.user_runs_command(text_channel(CHAN), ann(), "acp", Some("status"));
    let info = answered(&mut gw, &s, acp).await;
    assert_eq!(info.response.as_deref(), Some("Not allowed."));

    // The same interaction delivered again is answered once.
    assert!(s.dc.redeliver_interaction(id));
    gw.wait_log(&s, "duplicate command dropped").await;
    gw.stop().await;
    assert_eq!(s.dc.interaction(id).unwrap().edits, 1);

    assert!(s.dc.sent(CHAN).is_empty(), "{:#?}", s.dc.sent(CHAN));
    assert!(s.dc.sent(THREAD).is_empty(), "{:#?}", s.dc.sent(THREAD));
    assert_eq!(
        s.setup.fake.request_count(),
        0,
        "commands never reach the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_new_starts_a_fresh_session_and_runs_its_text() {
    const CHAN: u64 = 2_000_020;
    let s = DcSetup::with(DcConfig {
        discord: OWNED,
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "first message");
    gw.wait(&s, "the first answer", |s| {
        s.texts(CHAN)
            .iter()
            .any(|t| t.contains("ok: first message"))
    })
    .await;

    let id =
        s.dc.user_runs_command(text_channel(CHAN), ann(), "new", Some("after reset"));
    let info = answered(&mut gw, &s, id).await;
    assert_private(&s, &info);
    assert_eq!(info.response.as_deref(), Some("New session started."));
    gw.wait(&s, "the answer to the text after /new", |s| {
        s.texts(CHAN).iter().any(|t| t.contains("ok: after reset"))
    })
    .await;
    gw.stop().await;

    // The first turn's answer is an ordinary reply in the channel, quoting nothing.
    let sent = s.sent(CHAN);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[1].reference, None);
    let key = format!("agent:main:discord:channel:{CHAN}");
    let entries = s.setup.export(&key).await;
    let types: Vec<&str> = entries.iter().filter_map(|e| e["type"].as_str()).collect();
    let reset = types
        .iter()
        .position(|t| *t == "reset")
        .expect("a reset entry");
    let texts: Vec<String> = messages(&entries[reset..])
        .into_iter()
        .map(text_of)
        .collect();
    assert!(texts.iter().any(|t| t == "after reset"), "{texts:#?}");
    // The model's call after /new did not see the archived window.
    let calls = s.setup.model_calls();
    let last = serde_json::to_string(&calls.last().unwrap()["messages"]).unwrap();
    assert!(!last.contains("first message"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_reset_from_a_non_owner_in_a_guild_is_refused_privately() {
    const CHAN: u64 = 2_000_030;
    let s = DcSetup::with(DcConfig {
        discord: OWNED,
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "first message");
    gw.wait(&s, "the first answer", |s| !s.texts(CHAN).is_empty())
        .await;

    let id =
        s.dc.user_runs_command(text_channel(CHAN), bob(), "reset", None);
    let info = answered(&mut gw, &s, id).await;
    assert_private(&s, &info);
    assert_eq!(info.response.as_deref(), Some("Not allowed."));
    // bob may still ask what is not reserved to owners.
    let status =
        s.dc.user_runs_command(text_channel(CHAN), bob(), "status", None);
    let info = answered(&mut gw, &s, status).await;
    assert!(info.response.unwrap().starts_with("Session: "));
    gw.stop().await;

    assert_eq!(s.sent(CHAN).len(), 1, "{:#?}", s.sent(CHAN));
    let key = format!("agent:main:discord:channel:{CHAN}");
    let entries = s.setup.export(&key).await;
    assert!(entries.iter().all(|e| e["type"] != "reset"), "{entries:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_command_from_someone_not_admitted_gets_a_private_answer() {
    const CHAN: u64 = 2_000_040;
    const DM: u64 = 2_000_041;
    // Guild channels: only ann; DMs: pairing (the default).
    let s = DcSetup::with(DcConfig {
        discord: "group_allow_from = [\"7001\"]",
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    let id =
        s.dc.user_runs_command(text_channel(CHAN), bob(), "status", None);
    let info = answered(&mut gw, &s, id).await;
    assert_private(&s, &info);
    assert_eq!(info.response.as_deref(), Some("Not allowed."));

    let id =
        s.dc.user_runs_command(ChannelSpec::dm(DM), bob(), "status", None);
    let info = answered(&mut gw, &s, id).await;
    assert_private(&s, &info);
    let text = info.response.unwrap();
    assert!(text.contains("chela pairing approve discord"), "{text}");
    gw.stop().await;
    assert!(s.sent(CHAN).is_empty() && s.sent(DM).is_empty());
}
