//! End-to-end, ACP coding agents on Telegram through `chela gateway` against the fake Bot API
//! and the scripted `fake-acp-agent`: `/acp spawn` in a forum's General topic opens a topic
//! bound to the agent, plain messages there go to it, permission questions are asked and
//! answered in the topic, `/stop` cancels a turn, the binding survives a restart (resumed with
//! `session/load`), file access stays inside the session folder, a crashed agent is restarted
//! by the next message, `/acp` is owner-only, and a DM can be bound in place.

use crate::common;

use chela_testkit::telegram::BotMessage;
use chela_testkit::{ChatSpec, SendOptions, UserSpec};
use common::acp::{self, AgentFiles};
use common::telegram::{Gateway, TgConfig, TgSetup};

const FORUM: i64 = -1_001_777_000_001;
/// The owner (`owner_allow_from`).
const ANN: i64 = 7;
/// A group member who is not an owner.
const BOB: i64 = 8;

fn forum() -> ChatSpec {
    ChatSpec::forum(FORUM, "Forum")
}

fn ann() -> UserSpec {
    UserSpec::new(ANN, "Ann")
}

fn bob() -> UserSpec {
    UserSpec::new(BOB, "Bob")
}

/// In topic `thread`; `None` is General.
fn in_topic(thread: Option<i64>) -> SendOptions {
    SendOptions {
        message_thread_id: thread,
        ..SendOptions::default()
    }
}

/// An open forum (mention needed outside bound topics), Ann the owner, the fake agent as the
/// default harness with `permissions` and `acp_extra` lines in `[acp]`.
async fn setup(permissions: &str, acp_extra: &str) -> (TgSetup, AgentFiles) {
    setup_with_env(permissions, acp_extra, "").await
}

/// [`setup`] with `agent_env` (`KEY = 'value', ...`) in the agent's environment.
async fn setup_with_env(
    permissions: &str,
    acp_extra: &str,
    agent_env: &str,
) -> (TgSetup, AgentFiles) {
    let s = TgSetup::with(TgConfig {
        telegram: "group_policy = \"open\"",
        tables: &format!("[commands]\nowner_allow_from = [\"telegram:{ANN}\"]"),
        ..TgConfig::default()
    })
    .await;
    s.tg.add_chat(forum());
    let files = acp::configure_with_env(&s.setup, permissions, acp_extra, agent_env);
    (s, files)
}

/// The bot's messages in forum topic `topic` (`None`: General).
fn in_thread(s: &TgSetup, topic: Option<i64>) -> Vec<BotMessage> {
    s.sent(FORUM)
        .into_iter()
        .filter(|m| m.thread_id == topic)
        .collect()
}

fn texts_in(s: &TgSetup, topic: Option<i64>) -> Vec<String> {
    in_thread(s, topic).into_iter().map(|m| m.text).collect()
}

/// Every text the bot sent or edited anywhere (sends and edits, as called).
fn every_bot_text(s: &TgSetup) -> Vec<String> {
    s.tg.calls()
        .into_iter()
        .filter(|c| c.method == "sendmessage" || c.method == "editmessagetext")
        .filter_map(|c| c.body["text"].as_str().map(str::to_owned))
        .collect()
}

/// The agent's answer to `perm ...` (`permission: <outcome>`), not the question itself.
fn is_permission_result(text: &str) -> bool {
    !text.contains("🔐") && text.contains("permission: ")
}

/// Ann sends `/acp spawn fake` in General; waits for the new topic's announcement and
/// returns the topic id.
async fn spawn_topic(s: &TgSetup, gw: &mut Gateway) -> i64 {
    let before = s.tg.topics(FORUM).len();
    s.tg.user_sends_with(forum(), ann(), "/acp spawn fake", in_topic(None));
    gw.wait(s, "a new topic announcing the agent", |s| {
        s.tg.topics(FORUM).len() > before
            && s.sent(FORUM)
                .iter()
                .any(|m| m.thread_id.is_some() && m.text.contains("is bound to this thread"))
    })
    .await;
    let topics = s.tg.topics(FORUM);
    topics.last().unwrap().message_thread_id
}

