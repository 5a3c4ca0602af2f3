//! End-to-end tool policy and exec approvals through the binary: a Telegram group gets no
//! tools by default while a group with its own profile may run `exec`; in `ask` mode each
//! command waits for `/approve <id> allow-once|allow-always|deny`, and no answer denies.

use crate::common;

use chela_testkit::{ChatSpec, UserSpec};
use common::telegram::{TgConfig, TgSetup, at_bot};
use common::{Chat, Setup, count};

const PLAIN_GROUP: i64 = -4001;
const CODING_GROUP: i64 = -4002;

/// The tool names a model request offered.
fn offered(body: &serde_json::Value) -> Vec<String> {
    body.get("tools")
        .and_then(|t| t.as_array())
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_get_no_tools_by_default_and_a_group_override_gives_them() {
    let tables = format!("[tools.groups.\"telegram:{CODING_GROUP}\"]\nprofile = \"coding\"\n");
    let s = TgSetup::with(TgConfig {
        telegram: "group_policy = \"open\"",
        tables: &tables,
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let ann = UserSpec::new(7, "Ann");
    let exec = |file: &str| format!("{} tool exec {{\"command\": \"touch {file}\"}}", at_bot());
    s.tg.user_sends(
        ChatSpec::group(PLAIN_GROUP, "Team"),
        ann.clone(),
        &exec("plain.txt"),
    );
    gw.wait(&s, "the plain group's answer", |s| {
        s.texts(PLAIN_GROUP).iter().any(|t| t.starts_with("done:"))
    })
    .await;
    s.tg.user_sends(
        ChatSpec::group(CODING_GROUP, "Dev"),
        ann,
        &exec("coding.txt"),
    );
    gw.wait(&s, "the coding group's answer", |s| {
        s.texts(CODING_GROUP).iter().any(|t| t.starts_with("done:"))
    })
    .await;
    gw.stop().await;

    let plain = s.texts(PLAIN_GROUP).join("\n");
    assert!(
        plain.contains("not allowed in this conversation"),
        "{plain}"
    );
    assert!(!s.setup.path("ws/plain.txt").exists());
    assert!(s.setup.path("ws/coding.txt").exists());
    let calls = s.setup.model_calls();
    // Each group: a call with the directive, then one with the tool result.
    assert_eq!(calls.len(), 4, "{calls:#?}");
    assert!(offered(&calls[0]).is_empty(), "{:?}", offered(&calls[0]));
    let coding = offered(&calls[2]);
    assert!(coding.contains(&"exec".to_owned()), "{coding:?}");
    assert!(!coding.contains(&"message".to_owned()), "{coding:?}");
}

/// Sends a tool directive running `command` and returns the approval id chela asks for.
async fn ask_for(chat: &mut Chat, command: &str) -> String {
    chat.send(&format!("tool exec {{\"command\": \"{command}\"}}"))
        .await;
    chat.wait_for(&format!("Approval needed to run:\n{command}\n"))
        .await;
    let line = chat.wait_for(" allow-once").await;
    let id = line.rsplit("/approve ").next().unwrap();
    id.trim_end_matches(" allow-once").to_owned()
}

async fn approvals_setup(timeout_s: u64) -> Setup {
    let setup = Setup::openai("steer").await;
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[tools]\nexec_approvals = \"ask\"\napproval_timeout_s = {timeout_s}\n"
    ));
    std::fs::write(setup.config(), config).unwrap();
    setup
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_waits_for_approval_and_allow_always_is_remembered() {
    let setup = approvals_setup(120).await;
    let mut chat = setup.chat();

    let id = ask_for(&mut chat, "touch once.txt").await;
    assert!(!setup.path("ws/once.txt").exists(), "ran before approval");
    chat.send(&format!("/approve {id} allow-once")).await;
    chat.wait_for("Allowed once: touch once.txt").await;
    chat.wait_for("done:").await;
    assert!(setup.path("ws/once.txt").exists());

    let id = ask_for(&mut chat, "touch denied.txt").await;
    chat.send(&format!("/approve {id} deny")).await;
    chat.wait_for("done: The owner denied running this command.")
        .await;
    assert!(!setup.path("ws/denied.txt").exists());
    // An answered approval cannot be answered again.
    chat.send(&format!("/approve {id} allow-once")).await;
    chat.wait_for(&format!("No approval {id} is waiting")).await;

    let id = ask_for(&mut chat, "echo always").await;
    chat.send(&format!("/approve {id} allow-always")).await;
    chat.wait_for("done: always").await;
    // The same command again runs without asking.
    chat.send("tool exec {\"command\": \"echo always\"}").await;
    let second = chat.wait_for("done: always").await;
    assert!(!second.contains("Approval needed"), "{second}");
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(count(&done.stdout, "Approval needed"), 3, "{}", done.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_denies_and_the_session_goes_on() {
    let setup = approvals_setup(1).await;
    let mut chat = setup.chat();
    ask_for(&mut chat, "touch late.txt").await;
    chat.wait_for("in time: denied.").await;
    chat.wait_for("done: No approval in time: the command was not run.")
        .await;
    chat.send("hello").await;
    chat.wait_for("ok: hello").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(!setup.path("ws/late.txt").exists());
}
