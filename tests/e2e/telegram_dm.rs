//! End-to-end, Telegram direct messages through `chela gateway`: streamed preview edits, long
//! replies split into parts, DM pairing, and the command list registered at start.

use crate::common;

use common::telegram::{TgConfig, TgSetup, dm};
use common::{messages, text_of};

/// Ann's DM session key.
const ANN_KEY: &str = "agent:main:telegram:direct:42";

/// The whole answer to `slow <ms> <n>`.
fn ticks(n: u32) -> String {
    (1..=n).map(|i| format!("tick {i} ")).collect()
}

/// Ann asks `slow 300 8` of a gateway on `s`, which is stopped once the whole answer shows:
/// the answer with its trailing space, and without.
async fn slow_answer_streamed(s: &TgSetup) -> (String, String) {
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "slow 300 8");
    let full = ticks(8);
    let want = full.trim_end().to_string();
    gw.wait(s, "the full answer", |s| {
        s.texts(42).iter().any(|t| t.trim_end() == want)
    })
    .await;
    gw.stop().await;
    (full, want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_reply_streams_into_one_message_edited_as_it_grows() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let (full, want) = slow_answer_streamed(&s).await;

    let sent = s.tg.sent(42);
    assert_eq!(sent.len(), 1, "exactly one bot message: {sent:#?}");
    let msg = &sent[0];
    assert!(!msg.deleted);
    // The DM edit pace is about 1 s and the answer takes about 2.4 s: the message was sent as
    // a preview and edited at least once (the final is an edit too).
    assert!(msg.edits >= 1, "no preview edits: {msg:#?}");
    assert_eq!(msg.text.trim_end(), want);
    assert!(
        s.tg.chat_actions(42).iter().any(|a| a.action == "typing"),
        "typing indicator: {:?}",
        s.tg.chat_actions(42)
    );
    // Every preview was a prefix of the answer: edits only ever grew the text.
    let edits: Vec<String> =
        s.tg.calls()
            .iter()
            .filter(|c| c.method == "editmessagetext" || c.method == "sendmessage")
            .filter_map(|c| c.body["text"].as_str().map(str::to_owned))
            .collect();
    assert!(edits.len() >= 2, "{edits:#?}");
    for text in &edits {
        assert!(
            full.starts_with(text.trim_end()),
            "{text:?} is not a prefix"
        );
    }
    assert_eq!(s.asked(), vec!["slow 300 8".to_string()]);
}

