//! End-to-end, ACP coding agents on Discord through `chela gateway` against the fake Discord
//! and the scripted `fake-acp-agent`: `/acp spawn` in a guild channel opens a thread bound to
//! the agent, plain messages in it go to the agent, `/acp close` hands the thread back to
//! chela's model, and a non-owner's `/acp spawn` is ignored.

use crate::common;

use chela_testkit::discord::{BotMessage, ChannelSpec, UserSpec};
use common::acp::{self, AgentFiles};
use common::discord::{DcConfig, DcSetup, GUILD, text_channel};

/// The owner (`owner_allow_from`).
const ANN: u64 = 7001;

fn ann() -> UserSpec {
    UserSpec::new(ANN, "ann")
}

fn bob() -> UserSpec {
    UserSpec::new(7002, "bob")
}

/// Open guild channels (mention needed outside bound threads), Ann the owner, the fake agent
/// as the default harness; guild text channel `chan` is known to the fake.
async fn setup(chan: u64) -> (DcSetup, AgentFiles) {
    let discord = format!(
        "group_policy = \"open\"\ndm_policy = \"open\"\n\
         [commands]\nowner_allow_from = [\"discord:{ANN}\"]"
    );
    let s = DcSetup::with(DcConfig {
        discord: &discord,
        ..DcConfig::default()
    })
    .await;
    s.dc.add_channel(text_channel(chan));
    let files = acp::configure(&s.setup, "approve-reads", "");
    (s, files)
}

/// Every text the bot sent or edited in `channel` (as called).
fn every_text(s: &DcSetup, channel: u64) -> Vec<String> {
    let prefix = format!("/channels/{channel}/messages");
    s.dc.calls()
        .into_iter()
        .filter(|c| (c.method == "POST" || c.method == "PATCH") && c.path.starts_with(&prefix))
        .filter_map(|c| c.body["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_opens_a_bound_thread_and_close_hands_it_back_to_the_model() {
    const CHAN: u64 = 2_000_001;
    let (s, files) = setup(CHAN).await;
    let mut gw = s.gateway().await;
    s.dc.user_sends(text_channel(CHAN), ann(), "/acp spawn fake");
    gw.wait(&s, "a bot thread announcing the agent", |s| {
        s.dc.threads().iter().any(|t| {
            t.parent_id == CHAN
                && s.texts(t.id)
                    .iter()
                    .any(|m| m.contains("is bound to this thread"))
        })
    })
    .await;
    let threads = s.dc.threads();
    assert_eq!(threads.len(), 1, "{threads:#?}");
    let thread = &threads[0];
    let id = thread.id;
    let in_thread = || ChannelSpec::thread(GUILD, id, CHAN);

    // A plain message in the thread (no mention) goes to the agent.
    let hello = s.dc.user_sends(in_thread(), ann(), "hello there");
    gw.wait(&s, "the echo in the thread", |s| {
        s.texts(id)
            .iter()
            .any(|t| t.trim_end() == "echo: hello there")
    })
    .await;
    s.dc.user_sends(in_thread(), ann(), "/acp close");
    gw.wait(&s, "Closed fake", |s| {
        s.texts(id).iter().any(|t| t.starts_with("Closed fake"))
    })
    .await;
    // Unbound again: a plain message is only context, a mention goes to chela's model.
    let kept = gw.log_count("unmentioned group message kept as context");
    let still = s.dc.user_sends(in_thread(), bob(), "is it still there?");
    let deadline = tokio::time::Instant::now() + common::discord::DC_WAIT;
    while gw.log_count("unmentioned group message kept as context") <= kept {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the plain message after close was not kept as context: {}",
            gw.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    s.mention(in_thread(), ann(), "back to chela");
    gw.wait(&s, "the model's answer", |s| {
        s.texts(id)
            .iter()
            .any(|t| t.starts_with("ok: ") && t.contains("back to chela"))
    })
    .await;
    gw.stop().await;

    // chela made the thread: a POST to the parent's threads route and THREAD_CREATE.
    assert_eq!(
        s.dc.call_count("POST", &format!("/channels/{CHAN}/threads")),
        1,
        "{:#?}",
        s.calls_summary()
    );
    let id_text = id.to_string();
    assert!(
        s.dc.dispatches()
            .iter()
            .any(|d| d["t"] == "THREAD_CREATE" && d["d"]["id"] == id_text.as_str()),
        "no THREAD_CREATE for {id}"
    );
    assert_eq!(thread.name, "fake session");
    assert_eq!(thread.owner_id, s.dc.bot_id());
    let parent = s.texts(CHAN);
    assert!(
        parent
            .iter()
            .any(|t| t.starts_with("Started fake") && t.contains("new thread")),
        "{parent:#?}"
    );
    assert!(!parent.iter().any(|t| t.contains("echo:")), "{parent:#?}");

    // The echo: one message, sent once, quoting the message it answers.
    let sent = s.sent(id);
    let echoes: Vec<&BotMessage> = sent
        .iter()
        .filter(|m| m.content.contains("echo:"))
        .collect();
    assert_eq!(echoes.len(), 1, "{sent:#?}");
    assert_eq!(echoes[0].content.trim_end(), "echo: hello there");
    assert_eq!(echoes[0].reference, Some(hello), "{:#?}", echoes[0]);
    let thread_texts = every_text(&s, id);
    let posted =
        s.dc.calls()
            .into_iter()
            .filter(|c| c.method == "POST" && c.path == format!("/channels/{id}/messages"))
            .filter(|c| {
                c.body["content"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("echo")
            })
            .count();
    assert_eq!(posted, 1, "{:#?}", s.calls_summary());
    for t in thread_texts.iter().filter(|t| t.starts_with("echo")) {
        assert!("echo: hello there".starts_with(t.trim_end()), "{t:?}");
    }
    assert!(
        sent.iter().all(|m| m.reference != Some(still)),
        "the plain message after close was answered: {sent:#?}"
    );

    // The agent saw one prompt and the close; the model only the mention after the close.
    assert_eq!(files.count("session/prompt"), 1, "{}", files.summary());
    assert_eq!(files.count("session/close"), 1, "{}", files.summary());
    let asked = s.asked();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(asked[0].contains("back to chela"), "{asked:#?}");
    assert!(!asked[0].contains("hello there"), "{asked:#?}");
    assert!(
        asked[0].contains("[Recent group messages]") && asked[0].contains("is it still there?"),
        "the plain message after close is context: {asked:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_owners_spawn_is_ignored() {
    const CHAN: u64 = 2_000_002;
    let (s, files) = setup(CHAN).await;
    let mut gw = s.gateway().await;
    s.dc.user_sends(text_channel(CHAN), bob(), "/acp spawn fake");
    gw.wait_log(&s, "command refused").await;
    // Stopping waits for command tasks in flight.
    gw.stop().await;

    assert!(s.dc.threads().is_empty(), "{:#?}", s.dc.threads());
    assert!(s.texts(CHAN).is_empty(), "{:#?}", s.texts(CHAN));
    assert_eq!(
        s.dc.call_count("POST", &format!("/channels/{CHAN}/threads")),
        0
    );
    assert!(
        files.entries().is_empty(),
        "the agent was started: {}",
        files.summary()
    );
    assert!(s.asked().is_empty(), "{:#?}", s.asked());
}
