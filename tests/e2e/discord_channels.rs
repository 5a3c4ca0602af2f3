//! End-to-end, Discord conversations through `chela gateway` against the fake Discord: a
//! streamed reply in a guild channel, long replies split by the 2000-char and 17-line limits,
//! threads as sessions of their own, mention gating with recent history, and DMs.

use crate::common;

use chela_testkit::FakeDiscord;
use chela_testkit::discord::{ChannelSpec, MessageOptions, UserSpec};
use common::discord::{DcConfig, DcSetup, GUILD, text_channel};
use common::{messages, text_of};

/// The whole answer to `slow <ms> <n>`.
fn ticks(n: u32) -> String {
    (1..=n).map(|i| format!("tick {i} ")).collect()
}

fn ann() -> UserSpec {
    UserSpec::new(7001, "ann")
}

fn bob() -> UserSpec {
    UserSpec::new(7002, "bob")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guild_mention_is_answered_in_one_streamed_message_that_replies_to_it() {
    const CHAN: u64 = 1_000_001;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let trigger = s.mention(text_channel(CHAN), ann(), "slow 300 8");
    let full = ticks(8);
    let want = full.trim_end().to_string();
    gw.wait(&s, "the full answer", |s| {
        s.texts(CHAN).iter().any(|t| t.trim_end() == want)
    })
    .await;
    gw.stop().await;

    let sent = s.dc.sent(CHAN);
    assert_eq!(sent.len(), 1, "exactly one bot message: {sent:#?}");
    let msg = &sent[0];
    assert!(!msg.deleted);
    assert_eq!(msg.content.trim_end(), want);
    // The answer takes about 2.4 s and previews go out about once a second: the message was
    // sent as a preview and then edited (the final is an edit too).
    assert!(msg.edits >= 1, "no preview edits: {msg:#?}");
    assert_eq!(msg.reference, Some(trigger), "the reply quotes the mention");
    assert!(msg.nonce.is_some(), "the send carries a nonce: {msg:#?}");
    assert!(s.dc.typing(CHAN) >= 1, "typing indicator");

    // One send with a nonce it enforces, then edits of that message only, each a prefix.
    let path = format!("/channels/{CHAN}/messages");
    let calls = s.dc.calls();
    let posts: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "POST" && c.path == path)
        .collect();
    assert_eq!(posts.len(), 1, "{:#?}", s.calls_summary());
    assert_eq!(posts[0].body["enforce_nonce"], true, "{:#?}", posts[0]);
    let edit_path = format!("{path}/{}", msg.id);
    let patches: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "PATCH" && c.path == edit_path)
        .collect();
    assert!(!patches.is_empty(), "{:#?}", s.calls_summary());
    for call in posts.iter().chain(&patches) {
        let text = call.body["content"].as_str().unwrap_or_default();
        assert!(
            full.starts_with(text.trim_end()),
            "{text:?} is not a prefix"
        );
    }
    let asked = s.asked();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(asked[0].ends_with("slow 300 8"), "{asked:#?}");
    assert!(
        !asked[0].contains("<@"),
        "the mention is stripped: {asked:#?}"
    );
    let sessions = s.sessions().await;
    assert!(
        sessions.contains(&format!("agent:main:discord:channel:{CHAN}")),
        "{sessions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_split_into_parts_within_2000_chars_and_17_lines() {
    const CHAN: u64 = 1_000_002;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "long 4500");
    // Complete once the parts hold about 4,500 chars (only blanks at the cuts are missing)
    // and the last one ends the answer's last sentence.
    gw.wait(&s, "the last part", |s| {
        let texts = s.texts(CHAN);
        let chars: usize = texts.iter().map(|t| t.chars().count() + 2).sum();
        chars >= 4500 && texts.last().is_some_and(|t| t.trim_end().ends_with('.'))
    })
    .await;
    gw.stop().await;

    let key = format!("agent:main:discord:channel:{CHAN}");
    let entries = s.setup.export(&key).await;
    let answer = messages(&entries)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(text_of)
        .next_back()
        .expect("an assistant answer in the transcript");
    assert_eq!(answer.chars().count(), 4500);

    let sent = s.dc.sent(CHAN);
    assert!(sent.iter().all(|m| !m.deleted), "{sent:#?}");
    // 4,500 chars of 70-char lines: the line limit, not the char limit, decides the cuts.
    assert!(sent.len() >= 4, "{} parts: {sent:#?}", sent.len());
    let mut at = 0;
    for part in &sent {
        let chars = part.content.chars().count();
        let lines = part.content.lines().count();
        assert!(chars <= 2000, "part of {chars} chars");
        assert!(lines <= 17, "part of {lines} lines: {:?}", part.content);
        // Each part is the next stretch of the answer (only whitespace at the cuts is lost).
        let body = part.content.trim();
        assert!(!body.is_empty(), "an empty part: {sent:#?}");
        let found = answer[at..]
            .find(body)
            .unwrap_or_else(|| panic!("part not found in order after byte {at}: {body:?}"));
        assert!(
            answer[at..at + found].trim().is_empty(),
            "text skipped between parts: {:?}",
            &answer[at..at + found]
        );
        at += found + body.len();
    }
    assert!(
        answer[at..].trim().is_empty(),
        "tail missing: {:?}",
        &answer[at..]
    );
    let squash = |t: &str| t.split_whitespace().collect::<String>();
    let joined: String = sent.iter().map(|m| squash(&m.content)).collect();
    assert_eq!(joined, squash(&answer), "no text lost or repeated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_answered_in_the_thread_in_a_session_of_its_own() {
    const PARENT: u64 = 1_000_010;
    const THREAD: u64 = 1_000_011;
    let s = DcSetup::open().await;
    s.dc.add_channel(text_channel(PARENT));
    let mut gw = s.gateway().await;
    let thread = ChannelSpec::thread(GUILD, THREAD, PARENT);
    let in_thread = s.mention(thread, ann(), "inside the thread");
    gw.wait(&s, "the answer in the thread", |s| {
        s.texts(THREAD)
            .iter()
            .any(|t| t.contains("inside the thread"))
    })
    .await;
    let in_parent = s.mention(text_channel(PARENT), bob(), "in the parent");
    gw.wait(&s, "the answer in the parent", |s| {
        s.texts(PARENT).iter().any(|t| t.contains("in the parent"))
    })
    .await;
    gw.stop().await;

    let threaded = s.dc.sent(THREAD);
    assert_eq!(threaded.len(), 1, "{threaded:#?}");
    assert_eq!(threaded[0].reference, Some(in_thread));
    assert!(
        !threaded[0].content.contains("in the parent"),
        "{threaded:#?}"
    );
    let parent = s.dc.sent(PARENT);
    assert_eq!(
        parent.len(),
        1,
        "nothing from the thread in the parent: {parent:#?}"
    );
    assert_eq!(parent[0].reference, Some(in_parent));
    assert!(
        !parent[0].content.contains("inside the thread"),
        "{parent:#?}"
    );
    // The thread keeps its parent, and no thread was made by the bot.
    let threads = s.dc.threads();
    assert_eq!(threads.len(), 1, "{threads:#?}");
    assert_eq!(threads[0].parent_id, PARENT);

    let sessions = s.sessions().await;
    let thread_key = format!("agent:main:discord:channel:{PARENT}:thread:{THREAD}");
    let parent_key = format!("agent:main:discord:channel:{PARENT}");
    assert!(sessions.contains(&thread_key), "{sessions}");
    assert!(
        sessions
            .lines()
            .any(|l| l.contains(&parent_key) && !l.contains(":thread:")),
        "{sessions}"
    );
    // Each session holds its own conversation only.
    let thread_text: String = messages(&s.setup.export(&thread_key).await)
        .into_iter()
        .map(text_of)
        .collect();
    assert!(thread_text.contains("inside the thread"), "{thread_text}");
    assert!(!thread_text.contains("in the parent"), "{thread_text}");
    let parent_text: String = messages(&s.setup.export(&parent_key).await)
        .into_iter()
        .map(text_of)
        .collect();
    assert!(parent_text.contains("in the parent"), "{parent_text}");
    assert!(!parent_text.contains("inside the thread"), "{parent_text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmentioned_message_is_context_for_the_next_mention_not_a_turn() {
    const CHAN: u64 = 1_000_020;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    s.dc.user_sends(text_channel(CHAN), bob(), "lunch at noon?");
    gw.wait_log(&s, "unmentioned group message kept as context")
        .await;
    assert!(s.dc.sent(CHAN).is_empty(), "{:#?}", s.dc.sent(CHAN));
    assert_eq!(s.setup.fake.request_count(), 0, "no model call unmentioned");

    let trigger = s.mention(text_channel(CHAN), ann(), "where do we eat?");
    gw.wait(&s, "the answer", |s| !s.texts(CHAN).is_empty())
        .await;
    gw.stop().await;

    let sent = s.dc.sent(CHAN);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].reference, Some(trigger));
    let asked = s.asked();
    assert_eq!(asked.len(), 1, "one model call: {asked:#?}");
    let text = &asked[0];
    let history = text.find("[Recent group messages]").expect(text);
    let lunch = text.find("lunch at noon?").expect(text);
    let question = text.rfind("where do we eat?").expect(text);
    assert!(history < lunch && lunch < question, "{text}");
    assert!(!text.contains("<@"), "the mention is stripped: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_message_from_an_allowed_user_is_answered() {
    const DM: u64 = 1_000_030;
    let s = DcSetup::with(DcConfig {
        discord: "allow_from = [\"7001\"]",
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    s.dc.user_sends(ChannelSpec::dm(DM), ann(), "hello in private");
    gw.wait(&s, "the answer", |s| !s.texts(DM).is_empty()).await;
    gw.stop().await;

    let sent = s.dc.sent(DM);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].content.trim_end(), "ok: hello in private");
    assert_eq!(sent[0].reference, None, "DM replies do not quote");
    assert_eq!(s.asked(), vec!["hello in private".to_string()]);
    let sessions = s.sessions().await;
    assert!(
        sessions.contains("agent:main:discord:direct:7001"),
        "{sessions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_of_one_of_the_bots_roles_addresses_the_bot() {
    const CHAN: u64 = 1_000_060;
    const BOT_ROLE: u64 = 7_700_001;
    const OTHER_ROLE: u64 = 7_700_002;
    let s = DcSetup::open().await;
    s.dc.set_member_roles(GUILD, FakeDiscord::BOT_ID, &[BOT_ROLE]);
    let mut gw = s.gateway().await;
    let others = MessageOptions {
        mention_roles: vec![OTHER_ROLE],
        ..Default::default()
    };
    s.dc.user_sends_with(text_channel(CHAN), bob(), "for the other team", others);
    gw.wait_log(&s, "unmentioned group message kept as context")
        .await;
    assert!(s.dc.sent(CHAN).is_empty(), "another role is no mention");
    let ours = MessageOptions {
        mention_roles: vec![BOT_ROLE],
        ..Default::default()
    };
    s.dc.user_sends_with(text_channel(CHAN), ann(), "for the bots", ours);
    gw.wait(&s, "the answer", |s| !s.texts(CHAN).is_empty())
        .await;
    gw.stop().await;
    assert_eq!(s.dc.sent(CHAN).len(), 1);
    assert_eq!(s.asked().len(), 1, "one model call");
}