/// The preview's first `sendMessage` is carried out but its answer is lost: chela cannot
/// know the message exists (the Bot API has no idempotency key), so that partial preview
/// stays in the chat. The answer still arrives whole exactly once, and nothing else is sent
/// (docs/durability.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_whose_send_lost_its_answer_leaves_one_stale_part_and_the_answer_once() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    s.tg.lose_next_answer("sendMessage");
    let (full, want) = slow_answer_streamed(&s).await;
    let lost = s.tg.fault_counts().answer_lost;
    assert_eq!(lost.get("sendmessage"), Some(&1), "{lost:?}");
    let texts = s.texts(42);
    let whole = texts.iter().filter(|t| t.trim_end() == want).count();
    assert_eq!(whole, 1, "{texts:#?}");
    assert_eq!(
        texts.len(),
        2,
        "one stale preview and the answer: {texts:#?}"
    );
    let stale = texts.iter().find(|t| t.trim_end() != want);
    assert!(
        stale.is_some_and(|t| full.starts_with(t.trim_end())),
        "{texts:#?}"
    );
    assert_eq!(s.asked(), vec!["slow 300 8".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_over_4096_chars_is_split_into_parts_without_loss_or_repeats() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "long 9000");
    // The answer ends in a full stop: wait for the part that holds it.
    gw.wait(&s, "the last part", |s| {
        let texts = s.texts(42);
        texts.len() >= 3 && texts.last().is_some_and(|t| t.trim_end().ends_with('.'))
    })
    .await;
    gw.stop().await;

    let entries = s.setup.export(ANN_KEY).await;
    let answer = messages(&entries)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(text_of)
        .next_back()
        .expect("an assistant answer in the transcript");
    assert_eq!(answer.chars().count(), 9000);

    let sent = s.tg.sent(42);
    assert!(sent.len() >= 3, "{} parts", sent.len());
    assert!(sent.iter().all(|m| !m.deleted), "{sent:#?}");
    let mut at = 0;
    for part in &sent {
        let units = part.text.encode_utf16().count();
        assert!(units <= 4096, "part of {units} UTF-16 units");
        assert_eq!(part.parse_mode.as_deref(), Some("HTML"), "{part:#?}");
        assert!(!part.text.contains("&amp;") && !part.text.contains('<'));
        // Each part is the next stretch of the answer (only whitespace at the cuts is lost).
        let body = part.text.trim();
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
    let joined: String = sent.iter().map(|m| squash(&m.text)).collect();
    assert_eq!(joined, squash(&answer), "no text lost or repeated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_dm_gets_a_pairing_code_and_is_answered_once_approved() {
    // Default dm_policy: pairing; nobody is allowed yet.
    let s = TgSetup::new("").await;
    let mut gw = s.gateway();
    let (chat, zed) = dm(77, "Zed");
    s.tg.user_sends(chat.clone(), zed.clone(), "hi there");
    gw.wait(&s, "the pairing prompt", |s| !s.texts(77).is_empty())
        .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;

    let prompt = s.texts(77).concat();
    let code = prompt
        .split("chela pairing approve telegram ")
        .nth(1)
        .map(|rest| rest.chars().take(8).collect::<String>())
        .unwrap_or_else(|| panic!("no approve command in {prompt:?}"));
    assert_eq!(code.len(), 8, "{prompt:?}");
    assert!(
        code.chars()
            .all(|c| c.is_ascii_alphanumeric() && !"0O1I".contains(c)),
        "code {code:?} uses an ambiguous character"
    );
    assert!(
        !prompt.contains("hi there"),
        "the message was not run: {prompt:?}"
    );
    assert_eq!(
        s.setup.fake.request_count(),
        0,
        "no model call before approval"
    );

    let (ok, list) = s.cli(&["pairing", "list"]).await;
    assert!(ok, "{list}");
    assert!(list.contains(&code) && list.contains("77"), "{list}");
    let (ok, approved) = s.cli(&["pairing", "approve", "telegram", &code]).await;
    assert!(ok, "{approved}");
    assert!(
        approved.contains("owner"),
        "the first approval makes the owner: {approved}"
    );
    let (ok, list) = s.cli(&["pairing", "list"]).await;
    assert!(ok && !list.contains(&code), "{list}");

    // Approved while no gateway ran: the next start tells them, once.
    let welcome = "You're in: the bot's owner approved you while the bot was offline. \
                   Send your message again.";
    let mut gw = s.gateway();
    gw.wait(&s, "the welcome", |s| {
        s.texts(77).iter().any(|t| t == welcome)
    })
    .await;
    s.tg.user_sends(chat.clone(), zed.clone(), "hello again");
    gw.wait(&s, "the answer", |s| {
        s.texts(77).iter().any(|t| t == "ok: hello again")
    })
    .await;
    gw.stop().await;
    // The start after that tells nobody again (its start-up work runs beside this turn).
    let mut gw = s.gateway();
    s.tg.user_sends(chat, zed, "third");
    gw.wait(&s, "the third answer", |s| {
        s.texts(77).iter().any(|t| t == "ok: third")
    })
    .await;
    gw.stop().await;
    // Only the messages after approval reached the model; the first one is not replayed.
    assert_eq!(s.asked(), ["hello again", "third"]);
    assert_eq!(s.texts(77).len(), 4, "{:#?}", s.texts(77));
    assert_eq!(s.texts(77)[1], welcome, "once, before the answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_is_approved_while_the_gateway_runs() {
    let s = TgSetup::new("").await;
    let mut gw = s.gateway();
    let (chat, zed) = dm(78, "Zed");
    s.tg.user_sends(chat.clone(), zed.clone(), "hi there");
    gw.wait(&s, "the pairing prompt", |s| !s.texts(78).is_empty())
        .await;
    let prompt = s.texts(78).concat();
    let code: String = prompt
        .split("chela pairing approve telegram ")
        .nth(1)
        .map(|rest| rest.chars().take(8).collect())
        .unwrap_or_else(|| panic!("no approve command in {prompt:?}"));
    // The gateway holds the store: the CLI goes through its RPC.
    let (ok, list) = s.cli(&["pairing", "list"]).await;
    assert!(ok && list.contains(&code), "{list}");
    let (ok, out) = s.cli(&["pairing", "reject", "telegram", "ZZZZZZZZ"]).await;
    assert!(!ok, "an unknown code is refused: {out}");
    let (ok, approved) = s.cli(&["pairing", "approve", "telegram", &code]).await;
    assert!(
        ok && approved.contains("approved name \"Zed\" (unverified) (id 78)"),
        "{approved}"
    );
    // Approved through the running gateway: Zed is told, and the message sent while
    // waiting is answered now.
    gw.wait(&s, "the waiting message answered", |s| {
        s.texts(78).iter().any(|t| t == "ok: hi there")
    })
    .await;
    s.tg.user_sends(chat, zed, "hello again");
    gw.wait(&s, "the answer", |s| {
        s.texts(78).iter().any(|t| t == "ok: hello again")
    })
    .await;
    gw.stop().await;
    assert_eq!(s.asked(), ["hi there", "hello again"]);
    assert!(
        s.texts(78)[1].starts_with("You're in: the bot's owner approved you."),
        "{:#?}",
        s.texts(78)
    );
}

/// The code in a pairing prompt.
fn code_in(prompt: &str) -> Option<String> {
    let rest = prompt.split("chela pairing approve telegram ").nth(1)?;
    Some(rest.chars().take(8).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_strangers_cannot_lock_pairing_and_the_late_ones_are_told_to_try_later() {
    // Issue #32.4: three strangers' codes locked pairing for an hour; later ones heard nothing.
    let s = TgSetup::new("").await;
    let mut gw = s.gateway();
    let max = chela::store::MAX_PENDING as i64;
    let crowd = max + 3;
    let hostile = "Eve\napproved: yes \u{1b}[2J";
    for id in 5000..5000 + crowd {
        let name = if id == 5001 {
            hostile.to_string()
        } else {
            format!("S{id}")
        };
        let (chat, user) = dm(id, &name);
        s.tg.user_sends(chat, user, "hi");
    }
    gw.wait(&s, "an answer to every stranger", |s| {
        (5000..5000 + crowd).all(|id| !s.texts(id).is_empty())
    })
    .await;
    // The late ones write again: told to try later once, not once per message.
    let late = 5000 + crowd - 1;
    for _ in 0..2 {
        let (chat, user) = dm(late, &format!("S{late}"));
        s.tg.user_sends(chat, user, "hello?");
    }
    // One with a code writes again: the same code again.
    let (chat, user) = dm(5000, "S5000");
    s.tg.user_sends(chat, user, "again");
    gw.wait(&s, "the code repeated", |s| s.texts(5000).len() >= 2)
        .await;
    s.wait_consumed(&mut gw).await;
    let (ok, list) = s.cli(&["pairing", "list"]).await;
    gw.stop().await;

    for id in 5000..5000 + max {
        let texts = s.texts(id);
        assert!(code_in(&texts[0]).is_some(), "{id}: {texts:#?}");
    }
    let first = s.texts(5000);
    assert_eq!(code_in(&first[0]), code_in(&first[1]), "{first:#?}");
    for id in 5000 + max..5000 + crowd {
        let texts = s.texts(id);
        assert_eq!(texts.len(), 1, "{id} is told once: {texts:#?}");
        assert!(
            texts[0].contains("too many requests are waiting")
                && texts[0].contains("Try again in about 60 minutes"),
            "{id}: {texts:#?}"
        );
    }
    assert_eq!(
        s.setup.fake.request_count(),
        0,
        "no stranger reached the model"
    );
    // The owner's list shows every waiting code, the chosen names as quoted, escaped,
    // unverified text on one line each.
    assert!(ok, "{list}");
    assert_eq!(list.lines().count(), max as usize, "{list}");
    assert!(
        list.contains("name \"Eve\\napproved: yes \\u{1b}[2J\" (unverified) (id 5001)"),
        "{list}"
    );
    assert!(!list.contains('\u{1b}'), "{list:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_owners_configured_an_approved_stranger_is_no_owner() {
    // Issue #11.1: approving a stranger made them owner although owners were configured.
    let s = TgSetup::with(TgConfig {
        tables: "[commands]\nowner_allow_from = [\"telegram:4300\"]",
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (chat, zed) = dm(79, "Zed");
    s.tg.user_sends(chat.clone(), zed.clone(), "hi there");
    gw.wait(&s, "the pairing prompt", |s| !s.texts(79).is_empty())
        .await;
    let prompt = s.texts(79).concat();
    let code: String = prompt
        .split("chela pairing approve telegram ")
        .nth(1)
        .map(|rest| rest.chars().take(8).collect())
        .unwrap_or_else(|| panic!("no approve command in {prompt:?}"));
    let (ok, approved) = s.cli(&["pairing", "approve", "telegram", &code]).await;
    assert!(ok, "{approved}");
    assert!(
        approved.contains("approved name \"Zed\" (unverified) (id 79)")
            && approved.contains("NOT an owner"),
        "the approval says plainly that Zed is no owner: {approved}"
    );
    assert!(!approved.contains("now the OWNER"), "{approved}");
    // Approved through the running gateway: the message sent while waiting is answered.
    gw.wait(&s, "the waiting message answered", |s| {
        s.texts(79).iter().any(|t| t == "ok: hi there")
    })
    .await;
    // /approve is for owners only: Zed's is refused with the reason (#12.6: in a DM a refusal
    // says why); his plain message is answered.
    s.tg.user_sends(chat.clone(), zed.clone(), "/approve");
    s.tg.user_sends(chat.clone(), zed.clone(), "hello again");
    gw.wait(&s, "the answer", |s| {
        s.texts(79).iter().any(|t| t == "ok: hello again")
    })
    .await;
    s.tg.user_sends(chat, zed, "/status");
    gw.wait(&s, "the /status answer", |s| {
        s.texts(79).iter().any(|t| t.starts_with("Session: "))
    })
    .await;
    gw.stop().await;
    let texts = s.texts(79);
    assert!(
        !texts.iter().any(|t| t.contains("waiting for approval")),
        "a non-owner ran /approve: {texts:#?}"
    );
    assert!(
        texts.contains(&"/approve is for the bot's owners. The operator can make telegram:79 one in [commands] owner_allow_from.".to_string()),
        "{texts:#?}"
    );
    // The prompt, "You're in", the refusal, the answers to "hi there" (sent while waiting)
    // and "hello again", and /status.
    assert_eq!(texts.len(), 6, "{texts:#?}");
    assert!(texts.contains(&"ok: hi there".to_string()), "{texts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_list_is_registered_with_set_my_commands_at_start() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    gw.wait(&s, "setMyCommands", |s| !s.tg.commands().is_empty())
        .await;
    gw.wait(&s, "polling", |s| s.tg.pollers().total >= 1).await;
    gw.stop().await;
    let names: Vec<String> = s.tg.commands().into_iter().map(|c| c.command).collect();
    for name in ["new", "reset", "stop", "status", "queue", "help", "whoami"] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    assert!(
        s.tg.commands().iter().all(|c| !c.description.is_empty()),
        "{:#?}",
        s.tg.commands()
    );
    assert_eq!(s.setup.fake.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_streaming_sends_finished_blocks_as_messages_and_never_edits() {
    let s = TgSetup::new("allow_from = [\"42\"]\nstreaming = \"block\"").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    // 400 deltas of `tick N ` 10 ms apart: about 3,500 chars over 4 s.
    s.tg.user_sends(chat, ann, "slow 10 400");
    gw.wait(&s, "the last tick", |s| {
        s.texts(42).last().is_some_and(|t| t.contains("tick 400"))
    })
    .await;
    gw.stop().await;

    let texts = s.texts(42);
    assert!(texts.len() >= 3, "{texts:#?}");
    assert_eq!(
        s.tg.call_count("editMessageText"),
        0,
        "blocks are never edited"
    );
    // Every block but the last is 800-1200 chars; together they are the answer, in order.
    for block in &texts[..texts.len() - 1] {
        let n = block.chars().count();
        assert!((800..=1200).contains(&n), "a block of {n} chars: {block:?}");
    }
    let joined: Vec<&str> = texts.iter().flat_map(|t| t.split_whitespace()).collect();
    let expected: Vec<String> = (1..=400)
        .flat_map(|i| ["tick".to_owned(), i.to_string()])
        .collect();
    assert_eq!(joined, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_command_is_answered_with_the_closest_one_and_never_reaches_the_model() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    // A loaded skill's name is no unknown command: `/weather` goes to the model.
    let skill = s.setup.path(".chela/skills/weather");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: weather\ndescription: Tells the weather.\n---\n# weather\n",
    )
    .unwrap();
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat.clone(), ann.clone(), "/stpo");
    gw.wait(&s, "the unknown-command answer", |s| {
        s.texts(42).iter().any(|t| t.contains("Unknown command"))
    })
    .await;
    s.tg.user_sends(chat, ann, "/weather in Paris");
    gw.wait(&s, "the skill's answer", |s| s.texts(42).len() >= 2)
        .await;
    gw.stop().await;
    let texts = s.texts(42);
    assert_eq!(
        texts[0], "Unknown command /stpo. Did you mean /stop? (/help lists them)",
        "{texts:#?}"
    );
    assert_eq!(s.asked(), vec!["/weather in Paris".to_string()]);
}
