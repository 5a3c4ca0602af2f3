//! End-to-end, a coding agent's session moves with its chat to another node: two `chela
//! gateway` processes on one PostgreSQL (`[cluster] enabled`, Telegram long polling), a DM
//! bound to the scripted `fake-acp-agent` on the first node, then the first node killed with
//! kill -9: the next message in the DM is answered by the second node, which resumes the same
//! agent session with `session/load` (the agent's state folder is shared, as a shared
//! workspace would be between machines). Needs `CHELA_TEST_PG_URL` (scripts/test.sh).

use crate::common;

use std::time::Duration;

use chela_testkit::{ChatSpec, UserSpec};
use common::acp;
use common::cluster::{query, schema_of, start_node};
use common::pg::fresh_store_url;
use common::telegram::{TgConfig, TgSetup};

/// The owner, in her DM with the bot.
const ANN: i64 = 7;
/// Longest wait for one answer (a failover takes about `lease_s`).
const WAIT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_dm_resumes_its_agent_session_on_the_node_that_takes_over() {
    let url = fresh_store_url().await;
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        tables: &format!(
            "[commands]\nowner_allow_from = [\"telegram:{ANN}\"]\n\n\
             [cluster]\nenabled = true\nlease_s = 3\n"
        ),
        ..TgConfig::default()
    })
    .await;
    let files = acp::configure(&s.setup, "approve-reads", "");
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let log = "warn,chela::gateway=info,chela::intake=info,chela::cluster=info,chela::acp=info";
    let start = |i: usize| start_node(&s.setup, &base, &url, i, log);
    let say = |text: &str| {
        s.tg.user_sends(ChatSpec::private(ANN), UserSpec::new(ANN, "Ann"), text);
    };
    let wait_text = |want: &'static str| {
        s.tg.wait_for(
            move |tg| {
                tg.sent(ANN)
                    .iter()
                    .any(|m| !m.deleted && m.text.contains(want))
            },
            WAIT,
        )
    };

    // The first node alone holds every session: the DM is bound and talks to the agent there.
    let first = start(0);
    say("/acp spawn fake");
    assert!(wait_text("is bound here").await, "{:?}", s.texts(ANN));
    say("hello one");
    assert!(wait_text("echo: hello one").await, "{:?}", s.texts(ANN));
    let session = files.session_ids("session/prompt");
    assert_eq!(session.len(), 1, "{}", files.summary());

    // A second node joins, then the first dies: the second holds everything now.
    let second = start(1);
    let schema = schema_of(&url);
    let joined = format!("SELECT id FROM {schema}.nodes WHERE id = 'node1'");
    let deadline = tokio::time::Instant::now() + WAIT;
    while query(&joined).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second node never joined"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.kill().await;
    say("hello two");
    let answered = wait_text("echo: hello two").await;
    // A second answer would be out once the node stopped.
    second.signal("TERM");
    let stderr = second.finish().await.stderr;
    assert!(answered, "{:?}\n{stderr}", s.texts(ANN));

    // Resumed, not replaced: one session/new in all, and the second node's agent loaded the
    // first one's session and prompted it.
    assert_eq!(files.count("session/new"), 1, "{}", files.summary());
    assert_eq!(
        files.session_ids("session/load"),
        session,
        "{}",
        files.summary()
    );
    let prompts = files.session_ids("session/prompt");
    assert_eq!(prompts, [session[0].clone(), session[0].clone()]);
    let echoes: Vec<String> = s
        .texts(ANN)
        .into_iter()
        .filter(|t| t.starts_with("echo:"))
        .collect();
    assert_eq!(echoes, ["echo: hello one", "echo: hello two"]);
    assert!(s.asked().is_empty(), "model asked: {:#?}", s.asked());
}
