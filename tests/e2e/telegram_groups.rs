//! End-to-end, Telegram groups through `chela gateway`: mention gating with recent group
//! history, forum topics as separate sessions, and `/stop` reserved to owners in groups.

use crate::common;

use chela_testkit::{ChatSpec, SendOptions, UserSpec};
use common::telegram::{TgConfig, TgSetup, at_bot};

const GROUP: i64 = -4001;
const FORUM: i64 = -1_001_234_567_890;

fn team() -> ChatSpec {
    ChatSpec::group(GROUP, "Team")
}

fn ann() -> UserSpec {
    UserSpec::new(7, "Ann")
}

fn bob() -> UserSpec {
    UserSpec::new(8, "Bob")
}

fn in_topic(thread: Option<i64>) -> SendOptions {
    SendOptions {
        message_thread_id: thread,
        ..SendOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmentioned_group_messages_are_context_for_the_next_mentioned_one() {
    let s = TgSetup::new("group_policy = \"open\"").await;
    let mut gw = s.gateway();
    s.tg.user_sends(team(), ann(), "lunch at noon?");
    s.tg.user_sends(team(), bob(), "pizza place on 5th");
    s.wait_consumed(&mut gw).await;
    assert!(s.texts(GROUP).is_empty(), "{:?}", s.texts(GROUP));
    assert_eq!(s.setup.fake.request_count(), 0, "no model call unmentioned");

    let asked = format!("{} where do we eat?", at_bot());
    let id = s.tg.user_sends(team(), ann(), &asked);
    gw.wait(&s, "the answer", |s| !s.texts(GROUP).is_empty())
        .await;
    gw.stop().await;

    let sent = s.sent(GROUP);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].reply_to, Some(id), "the reply quotes the mention");
    let asked = s.asked();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let text = &asked[0];
    let history = text.find("[Recent group messages]").expect(text);
    let lunch = text.find("lunch at noon?").expect(text);
    let pizza = text.find("pizza place on 5th").expect(text);
    let question = text.rfind("where do we eat?").expect(text);
    assert!(
        history < lunch && lunch < pizza && pizza < question,
        "{text}"
    );
    assert!(
        !text.contains(&at_bot()),
        "the leading mention is stripped: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_context_survives_a_restart() {
    let s = TgSetup::new("group_policy = \"open\"").await;
    let mut gw = s.gateway();
    s.tg.user_sends(team(), ann(), "the build is red");
    s.wait_consumed(&mut gw).await;
    gw.stop().await;

    let mut gw = s.gateway();
    s.tg.user_sends(team(), bob(), &format!("{} what did Ann say?", at_bot()));
    gw.wait(&s, "the answer", |s| !s.texts(GROUP).is_empty())
        .await;
    gw.stop().await;
    let asked = s.asked();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(
        asked[0].starts_with("[Recent group messages]\nAnn: the build is red\n"),
        "{}",
        asked[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forum_topics_are_separate_sessions_and_replies_stay_in_their_topic() {
    let s = TgSetup::new("group_policy = \"open\"\nrequire_mention = false").await;
    s.tg.add_chat(ChatSpec::forum(FORUM, "Forum"));
    let a = s.tg.add_topic(FORUM, "Alpha").unwrap();
    let b = s.tg.add_topic(FORUM, "Beta").unwrap();
    let forum = || ChatSpec::forum(FORUM, "Forum");
    let mut gw = s.gateway();
    // Answers that take a moment (the indicator shows after half a second), so that each
    // topic shows the typing indicator.
    s.tg.user_sends_with(
        forum(),
        ann(),
        "after 1500 alpha question",
        in_topic(Some(a)),
    );
    s.tg.user_sends_with(
        forum(),
        bob(),
        "after 1500 beta question",
        in_topic(Some(b)),
    );
    s.tg.user_sends_with(
        forum(),
        ann(),
        "after 1500 general question",
        in_topic(None),
    );
    gw.wait(&s, "three answers", |s| s.texts(FORUM).len() >= 3)
        .await;
    gw.stop().await;

    let sent = s.sent(FORUM);
    assert_eq!(sent.len(), 3, "{sent:#?}");
    let by_text = |t: &str| sent.iter().find(|m| m.text == t).expect(t);
    assert_eq!(by_text("ok: alpha question").thread_id, Some(a));
    assert_eq!(by_text("ok: beta question").thread_id, Some(b));
    assert_eq!(by_text("ok: general question").thread_id, None);
    // What chela asked for, not what the fake inferred from the quoted message.
    let sends: Vec<_> =
        s.tg.calls()
            .into_iter()
            .filter(|c| c.method == "sendmessage")
            .collect();
    let thread_of = |t: &str| {
        let call = sends
            .iter()
            .find(|c| c.body["text"] == t)
            .unwrap_or_else(|| panic!("{t}: {sends:#?}"));
        call.body.get("message_thread_id").and_then(|v| v.as_i64())
    };
    assert_eq!(thread_of("ok: alpha question"), Some(a));
    assert_eq!(thread_of("ok: beta question"), Some(b));
    assert_eq!(
        thread_of("ok: general question"),
        None,
        "General takes no id"
    );
    // Typing indicators carry the topic id, General's 1 included.
    let typing: Vec<Option<i64>> =
        s.tg.chat_actions(FORUM)
            .iter()
            .map(|c| c.thread_id)
            .collect();
    for t in [a, b, 1] {
        assert!(typing.contains(&Some(t)), "typing in {t}: {typing:?}");
    }

    // Each topic's model call sees only its own conversation.
    for body in s.setup.model_calls() {
        let all = body["messages"].to_string();
        let own = common::last_user_text(&body);
        for other in ["alpha question", "beta question", "general question"] {
            assert!(own.contains(other) || !all.contains(other), "{own}: {all}");
        }
    }
    let (ok, list) = s.cli(&["sessions", "list"]).await;
    assert!(ok, "{list}");
    let base = format!("agent:main:telegram:group:{FORUM}:topic:");
    let keys: Vec<&str> = list.lines().filter_map(|l| l.split('\t').next()).collect();
    for t in [a, b, 1] {
        let key = format!("{base}{t}");
        assert!(keys.contains(&key.as_str()), "{key} missing: {list}");
    }
}

/// Ann starts a slow run in the group; Bob (a plain member, no owner) sends /stop, which is
/// ignored, then `stopper` sends /stop, which stops it. Checks exactly one stop happened (had
/// Bob's counted, the second would find nothing to stop) and returns Ann's message id.
async fn only_the_stop_of(s: &TgSetup, stopper: UserSpec) -> i64 {
    let mut gw = s.gateway();
    let id =
        s.tg.user_sends(team(), ann(), &format!("{} slow 300 40", at_bot()));
    // The first preview (about 3 s in: the group edit pace) shows the run has text.
    gw.wait(s, "the first preview", |s| {
        s.texts(GROUP).iter().any(|t| t.starts_with("tick 1 "))
    })
    .await;
    s.tg.user_sends(team(), bob(), "/stop");
    s.wait_consumed(&mut gw).await;
    s.tg.user_sends(team(), stopper, "/stop");
    gw.wait(s, "Stopped.", |s| {
        s.texts(GROUP).iter().any(|t| t.starts_with("Stopped"))
    })
    .await;
    gw.wait(s, "the cut answer", |s| {
        s.texts(GROUP).iter().any(|t| t.ends_with("[stopped]"))
    })
    .await;
    gw.stop().await;
    let texts = s.texts(GROUP);
    assert_eq!(
        texts.iter().filter(|t| t.starts_with("Stopped")).count(),
        1,
        "{texts:#?}"
    );
    assert!(!texts.iter().any(|t| t.contains("Nothing")), "{texts:#?}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_stop_needs_an_owner() {
    let s =
        TgSetup::new("group_policy = \"open\"\n[commands]\nowner_allow_from = [\"telegram:7\"]")
            .await;
    let id = only_the_stop_of(&s, ann()).await;
    let cut = s
        .sent(GROUP)
        .into_iter()
        .find(|m| m.text.ends_with("[stopped]"))
        .unwrap();
    assert!(cut.text.starts_with("tick 1 "), "{cut:#?}");
    assert!(!cut.text.contains("tick 40"), "{cut:#?}");
    assert_eq!(cut.reply_to, Some(id), "{cut:#?}");
    assert_eq!(s.asked(), vec!["slow 300 40".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_admin_may_stop_a_run_and_a_plain_member_may_not() {
    let s = TgSetup::new("group_policy = \"open\"").await;
    s.tg.add_chat(team());
    let carl = UserSpec::new(9, "Carl");
    s.tg.set_admin(GROUP, &carl);
    only_the_stop_of(&s, carl).await;
    // Neither is an owner: each /stop asked Telegram whether its sender is an admin.
    assert_eq!(s.tg.call_count("getChatMember"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_allow_from_is_the_only_source_of_commands() {
    let s = TgSetup::new("group_policy = \"open\"\nrequire_mention = false\n[commands]\nallow_from = [\"telegram:7\"]")
        .await;
    let mut gw = s.gateway();
    // Bob is admitted to the group but not to commands: his /help is ignored.
    s.tg.user_sends(team(), bob(), "/help");
    s.wait_consumed(&mut gw).await;
    s.tg.user_sends(team(), ann(), "/help");
    gw.wait(&s, "Ann's /help answered", |s| {
        s.texts(GROUP).iter().any(|t| t.contains("/new"))
    })
    .await;
    gw.stop().await;
    let texts = s.texts(GROUP);
    assert_eq!(texts.len(), 1, "{texts:#?}");
    assert_eq!(
        s.setup.fake.request_count(),
        0,
        "a command never reaches the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmentioned_plain_stop_from_a_non_owner_is_only_group_context() {
    let s = TgSetup::new("group_policy = \"open\"").await;
    let mut gw = s.gateway();
    s.tg.user_sends(team(), bob(), "stop");
    s.wait_consumed(&mut gw).await;
    s.tg.user_sends(team(), ann(), &format!("{} ping", at_bot()));
    gw.wait(&s, "the answer to ping", |s| {
        s.texts(GROUP).iter().any(|t| t.contains("ping"))
    })
    .await;
    gw.stop().await;
    let asked = s.asked();
    assert_eq!(
        asked.len(),
        1,
        "only the mentioned message runs: {asked:#?}"
    );
    assert!(
        asked[0].contains("Bob: stop"),
        "kept as context: {asked:#?}"
    );
    assert_eq!(s.texts(GROUP).len(), 1, "{:#?}", s.texts(GROUP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_for_another_bot_is_not_answered() {
    let s = TgSetup::new("group_policy = \"open\"").await;
    let mut gw = s.gateway();
    s.tg.user_sends(team(), ann(), "/help@other_bot");
    s.wait_consumed(&mut gw).await;
    s.tg.user_sends(team(), ann(), &format!("{} ping", at_bot()));
    gw.wait(&s, "the answer to ping", |s| {
        s.texts(GROUP).iter().any(|t| t.contains("ping"))
    })
    .await;
    gw.stop().await;
    assert_eq!(s.texts(GROUP).len(), 1, "{:#?}", s.texts(GROUP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mention_gating_holds_in_a_topic_the_bot_created() {
    let s = TgSetup::new("group_policy = \"open\"").await;
    s.tg.add_chat(ChatSpec::forum(FORUM, "Forum"));
    // A topic created by the bot, as `/acp spawn --thread auto` does.
    let t = s.tg.add_topic(FORUM, "Bot topic").unwrap();
    let forum = || ChatSpec::forum(FORUM, "Forum");
    let mut gw = s.gateway();
    s.tg.user_sends_with(forum(), bob(), "just chatting", in_topic(Some(t)));
    s.wait_consumed(&mut gw).await;
    let question = format!("{} ping", at_bot());
    s.tg.user_sends_with(forum(), ann(), &question, in_topic(Some(t)));
    gw.wait(&s, "the answer to ping", |s| {
        s.texts(FORUM).iter().any(|t| t.contains("ping"))
    })
    .await;
    gw.stop().await;
    let asked = s.asked();
    assert_eq!(
        asked.len(),
        1,
        "only the mentioned message runs: {asked:#?}"
    );
    assert!(asked[0].contains("Bob: just chatting"), "{asked:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_an_allowlist_only_owners_and_listed_members_reach_the_model() {
    // Issue #32.9: every other group test runs with an open policy, so dropping the owner's
    // way into an allowlisted group went unnoticed. Ann (7) is an owner in no list, Cy (9)
    // is listed, Bob (8) is neither.
    // followup: each message its own turn, none steered into another.
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "group_allow_from = [\"9\"]",
        tables: "[commands]\nowner_allow_from = [\"telegram:7\"]",
        ..TgConfig::default()
    })
    .await;
    let cy = UserSpec::new(9, "Cy");
    let mut gw = s.gateway();
    // Bob first: were he let in, his turn would run before the others.
    s.tg.user_sends(team(), bob(), &format!("{} bob here", at_bot()));
    s.tg.user_sends(team(), ann(), &format!("{} ann here", at_bot()));
    s.tg.user_sends(team(), cy, &format!("{} cy here", at_bot()));
    gw.wait(&s, "the owner's and the listed member's answers", |s| {
        let texts = s.texts(GROUP);
        texts.iter().any(|t| t.contains("ann here")) && texts.iter().any(|t| t.contains("cy here"))
    })
    .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;
    let asked = s.asked();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked[0].ends_with("ann here") && asked[1].ends_with("cy here"),
        "{asked:#?}"
    );
    let texts = s.texts(GROUP);
    assert!(!texts.iter().any(|t| t.contains("bob")), "{texts:#?}");
}
