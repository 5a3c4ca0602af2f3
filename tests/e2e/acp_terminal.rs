//! End-to-end, coding agents from `chela chat` (the terminal user is an owner): binding the
//! terminal conversation, `/acp agents`, `/acp status`, `/acp steer` (cancel the running turn
//! and send new text), `/session idle`, `/acp close`.

use crate::common;

use common::{Setup, acp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_binds_steers_and_closes_a_coding_agent() {
    let s = Setup::openai("steer").await;
    let files = acp::configure(&s, "approve-reads", "");
    let mut chat = s.chat();
    chat.send("/acp agents").await;
    chat.wait_for("fake (default):").await;
    chat.send("/acp spawn --bind here").await;
    chat.wait_for("is bound here").await;
    chat.send("/acp status").await;
    let status = chat.wait_for("ACP session: ").await;
    assert!(status.contains("Coding agent: fake"), "{status}");

    chat.send("slow 100").await;
    chat.wait_for("chunk 2/100").await;
    chat.send("/acp steer hello again").await;
    chat.wait_for("Steering").await;
    chat.wait_for("echo: hello again").await;
    assert_eq!(files.count("session/cancel"), 1, "{}", files.summary());
    assert!(!chat.output().contains("chunk 100/100"));

    chat.send("/session idle 2h").await;
    chat.wait_for("expires after 2h").await;
    chat.send("/acp close").await;
    chat.wait_for("Closed fake").await;
    chat.send("/acp status").await;
    chat.wait_for("not bound to a coding agent").await;
    // Unbound: the conversation talks to chela's own agent (the fake model) again.
    let before = s.fake.request_count();
    chat.send("back to you").await;
    chat.wait_for("back to you").await;
    assert!(s.fake.request_count() > before);
    assert_eq!(files.count("session/prompt"), 2, "{}", files.summary());
    chat.finish().await;
}
