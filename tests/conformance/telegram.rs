//! Conformance: the real `chela gateway` against the third-party Telegram Bot API emulator
//! `telegram-test-api` (npm, pinned in tests/conformance/telegram), started by our launcher
//! (tests/conformance/telegram/launcher.js), which puts corrected handlers in front of the
//! emulator's stock routes where it falls short of the Bot API teloxide speaks.
//!
//! A simulated user DMs the bot through the emulator's client API; the fake model streams
//! `tick 1 ... tick 6` slowly, so chela sends a preview and edits it. What the emulator lets
//! us observe: `/getUpdatesHistory` lists each message the bot sent with its latest text (and
//! the `edit_date` the launcher stamps on edits); deleted messages vanish from it. So the
//! launcher also logs every sendMessage / editMessageText / deleteMessage on stderr, which is
//! how this test sees that one preview was sent, then edited (with each edit's text), and
//! none was deleted. Neither shows how the HTML parse mode would render (the emulator stores
//! the raw text), nor rate limits or length limits (it enforces none): chela's own fake
//! (tests/e2e/telegram_smoke.rs, chela_testkit::FakeTelegram) covers those.
//!
//! Needs `node` and `npm ci` in tests/conformance/telegram: `scripts/test.sh` does both.

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// Any token in Bot API shape: the emulator accepts every token.
const TOKEN: &str = "123456789:AAH-chela-conformance-token";
/// The simulated user (and, in a DM, the chat id).
const USER: i64 = 42;

fn emulator_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/telegram")
}

/// The launcher running the emulator, with its stderr (the call log) collected.
struct Emulator {
    _child: Child,
    base: String,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Emulator {
    async fn start() -> Emulator {
        let dir = emulator_dir();
        assert!(
            dir.join("node_modules/telegram-test-api/package.json")
                .exists(),
            "telegram-test-api is not installed in {}/node_modules: run scripts/test.sh (it \
             installs the npm packages)",
            dir.display()
        );
        let mut child = Command::new("node")
            .arg(dir.join("launcher.js"))
            .arg("0")
            .current_dir(&dir)
            // A pipe the launcher watches: it exits when this test process goes away.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run node ({e}): run scripts/test.sh on a machine with node")
            });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(common::WAIT, lines.next_line())
            .await
            .expect("the launcher printed its address in time")
            .expect("read the launcher's stdout");
        let Some(base) = line
            .as_deref()
            .and_then(|l| l.strip_prefix("listening "))
            .map(str::to_string)
        else {
            panic!(
                "the launcher printed {line:?}, not `listening URL`; stderr: {}",
                String::from_utf8_lossy(&stderr.lock().unwrap())
            );
        };
        Emulator {
            _child: child,
            base,
            stderr,
        }
    }

    /// POSTs `body` to the emulator's client API at `path`; the `result` of its answer.
    async fn client(&self, path: &str, body: Value) -> Value {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("POST {path} answered no JSON: {e}"));
        assert_eq!(answer["ok"], true, "POST {path}: {answer}");
        answer["result"].clone()
    }

    /// What the bot sent into `chat` (latest text of each message still there), in order.
    async fn bot_messages(&self, chat: i64) -> Vec<Value> {
        let history = self
            .client("/getUpdatesHistory", json!({ "token": TOKEN }))
            .await;
        history
            .as_array()
            .expect("history is a list")
            .iter()
            // Bot messages are stored as the sendMessage request (`chat_id`); user
            // messages as the Message the simulated user posted (`chat`).
            .filter(|u| u["message"]["chat_id"].as_i64() == Some(chat))
            .map(|u| u["message"].clone())
            .collect()
    }

    /// The launcher's call log (one JSON object per state-changing bot call).
    fn calls(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.stderr.lock().unwrap())
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_gets_one_streamed_reply_through_the_third_party_emulator() {
    let tg = Emulator::start().await;
    let setup = common::Setup::openai("steer").await;
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_url = \"{}\"\ndm_policy = \"open\"\n\
         poll_timeout_s = 1\n",
        tg.base
    ));
    std::fs::write(setup.config(), config).unwrap();
    let gateway = common::Chat::spawn(setup.chela(&["gateway"]));

    // A user DMs the bot: a Message as Telegram would deliver it (the emulator numbers it).
    let user = json!({
        "id": USER, "is_bot": false, "first_name": "Ann", "last_name": "Lee",
        "username": "ann_lee", "language_code": "en",
    });
    let chat = json!({
        "id": USER, "type": "private", "first_name": "Ann", "last_name": "Lee",
        "username": "ann_lee",
    });
    tg.client(
        "/sendMessage",
        json!({
            "botToken": TOKEN, "from": user, "chat": chat, "date": now_s(),
            "text": "slow 300 6",
        }),
    )
    .await;

    let expected = "tick 1 tick 2 tick 3 tick 4 tick 5 tick 6";
    let deadline = Instant::now() + common::WAIT;
    loop {
        let sent = tg.bot_messages(USER).await;
        if sent
            .iter()
            .any(|m| m["text"].as_str().map(str::trim_end) == Some(expected))
        {
            break;
        }
        if Instant::now() > deadline {
            gateway.signal("TERM");
            let done = gateway.finish().await;
            panic!(
                "no bot message reached {expected:?}; sent {sent:?}\nlauncher: {}\n\
                 chela stderr: {}",
                tg.log(),
                done.stderr
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Stop the gateway so nothing more can be sent, then look at everything it did.
    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(done.status.success(), "chela gateway: {}", done.stderr);
    let sent = tg.bot_messages(USER).await;
    let calls = tg.calls();
    let context = format!(
        "sent {sent:#?}\ncalls {calls:#?}\nchela stderr: {}",
        done.stderr
    );

    // Exactly one message in the chat carries the answer, edited into its final text.
    assert_eq!(sent.len(), 1, "{context}");
    let reply = &sent[0];
    assert_eq!(
        reply["text"].as_str().unwrap().trim_end(),
        expected,
        "{context}"
    );
    assert!(
        reply["edit_date"].is_u64(),
        "the reply was never edited: {context}"
    );

    // The call log: one sendMessage with a preview (a proper prefix of the answer), then
    // edits of that very message only, each still a prefix, the last one the whole answer;
    // no deletes.
    let of = |method: &str| -> Vec<&Value> {
        calls
            .iter()
            .filter(|c| c["method"] == method && c["chat_id"] == USER)
            .collect()
    };
    let text = |call: &Value| {
        call["text"]
            .as_str()
            .unwrap_or_default()
            .trim_end()
            .to_string()
    };
    let sends = of("sendMessage");
    assert_eq!(sends.len(), 1, "{context}");
    let preview = text(sends[0]);
    assert!(
        preview.len() < expected.len() && expected.starts_with(&preview),
        "the first message is not a preview: {context}"
    );
    let edits = of("editMessageText");
    assert!(!edits.is_empty(), "{context}");
    for edit in &edits {
        assert_eq!(edit["message_id"], sends[0]["message_id"], "{context}");
        assert!(expected.starts_with(&text(edit)), "{context}");
    }
    assert_eq!(text(edits[edits.len() - 1]), expected, "{context}");
    assert!(of("deleteMessage").is_empty(), "{context}");
}
