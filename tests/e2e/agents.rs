//! End-to-end: several agents behind one gateway (`[[agents]]`, `[[bindings]]`). Chats a
//! binding matches go to its agent, with that agent's model, identity and workspace, under
//! `agent:<id>:` session keys; other chats go to the default agent. Through the Telegram and
//! Discord fakes.

use crate::common;

use chela_testkit::discord::UserSpec as DcUser;
use common::discord::{DcConfig, DcSetup, text_channel};
use common::telegram::{TgConfig, TgSetup, dm};
use serde_json::Value;

/// The second agent: its own model, identity and workspace.
const CODER: &str = "\n[[agents]]\nid = \"coder\"\nmodel = \"coder-model\"\n\
identity = \"You are Coder, the team's coding agent.\"\nworkspace = \"ws-coder\"\n";

/// The model call whose last user message ends with `text`.
fn call_for<'a>(calls: &'a [Value], text: &str) -> &'a Value {
    calls
        .iter()
        .find(|c| common::last_user_text(c).ends_with(text))
        .unwrap_or_else(|| panic!("no model call for {text:?}: {calls:#?}"))
}

/// Whether a model call was made as the coder agent: its model and its identity.
fn as_coder(call: &Value) -> bool {
    let coder_model = call["model"] == "coder-model";
    let coder_identity = call.to_string().contains("You are Coder");
    assert_eq!(
        coder_model, coder_identity,
        "model and identity disagree: {call:#}"
    );
    coder_model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_binding_sends_one_telegram_user_to_the_other_agent() {
    let tables = format!(
        "{CODER}\n[[bindings]]\nagent = \"coder\"\nchannel = \"telegram\"\npeer = \"42\"\n"
    );
    let s = TgSetup::with(TgConfig {
        telegram: "dm_policy = \"open\"",
        tables: &tables,
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (ann_chat, ann) = dm(42, "Ann");
    let (bob_chat, bob) = dm(43, "Bob");
    s.tg.user_sends(ann_chat.clone(), ann.clone(), "hi from ann");
    s.tg.user_sends(bob_chat, bob, "hi from bob");
    gw.wait(&s, "both answers", |s| {
        s.texts(42).iter().any(|t| t == "ok: hi from ann")
            && s.texts(43).iter().any(|t| t == "ok: hi from bob")
    })
    .await;
    s.tg.user_sends(ann_chat, ann, "/status");
    gw.wait(&s, "the status", |s| {
        s.texts(42).iter().any(|t| t.contains("Agent: "))
    })
    .await;
    gw.stop().await;

    let calls = s.setup.model_calls();
    assert!(as_coder(call_for(&calls, "hi from ann")));
    assert!(!as_coder(call_for(&calls, "hi from bob")));
    let status = s
        .texts(42)
        .into_iter()
        .find(|t| t.contains("Agent: "))
        .unwrap();
    assert!(status.contains("Agent: coder"), "{status}");
    assert!(status.contains("coder-model"), "{status}");
    let (ok, list) = s.cli(&["sessions", "list"]).await;
    assert!(ok, "{list}");
    assert!(
        list.contains("agent:coder:telegram:direct:42\tagent coder"),
        "{list}"
    );
    assert!(
        list.contains("agent:main:telegram:direct:43\tagent main"),
        "{list}"
    );
    assert!(
        s.setup.path("ws-coder").is_dir(),
        "the coder's workspace is made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_binding_sends_one_discord_channel_to_the_other_agent() {
    const CODE: u64 = 1_000_101;
    const CHAT: u64 = 1_000_102;
    let discord = format!(
        "group_policy = \"open\"\n{CODER}\n[[bindings]]\nagent = \"coder\"\nchannel = \"discord\"\ngroup = \"{CODE}\"\n"
    );
    let s = DcSetup::with(DcConfig {
        discord: &discord,
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    let ann = DcUser::new(7001, "ann");
    s.mention(text_channel(CODE), ann.clone(), "fix the build");
    s.mention(text_channel(CHAT), ann, "say hello");
    gw.wait(&s, "both answers", |s| {
        s.texts(CODE).iter().any(|t| t.contains("fix the build"))
            && s.texts(CHAT).iter().any(|t| t.contains("say hello"))
    })
    .await;
    gw.stop().await;

    let calls = s.setup.model_calls();
    assert!(as_coder(call_for(&calls, "fix the build")));
    assert!(!as_coder(call_for(&calls, "say hello")));
    let sessions = s.sessions().await;
    assert!(
        sessions.contains(&format!("agent:coder:discord:channel:{CODE}")),
        "{sessions}"
    );
    assert!(
        sessions.contains(&format!("agent:main:discord:channel:{CHAT}")),
        "{sessions}"
    );
}