/// Ann sends `/acp spawn fake` inside a topic of the forum made by a user: that topic is
/// bound in place (`--thread auto` binds the current thread). Returns the topic id.
async fn bind_topic(s: &TgSetup, gw: &mut Gateway) -> i64 {
    let topic = s.tg.add_topic(FORUM, "Work").unwrap();
    s.tg.user_sends_with(forum(), ann(), "/acp spawn fake", in_topic(Some(topic)));
    gw.wait(s, "the binding notice in the topic", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t.contains("is bound here"))
    })
    .await;
    topic
}

/// Ann writes `text` in `topic` (no mention) and waits for a bot message there whose text
/// is exactly `want`; returns Ann's message id.
async fn say_and_expect(s: &TgSetup, gw: &mut Gateway, topic: i64, text: &str, want: &str) -> i64 {
    let id =
        s.tg.user_sends_with(forum(), ann(), text, in_topic(Some(topic)));
    gw.wait(s, &format!("{want:?} in the topic"), |s| {
        texts_in(s, Some(topic)).iter().any(|t| t == want)
    })
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_in_general_opens_a_bound_topic_whose_plain_messages_go_to_the_agent() {
    let (s, files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let topic = spawn_topic(&s, &mut gw).await;
    let asked =
        s.tg.user_sends_with(forum(), ann(), "hello there", in_topic(Some(topic)));
    gw.wait(&s, "the echo in the topic", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t == "echo: hello there")
    })
    .await;
    gw.stop().await;

    // The topic was made by chela (createForumTopic), named after the harness.
    assert_eq!(s.tg.call_count("createForumTopic"), 1);
    let topics = s.tg.topics(FORUM);
    assert_eq!(topics.len(), 1, "{topics:#?}");
    assert_eq!(topics[0].name, "fake session");
    // General is told where the agent went; the topic is told it is bound.
    let general = texts_in(&s, None);
    assert!(
        general
            .iter()
            .any(|t| t.starts_with("Started fake") && t.contains("new thread")),
        "{general:#?}"
    );
    assert!(!general.iter().any(|t| t.contains("echo:")), "{general:#?}");
    let in_t = in_thread(&s, Some(topic));
    assert!(
        in_t.iter()
            .any(|m| m.text.contains("is bound to this thread")),
        "{in_t:#?}"
    );
    // The answer: one message, complete, quoting the message it answers.
    let echoes: Vec<&BotMessage> = in_t.iter().filter(|m| m.text.contains("echo:")).collect();
    assert_eq!(echoes.len(), 1, "{in_t:#?}");
    assert_eq!(echoes[0].text, "echo: hello there");
    assert_eq!(echoes[0].reply_to, Some(asked), "{:#?}", echoes[0]);
    let sends: Vec<String> =
        s.tg.calls()
            .into_iter()
            .filter(|c| c.method == "sendmessage")
            .filter_map(|c| c.body["text"].as_str().map(str::to_owned))
            .filter(|t| t.contains("echo"))
            .collect();
    assert_eq!(sends.len(), 1, "the answer is sent once: {sends:#?}");
    for t in every_bot_text(&s).iter().filter(|t| t.starts_with("echo")) {
        assert!("echo: hello there".starts_with(t.as_str()), "{t:?}");
    }
    // The agent got it, not chela's model.
    assert!(s.asked().is_empty(), "model asked: {:#?}", s.asked());
    assert_eq!(files.count("session/new"), 1, "{}", files.summary());
    assert_eq!(files.count("session/prompt"), 1, "{}", files.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_question_is_asked_in_the_topic_and_the_owners_allow_answers_it() {
    let (s, files) = setup("ask", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    s.tg.user_sends_with(forum(), ann(), "perm deploy", in_topic(Some(topic)));
    gw.wait(&s, "the permission question", |s| {
        texts_in(s, Some(topic)).iter().any(|t| t.contains("🔐"))
    })
    .await;
    s.tg.user_sends_with(forum(), ann(), "allow", in_topic(Some(topic)));
    gw.wait(&s, "the allowed result", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| is_permission_result(t))
    })
    .await;
    gw.stop().await;

    let texts = texts_in(&s, Some(topic));
    let question = texts.iter().find(|t| t.contains("🔐")).unwrap();
    assert!(
        question.contains("fake asks permission: deploy"),
        "{question}"
    );
    assert!(question.contains("Reply allow or deny"), "{question}");
    assert!(
        texts_in(&s, None).iter().all(|t| !t.contains("🔐")),
        "asked in the topic only"
    );
    let result = texts.iter().find(|t| is_permission_result(t)).unwrap();
    assert!(result.contains("permission: allow_once"), "{texts:#?}");
    assert_eq!(files.permission_outcomes(), vec!["allow_once".to_string()]);
    // "allow" was an answer, not a prompt.
    assert_eq!(files.count("session/prompt"), 1, "{}", files.summary());
    assert!(
        !texts.iter().any(|t| t.contains("echo: allow")),
        "{texts:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_question_shows_the_agents_options_as_buttons_and_anyone_elses_press_is_refused()
 {
    let (s, files) = setup("ask", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    s.tg.user_sends_with(forum(), ann(), "perm deploy", in_topic(Some(topic)));
    let question = |s: &TgSetup| {
        in_thread(s, Some(topic))
            .into_iter()
            .find(|m| m.text.contains("🔐"))
    };
    gw.wait(&s, "the permission question with buttons", |s| {
        question(s).is_some_and(|m| !m.buttons.is_empty())
    })
    .await;
    let asked = question(&s).unwrap();
    // The fake agent's own four options, by their names; a press answers with that option.
    let labels: Vec<&str> = asked.buttons.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(
        labels,
        [
            "✅ Allow once",
            "✅ Always allow",
            "⛔ Reject",
            "⛔ Always reject"
        ]
    );
    let allow = common::telegram::button(&asked, "✅ Always allow");
    // Bob is neither the binding's owner nor an owner of the bot: refused, nothing changes.
    s.tg.user_presses(FORUM, bob(), asked.message_id, &allow)
        .unwrap();
    gw.wait(&s, "the refusal", |s| {
        common::telegram::press_answers(s).len() == 1
    })
    .await;
    assert_eq!(question(&s).unwrap().buttons.len(), 4, "unchanged");
    s.tg.user_presses(FORUM, ann(), asked.message_id, &allow)
        .unwrap();
    gw.wait(&s, "the allowed result", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| is_permission_result(t))
    })
    .await;
    gw.wait(&s, "the question edited", |s| {
        question(s).is_some_and(|m| m.buttons.is_empty())
    })
    .await;
    gw.stop().await;
    assert_eq!(
        common::telegram::press_answers(&s),
        [
            "Only the owner of this coding agent's session or the bot's owners can answer this.",
            "Chosen: ✅ Always allow."
        ]
    );
    assert!(
        question(&s)
            .unwrap()
            .text
            .ends_with("✅ Always allow by Ann."),
        "{}",
        question(&s).unwrap().text
    );
    assert_eq!(
        files.permission_outcomes(),
        vec!["allow_always".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_owners_allow_does_not_answer_a_permission_question() {
    let (s, files) = setup("ask", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    s.tg.user_sends_with(forum(), ann(), "perm deploy", in_topic(Some(topic)));
    gw.wait(&s, "the permission question", |s| {
        texts_in(s, Some(topic)).iter().any(|t| t.contains("🔐"))
    })
    .await;
    s.tg.user_sends_with(forum(), bob(), "allow", in_topic(Some(topic)));
    s.wait_consumed(&mut gw).await;
    // Had Bob's word counted, the question would be gone and Ann's deny would come too late.
    s.tg.user_sends_with(forum(), ann(), "deny", in_topic(Some(topic)));
    gw.wait(&s, "the result", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| is_permission_result(t))
    })
    .await;
    gw.stop().await;

    let texts = texts_in(&s, Some(topic));
    let result = texts.iter().find(|t| is_permission_result(t)).unwrap();
    assert!(result.contains("permission: reject_once"), "{texts:#?}");
    assert!(
        !texts.iter().any(|t| t.contains("allow_once")),
        "{texts:#?}"
    );
    assert_eq!(files.permission_outcomes(), vec!["reject_once".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_permission_question_is_denied_at_the_timeout() {
    let (s, files) = setup("ask", "ask_timeout_s = 1").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    s.tg.user_sends_with(forum(), ann(), "perm deploy", in_topic(Some(topic)));
    gw.wait(&s, "the result", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| is_permission_result(t))
    })
    .await;
    gw.stop().await;

    let texts = texts_in(&s, Some(topic));
    let question = texts.iter().position(|t| t.contains("🔐")).expect("asked");
    let denied = texts
        .iter()
        .position(|t| t.contains("No answer in time"))
        .unwrap_or_else(|| panic!("the timeout is announced: {texts:#?}"));
    assert!(question < denied, "{texts:#?}");
    let result = texts.iter().find(|t| is_permission_result(t)).unwrap();
    assert!(result.contains("permission: reject_once"), "{texts:#?}");
    assert_eq!(files.permission_outcomes(), vec!["reject_once".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_the_agents_turn_and_the_next_message_works() {
    let (s, files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    let slow =
        s.tg.user_sends_with(forum(), ann(), "slow 50", in_topic(Some(topic)));
    gw.wait(&s, "the first preview", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t.starts_with("chunk 1/50"))
    })
    .await;
    s.tg.user_sends_with(forum(), ann(), "/stop", in_topic(Some(topic)));
    gw.wait(&s, "Stopped. and the cut answer", |s| {
        let texts = texts_in(s, Some(topic));
        texts.iter().any(|t| t.starts_with("Stopped"))
            && texts.iter().any(|t| t.ends_with("[stopped]"))
    })
    .await;
    assert!(
        files.count("session/cancel") >= 1,
        "session/cancel sent: {}",
        files.summary()
    );
    say_and_expect(&s, &mut gw, topic, "still there?", "echo: still there?").await;
    gw.stop().await;

    let sent = in_thread(&s, Some(topic));
    let cut = sent.iter().find(|m| m.text.ends_with("[stopped]")).unwrap();
    assert!(cut.text.starts_with("chunk 1/50"), "{cut:#?}");
    assert!(!cut.text.contains("chunk 50/50"), "{cut:#?}");
    assert_eq!(cut.reply_to, Some(slow), "{cut:#?}");
    assert_eq!(
        sent.iter()
            .filter(|m| m.text.starts_with("Stopped"))
            .count(),
        1,
        "{sent:#?}"
    );
    // The same agent process and session carried on.
    assert_eq!(files.count("initialize"), 1, "{}", files.summary());
    let prompts = files.session_ids("session/prompt");
    assert_eq!(prompts.len(), 2, "{}", files.summary());
    assert_eq!(prompts[0], prompts[1]);
    assert_eq!(files.session_ids("session/cancel")[0], prompts[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_topic_resumes_the_same_agent_session() {
    let (s, files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    say_and_expect(&s, &mut gw, topic, "before restart", "echo: before restart").await;
    gw.stop().await;
    let session = files.session_ids("session/prompt");
    assert_eq!(session.len(), 1, "{}", files.summary());
    assert_eq!(files.count("session/load"), 0, "{}", files.summary());

    let mut gw = s.gateway();
    say_and_expect(&s, &mut gw, topic, "after restart", "echo: after restart").await;
    gw.stop().await;

    // A second process, which loaded the same session instead of making a new one.
    assert_eq!(files.count("initialize"), 2, "{}", files.summary());
    assert_eq!(
        files.session_ids("session/load"),
        session,
        "{}",
        files.summary()
    );
    assert_eq!(files.count("session/new"), 1, "{}", files.summary());
    let prompts = files.session_ids("session/prompt");
    assert_eq!(prompts.len(), 2, "{}", files.summary());
    assert_eq!(prompts[1], session[0]);
    assert!(s.asked().is_empty(), "model asked: {:#?}", s.asked());
    let echoes = texts_in(&s, Some(topic))
        .into_iter()
        .filter(|t| t.starts_with("echo:"))
        .count();
    assert_eq!(echoes, 2, "{:#?}", texts_in(&s, Some(topic)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_an_agent_without_session_load_gets_a_new_session_and_says_so() {
    let (s, files) = setup_with_env("approve-reads", "", "FAKE_ACP_NO_LOAD = '1'").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    say_and_expect(&s, &mut gw, topic, "before restart", "echo: before restart").await;
    gw.stop().await;

    let mut gw = s.gateway();
    s.tg.user_sends_with(forum(), ann(), "after restart", in_topic(Some(topic)));
    gw.wait(&s, "the answer after the restart", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t.contains("echo: after restart"))
    })
    .await;
    gw.stop().await;

    let texts = texts_in(&s, Some(topic));
    let answer = texts
        .iter()
        .find(|t| t.contains("echo: after restart"))
        .unwrap();
    assert!(
        answer.contains("fake cannot resume sessions; this is a new one"),
        "{texts:#?}"
    );
    assert_eq!(files.count("session/load"), 0, "{}", files.summary());
    assert_eq!(files.count("session/new"), 2, "{}", files.summary());
    let prompts = files.session_ids("session/prompt");
    assert_eq!(prompts.len(), 2, "{}", files.summary());
    assert_ne!(prompts[0], prompts[1], "a new session after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_in_a_bound_topic_resets_the_agent_session_in_place() {
    let (s, files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    say_and_expect(&s, &mut gw, topic, "first", "echo: first").await;
    s.tg.user_sends_with(forum(), ann(), "/new", in_topic(Some(topic)));
    gw.wait(&s, "New session started.", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t.starts_with("New session started."))
    })
    .await;
    say_and_expect(&s, &mut gw, topic, "second", "echo: second").await;
    gw.stop().await;

    let texts = texts_in(&s, Some(topic));
    let reset = texts
        .iter()
        .find(|t| t.starts_with("New session started."))
        .unwrap();
    assert!(reset.contains("fake starts a fresh session"), "{reset}");
    // The same process closed the old session and made a new one; the topic stays bound.
    assert_eq!(files.count("initialize"), 1, "{}", files.summary());
    assert_eq!(files.count("session/new"), 2, "{}", files.summary());
    let prompts = files.session_ids("session/prompt");
    assert_eq!(prompts.len(), 2, "{}", files.summary());
    assert_ne!(prompts[0], prompts[1]);
    assert_eq!(files.session_ids("session/close"), vec![prompts[0].clone()]);
    assert!(s.asked().is_empty(), "model asked: {:#?}", s.asked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_reads_outside_the_session_folder_are_refused() {
    const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-FOLDER";
    let (s, files) = setup("approve-reads", "").await;
    // The session folder is the agent workspace `ws`; `outside.txt` sits next to it.
    std::fs::create_dir_all(s.setup.path("ws")).unwrap();
    std::fs::write(s.setup.path("outside.txt"), SECRET).unwrap();
    std::fs::write(s.setup.path("ws/inside.txt"), "inside words").unwrap();
    let outside = s.setup.path("outside.txt");
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    s.tg.user_sends_with(
        forum(),
        ann(),
        "fs-read ../outside.txt",
        in_topic(Some(topic)),
    );
    gw.wait(&s, "the refusal", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t.contains("read error"))
    })
    .await;
    let absolute = format!("fs-read {}", outside.display());
    s.tg.user_sends_with(forum(), ann(), &absolute, in_topic(Some(topic)));
    gw.wait(&s, "the second refusal", |s| {
        texts_in(s, Some(topic))
            .iter()
            .filter(|t| t.contains("read error"))
            .count()
            >= 2
    })
    .await;
    say_and_expect(
        &s,
        &mut gw,
        topic,
        "fs-read inside.txt",
        "read: inside words",
    )
    .await;
    gw.stop().await;

    let refusals: Vec<String> = texts_in(&s, Some(topic))
        .into_iter()
        .filter(|t| t.contains("read error"))
        .collect();
    assert_eq!(refusals.len(), 2, "{refusals:#?}");
    for r in &refusals {
        assert!(r.contains("refused"), "{r}");
    }
    for t in every_bot_text(&s) {
        assert!(!t.contains(SECRET), "leaked: {t}");
    }
    assert_eq!(files.count("session/prompt"), 3, "{}", files.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_agent_is_reported_and_the_next_message_starts_it_again() {
    let (s, files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    let crash =
        s.tg.user_sends_with(forum(), ann(), "crash", in_topic(Some(topic)));
    gw.wait(&s, "the crash report", |s| {
        texts_in(s, Some(topic))
            .iter()
            .any(|t| t.contains("exited unexpectedly"))
    })
    .await;
    say_and_expect(&s, &mut gw, topic, "are you back?", "echo: are you back?").await;
    gw.stop().await;

    let sent = in_thread(&s, Some(topic));
    let reports: Vec<&BotMessage> = sent
        .iter()
        .filter(|m| m.text.contains("exited unexpectedly"))
        .collect();
    assert_eq!(reports.len(), 1, "{sent:#?}");
    let report = &reports[0].text;
    assert!(
        report.starts_with("⚠️ fake exited unexpectedly"),
        "{report}"
    );
    assert!(report.contains("exit code 3"), "{report}");
    assert!(
        report.contains("The next message starts it again"),
        "{report}"
    );
    assert_eq!(reports[0].reply_to, Some(crash));
    // A new process took over the same session.
    assert_eq!(files.count("initialize"), 2, "{}", files.summary());
    let first = files.session_ids("session/prompt")[0].clone();
    assert_eq!(files.session_ids("session/load"), vec![first]);
    assert!(s.asked().is_empty(), "model asked: {:#?}", s.asked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_owners_spawn_is_ignored() {
    let (s, files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let bobs =
        s.tg.user_sends_with(forum(), bob(), "/acp spawn fake", in_topic(None));
    s.wait_consumed(&mut gw).await;
    // The owner's spawn after it works.
    let topic = bind_topic(&s, &mut gw).await;
    // General is not bound: a plain message there stays group context.
    s.tg.user_sends_with(forum(), ann(), "anyone around?", in_topic(None));
    s.wait_consumed(&mut gw).await;
    // Stopping waits for command tasks in flight, so a wrongly accepted spawn of Bob's would
    // have finished by now.
    gw.stop().await;

    let sent = s.sent(FORUM);
    assert!(
        sent.iter().all(|m| m.reply_to != Some(bobs)),
        "Bob got an answer: {sent:#?}"
    );
    assert!(texts_in(&s, None).is_empty(), "{sent:#?}");
    let bound: Vec<&BotMessage> = sent.iter().filter(|m| m.text.contains("bound")).collect();
    assert_eq!(bound.len(), 1, "{sent:#?}");
    assert_eq!(bound[0].thread_id, Some(topic));
    assert_eq!(s.tg.call_count("createForumTopic"), 0);
    assert_eq!(files.count("session/new"), 1, "{}", files.summary());
    assert_eq!(files.count("session/prompt"), 0, "{}", files.summary());
    assert!(s.asked().is_empty(), "model asked: {:#?}", s.asked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_bound_in_place_and_close_hands_it_back_to_chela() {
    let (s, files) = setup("approve-reads", "").await;
    let dm = || ChatSpec::private(ANN);
    let mut gw = s.gateway();
    s.tg.user_sends(dm(), ann(), "/acp spawn fake");
    gw.wait(&s, "the binding notice", |s| {
        s.texts(ANN).iter().any(|t| t.contains("is bound here"))
    })
    .await;
    s.tg.user_sends(dm(), ann(), "hello in private");
    gw.wait(&s, "the echo", |s| {
        s.texts(ANN).iter().any(|t| t == "echo: hello in private")
    })
    .await;
    s.tg.user_sends(dm(), ann(), "/acp status");
    gw.wait(&s, "the status", |s| {
        s.texts(ANN)
            .iter()
            .any(|t| t.contains("Coding agent: fake"))
    })
    .await;
    s.tg.user_sends(dm(), ann(), "/acp close");
    gw.wait(&s, "Closed fake", |s| {
        s.texts(ANN).iter().any(|t| t.starts_with("Closed fake"))
    })
    .await;
    s.tg.user_sends(dm(), ann(), "back to chela");
    gw.wait(&s, "the model's answer", |s| {
        s.texts(ANN).iter().any(|t| t == "ok: back to chela")
    })
    .await;
    gw.stop().await;

    assert_eq!(s.tg.call_count("createForumTopic"), 0, "no topic in a DM");
    assert_eq!(s.asked(), vec!["back to chela".to_string()]);
    assert_eq!(files.count("session/prompt"), 1, "{}", files.summary());
    assert_eq!(files.count("session/close"), 1, "{}", files.summary());
    let texts = s.texts(ANN);
    assert!(
        !texts.iter().any(|t| t == "echo: back to chela"),
        "{texts:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_slash_word_in_a_bound_topic_goes_to_the_agent() {
    let (s, _files) = setup("approve-reads", "").await;
    let mut gw = s.gateway();
    let topic = bind_topic(&s, &mut gw).await;
    // The agent's own command: chela does not know it, the agent may.
    say_and_expect(
        &s,
        &mut gw,
        topic,
        "/review the diff",
        "echo: /review the diff",
    )
    .await;
    gw.stop().await;
    assert!(
        !texts_in(&s, Some(topic))
            .iter()
            .any(|t| t.contains("Unknown command")),
        "{:#?}",
        texts_in(&s, Some(topic))
    );
}
