//! End-to-end: messages arriving while a run streams, in each queue mode, and /stop's effect
//! on queued turns.

use crate::common;

use common::{KEY, Provider, Setup, count, last_user_text, messages, text_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_mode_aborts_the_run_and_answers_the_newest_message() {
    let setup = Setup::openai("interrupt").await;
    let mut chat = setup.chat();
    chat.send("slow 200 100").await;
    chat.wait_for("tick 1 ").await;
    chat.send("second").await;
    chat.wait_for("ok: second\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(!done.stdout.contains("tick 100"), "{:?}", done.stdout);
    assert!(done.stdout.contains("[stopped]"), "{:?}", done.stdout);
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(last_user_text(&calls[1]), "second");

    let entries = setup.export(KEY).await;
    let msgs = messages(&entries);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(msgs[1]["stopReason"], "aborted");
    assert_eq!(text_of(msgs[3]), "ok: second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_drops_queued_turns_before_stopping_the_run() {
    let setup = Setup::openai("followup").await;
    let mut chat = setup.chat();
    chat.send("slow 200 100").await;
    chat.wait_for("tick 1 ").await;
    // Each line is queued before the next is read, so both reach the lane before /stop.
    chat.send("queued one\nqueued two").await;
    chat.send("/stop").await;
    chat.wait_for("Stopped. Dropped 2 queued message(s).").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(!done.stdout.contains("queued one"), "{:?}", done.stdout);
    assert_eq!(setup.fake.request_count(), 1);

    let status = setup.run(&["status"]).await;
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(report.contains("pending turns: 0"), "{report}");
    // A dropped turn is not resumed by the next start either.
    let again = setup.chat().finish().await;
    assert!(again.status.success(), "{}", again.stderr);
    assert_eq!(again.stdout, "");
    assert_eq!(setup.fake.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_nothing_running_says_so() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("/stop").await;
    chat.wait_for("Nothing to stop.\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(setup.fake.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_the_run_cannot_take_becomes_a_followup() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("slow 100 5").await;
    chat.wait_for("tick 1 ").await;
    // The run makes no more model calls, so it cannot take this message.
    chat.send("hi").await;
    chat.wait_for("tick 5").await;
    chat.wait_for("ok: hi\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(count(&done.stdout, "ok: hi"), 1, "{:?}", done.stdout);
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(last_user_text(&calls[1]), "hi");
    let entries = setup.export(KEY).await;
    let texts: Vec<String> = messages(&entries).into_iter().map(text_of).collect();
    assert_eq!(
        texts,
        [
            "slow 100 5",
            "tick 1 tick 2 tick 3 tick 4 tick 5 ",
            "hi",
            "ok: hi"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_mode_batches_what_arrived_during_a_run() {
    let setup = Setup::start(Provider::OpenAi, "collect", 200, "").await;
    let mut chat = setup.chat();
    chat.send("slow 100 10").await;
    chat.wait_for("tick 1 ").await;
    chat.send("red\ngreen\nblue").await;
    chat.wait_for("tick 10").await;
    chat.wait_for("ok: [Queued messages while agent was busy]")
        .await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let text = last_user_text(&calls[1]);
    assert!(
        text.starts_with("[Queued messages while agent was busy]"),
        "{text}"
    );
    let (r, g, b) = (
        text.find("red").unwrap(),
        text.find("green").unwrap(),
        text.find("blue").unwrap(),
    );
    assert!(r < g && g < b, "{text}");
    assert!(text.contains("#3"), "{text}");
    assert_eq!(count(&done.stdout, "ok: "), 1, "{:?}", done.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_message_sent_again_after_stop_is_a_new_turn() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("slow 150 8").await;
    chat.wait_for("tick 1 ").await;
    chat.send("/stop").await;
    chat.wait_for("Stopped.").await;
    // The user tries again with the very same words.
    chat.send("slow 150 8").await;
    chat.wait_for("tick 8").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);

    let entries = setup.export(KEY).await;
    let roles: Vec<&str> = messages(&entries)
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "{entries:#?}"
    );
    // The second model call ends with the user's new message, not the stopped partial.
    let calls = setup.model_calls();
    let last = calls[1]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user", "{:#?}", calls[1]["messages"]);
}
