//! End-to-end: `chela doctor` (issue #12, item 7) checks that the model server serves the
//! configured model, asks Discord who the token belongs to, and starts each configured coding
//! agent (initialize, session/new), showing the end of its stderr when it fails.

use crate::common;

use chela_testkit::FakeDiscord;
use common::{Provider, Setup, acp};

/// Runs `chela doctor` (with `env` added) and returns its stdout.
async fn doctor(setup: &Setup, env: &[(&str, &str)]) -> String {
    let mut cmd = setup.chela(&["doctor"]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = common::run_to_end(cmd).await;
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The line of `report` about `what` (`model`, `discord`, `acp fake`), with what follows it
/// up to the next check.
fn check<'a>(report: &'a str, what: &str) -> &'a str {
    let at = report
        .find(&format!(" {what}: "))
        .unwrap_or_else(|| panic!("no {what} line in\n{report}"));
    let start = report[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = ["\nok   ", "\nFAIL ", "\nwarn "]
        .iter()
        .filter_map(|next| report[at..].find(next))
        .min()
        .map_or(report.len(), |i| at + i);
    &report[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_server_does_not_serve_fails() {
    // The fake lists only `fake-model`; the setup asks for the default gpt-4.1-mini.
    let setup = Setup::openai("steer").await;
    let report = doctor(&setup, &[]).await;
    let line = check(&report, "model");
    assert!(line.starts_with("FAIL model: "), "{report}");
    assert!(
        line.contains("does not serve \"gpt-4.1-mini\"; it lists: fake-model"),
        "{line}"
    );
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "model = \"fake-model\"").await;
    let report = doctor(&setup, &[]).await;
    let line = check(&report, "model");
    assert!(line.starts_with("ok   model: "), "{report}");
    assert!(line.ends_with("reachable, serves it"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_is_asked_who_the_token_belongs_to() {
    let setup = Setup::openai("steer").await;
    let report = doctor(&setup, &[]).await;
    assert!(
        check(&report, "discord").starts_with("ok   discord: no token"),
        "{report}"
    );
    let dc = FakeDiscord::start().await.unwrap();
    let url = dc.rest_url();
    let env = [
        ("DISCORD_BOT_TOKEN", dc.token()),
        ("CHELA_DISCORD_API_URL", url.as_str()),
    ];
    let report = doctor(&setup, &env).await;
    assert_eq!(
        check(&report, "discord"),
        format!("ok   discord: @chela_test (id {})", dc.bot_id()),
        "{report}"
    );
    let env = [
        ("DISCORD_BOT_TOKEN", "not-the-token"),
        ("CHELA_DISCORD_API_URL", url.as_str()),
    ];
    let report = doctor(&setup, &env).await;
    let line = check(&report, "discord");
    assert!(
        line.starts_with("FAIL discord: Discord refused the token"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_configured_agent_is_started_and_a_crash_shows_its_stderr() {
    let setup = Setup::openai("steer").await;
    let files = acp::configure(&setup, "approve-reads", "");
    // An agent that is on PATH but dies at start, as pi-acp on a too old Node.
    let mut text = std::fs::read_to_string(setup.config()).unwrap();
    text.push_str(
        "\n[acp.agents.crashy]\ncommand = [\"sh\", \"-c\", \"echo 'file:///x/pi.js:1' >&2; \
         echo 'SyntaxError: Invalid regular expression flags' >&2; \
         echo 'Node.js v20.19.0' >&2; exit 1\"]\n",
    );
    std::fs::write(setup.config(), text).unwrap();
    let report = doctor(&setup, &[]).await;
    let fake = check(&report, "acp fake");
    assert!(fake.starts_with("ok   acp fake: "), "{report}");
    assert!(
        fake.ends_with("answered initialize and session/new"),
        "{fake}"
    );
    assert_eq!(files.count("initialize"), 1, "{}", files.summary());
    assert_eq!(files.count("session/new"), 1, "{}", files.summary());
    let crashy = check(&report, "acp crashy");
    assert!(crashy.starts_with("FAIL acp crashy: `sh -c "), "{report}");
    assert!(
        crashy.contains("exit 1`: closed its stdout before answering initialize"),
        "{crashy}"
    );
    assert!(crashy.contains("its stderr ends:"), "{crashy}");
    assert!(
        crashy.contains("| SyntaxError: Invalid regular expression flags\n"),
        "{crashy}"
    );
    assert!(
        crashy.trim_end().ends_with("| Node.js v20.19.0"),
        "{crashy}"
    );
}
