//! End-to-end fallbacks, key rotation and per-agent models (docs/models.md), through `chela
//! chat` over two fake model servers: `openai` (chat completions, server A) and `backup`
//! (Anthropic Messages, server B). Each way a model call can fail that another model could
//! fix sends the turn to the fallback, before any text was shown; `/status` says which model
//! answered and why the other was skipped; the failed model then rests.

use crate::common;

use chela_testkit::{FakeModel, Outage};
use common::{Provider, Setup};

/// The backup model's name on server B.
const BACKUP: &str = "backup-model";

/// A config: `[model]` on `base` (kind `openai`) with `model_lines`, the `backup` provider
/// on server B, and `tables` after.
fn config(setup: &Setup, b: &FakeModel, base: &str, model_lines: &str, tables: &str) {
    let text = format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"{base}\"\napi_key = \"test\"\n\
         model = \"fake-model\"\nmax_retries = 1\nidle_timeout_s = 1\n{model_lines}\n\
         [providers.backup]\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key = \"b-key\"\n\
         [store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\nshutdown_grace_s = 0\n{tables}",
        b.base_url()
    );
    std::fs::write(setup.config(), text).unwrap();
}

/// The model names of the calls server `fake` answered or refused, in order.
fn models(fake: &FakeModel) -> Vec<String> {
    fake.requests()
        .iter()
        .filter(|r| r.path.ends_with("/completions") || r.path.ends_with("/messages"))
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `provider/model` of each answer in session `key`'s transcript, in order.
async fn answered_by(setup: &Setup, key: &str) -> Vec<String> {
    let entries = setup.export(key).await;
    common::messages(&entries)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| {
            format!(
                "{}/{}",
                m["provider"].as_str().unwrap(),
                m["model"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fixable_failure_falls_back_and_status_says_why() {
    let cases = [
        (Some(Outage::Status(503)), "overloaded (503)", 2),
        (Some(Outage::Status(529)), "overloaded (529)", 2),
        (Some(Outage::Status(500)), "server error (500)", 2),
        (Some(Outage::Status(429)), "rate limited (429)", 2),
        (Some(Outage::Status(401)), "key refused (401)", 1),
        (Some(Outage::Silent), "timed out", 1),
        (None, "unreachable", 0),
    ];
    for (outage, why, calls) in cases {
        let setup = Setup::start(Provider::OpenAi, "steer", 200, "").await;
        let b = FakeModel::start().await.unwrap();
        let base = match outage {
            Some(outage) => {
                setup.fake.set_outage(Some(outage));
                setup.fake.openai_base_url()
            }
            // Nothing listens on port 9 (discard) here: the connection is refused.
            None => "http://127.0.0.1:9/v1".to_owned(),
        };
        let fallbacks = format!("fallbacks = [\"backup/{BACKUP}\"]");
        config(&setup, &b, &base, &fallbacks, "");
        let mut chat = setup.chat();
        chat.send("hello there").await;
        chat.wait_for("ok: hello there").await;
        chat.send("/status").await;
        chat.wait_for("skipped openai/fake-model").await;
        chat.wait_for("\n").await;
        let output = chat.output();
        let status = &output[output.rfind("Session: ").unwrap()..];
        assert!(
            status.contains("Fallbacks: backup/backup-model"),
            "{why}: {status}"
        );
        assert!(
            status.contains(&format!(
                "backup/{BACKUP} answered; skipped openai/fake-model: {why}"
            )),
            "{why}: {status}"
        );
        // The failed model rests: the next turn goes straight to the fallback.
        assert!(status.contains("rests"), "{why}: {status}");
        chat.send("again").await;
        chat.wait_for("ok: again").await;
        let done = chat.finish().await;
        assert!(done.status.success(), "{why}: {}", done.stderr);
        assert_eq!(
            models(&setup.fake).len(),
            calls,
            "{why}: A's calls (1 + the retry)"
        );
        assert_eq!(models(&b), [BACKUP, BACKUP], "{why}");
        // The transcript names the model that answered.
        let answered = answered_by(&setup, common::KEY).await;
        assert_eq!(
            answered,
            ["backup/backup-model", "backup/backup-model"],
            "{why}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_on_429_and_401_without_a_fallback() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "").await;
    let b = FakeModel::start().await.unwrap();
    let a = setup.fake.openai_base_url();
    // Key k1 is rate limited, "bad" is refused: k2 answers.
    setup.fake.accept_keys(&["k1", "k2"]);
    setup.fake.limit_keys(&["k1"]);
    let text = format!(
        "[model]\nmodel = \"pool/fake-model\"\nfallbacks = [\"backup/{BACKUP}\"]\nmax_retries = 0\n\
         [providers.pool]\nkind = \"openai\"\nbase_url = \"{a}\"\napi_keys = [\"k1\", \"bad\", \"k2\"]\n\
         [providers.backup]\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
         [store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\nshutdown_grace_s = 0\n",
        b.base_url()
    );
    std::fs::write(setup.config(), text).unwrap();
    let mut chat = setup.chat();
    chat.send("first").await;
    chat.wait_for("ok: first").await;
    chat.send("second").await;
    chat.wait_for("ok: second").await;
    chat.send("/status").await;
    chat.wait_for("Model: pool/fake-model").await;
    chat.wait_for("pool key 2 rests").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let keys: Vec<String> = setup
        .fake
        .requests()
        .iter()
        .map(|r| r.key.clone().unwrap_or_default())
        .collect();
    // First turn: k1 (429), bad (401), k2 answers; the second goes to k2 at once.
    assert_eq!(keys, ["k1", "bad", "k2", "k2"]);
    assert!(b.requests().is_empty(), "no fallback while a key answers");
    assert!(done.stdout.contains("pool key 1 rests"), "{}", done.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_have_their_own_models_and_fallbacks_and_sessions_switch_provider() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "").await;
    let b = FakeModel::start().await.unwrap();
    // The terminal goes to agent `coder`, on the backup provider, falling back to A.
    let tables = "[[agents]]\nid = \"coder\"\nmodel = \"backup/coder-model\"\n\
                  fallbacks = [\"openai/fake-model\"]\nworkspace = \"ws-coder\"\n\
                  [[bindings]]\nagent = \"coder\"\nchannel = \"terminal\"\n";
    config(&setup, &b, &setup.fake.openai_base_url(), "", tables);
    let mut chat = setup.chat();
    chat.send("one").await;
    chat.wait_for("ok: one").await;
    b.set_outage(Some(Outage::Status(529)));
    chat.send("two").await;
    chat.wait_for("ok: two").await;
    b.set_outage(None);
    // A session switches to another provider's model by name.
    chat.send("/model openai/other-model").await;
    chat.wait_for("Model: openai/other-model (this conversation's; default backup/coder-model)")
        .await;
    chat.send("three").await;
    chat.wait_for("ok: three").await;
    chat.send("/model nowhere/x").await;
    chat.wait_for("Model: backup/nowhere/x").await;
    chat.send("/model anthropic/claude-x").await;
    chat.wait_for("Cannot switch to anthropic/claude-x: the provider anthropic is not set up")
        .await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    // "two": the overloaded call and its retry, then A.
    assert_eq!(models(&b), ["coder-model", "coder-model", "coder-model"]);
    assert_eq!(models(&setup.fake), ["fake-model", "other-model"]);
    // The second turn's answer came from A, named so in the transcript.
    let key = "agent:coder:terminal:direct:tester";
    let answered = answered_by(&setup, key).await;
    assert_eq!(
        answered,
        [
            "backup/coder-model",
            "openai/fake-model",
            "openai/other-model"
        ]
    );
}
