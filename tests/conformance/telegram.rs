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
//! Button presses: an exec approval comes with an inline keyboard; the simulated user presses
//! "Allow once" through the emulator's client API (`POST /sendCallback`), the command runs,
//! the bot answers the press (`answerCallbackQuery`) and edits the question to its outcome
//! without the keyboard. The emulator keeps callback queries but not their answers, and
//! serves a callback_query without the `chat_instance` the Bot API requires: the launcher
//! fills both gaps (see launcher.js).
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

    /// What the bot sent into `chat` (latest text of each message still there), in order,
    /// each with the `message_id` the emulator gave it.
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
            .map(|u| {
                let mut message = u["message"].clone();
                message["message_id"] = u["messageId"].clone();
                message
            })
            .collect()
    }

    /// The launcher's call log (one JSON object per state-changing bot call).
    fn calls(&self) -> Vec<Value> {
        String::from_utf8_lossy(&self.stderr.lock().unwrap())
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    /// The bot's answers to button presses (answerCallbackQuery calls), in order.
    fn press_answers(&self) -> Vec<Value> {
        let calls = self.calls();
        calls
            .into_iter()
            .filter(|c| c["method"] == "answerCallbackQuery")
            .collect()
    }

    fn log(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

/// The simulated user, as a Bot API User.
fn ann() -> Value {
    json!({
        "id": USER, "is_bot": false, "first_name": "Ann", "last_name": "Lee",
        "username": "ann_lee", "language_code": "en",
    })
}

/// The simulated user's private chat with the bot, as a Bot API Chat.
fn ann_chat() -> Value {
    json!({
        "id": USER, "type": "private", "first_name": "Ann", "last_name": "Lee",
        "username": "ann_lee",
    })
}

impl Emulator {
    /// The simulated user writes `text` to the bot in a DM (the emulator numbers it).
    async fn user_says(&self, text: &str) {
        let message = json!({
            "botToken": TOKEN, "from": ann(), "chat": ann_chat(), "date": now_s(), "text": text,
        });
        self.client("/sendMessage", message).await;
    }

    /// The simulated user presses the button carrying `data` under bot message `message_id`.
    async fn user_presses(&self, message_id: i64, data: &str) {
        let press = json!({
            "botToken": TOKEN, "from": ann(), "date": now_s(), "data": data,
            "message": { "message_id": message_id, "chat": ann_chat() },
        });
        self.client("/sendCallback", press).await;
    }

    /// Polls the bot's messages in `chat` until `done` holds for them; panics after WAIT.
    async fn wait_sent(
        &self,
        chat: i64,
        what: &str,
        gateway: &common::Chat,
        done: impl Fn(&[Value]) -> bool,
    ) {
        let deadline = Instant::now() + common::WAIT;
        loop {
            let sent = self.bot_messages(chat).await;
            if done(&sent) {
                return;
            }
            if Instant::now() > deadline {
                gateway.signal("TERM");
                panic!(
                    "waited in vain for {what}; sent {sent:#?}\nlauncher: {}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Appends the Telegram channel, pointed at `tg`, and `tables` to the setup's config.
fn configure(setup: &common::Setup, tg: &Emulator, tables: &str) {
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[channels.telegram]\ntoken = \"{TOKEN}\"\napi_url = \"{}\"\ndm_policy = \"open\"\n\
         poll_timeout_s = 1\n{tables}",
        tg.base
    ));
    std::fs::write(setup.config(), config).unwrap();
}

/// The labels and callback data of a message's inline keyboard, row after row.
fn keyboard(message: &Value) -> Vec<(String, String)> {
    let rows = message["reply_markup"]["inline_keyboard"].as_array();
    rows.into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .map(|b| {
            let field = |k: &str| b[k].as_str().unwrap_or_default().to_string();
            (field("text"), field("callback_data"))
        })
        .collect()
}

/// The bot's message that asks for an exec approval, among `sent`.
fn question(sent: &[Value]) -> Option<&Value> {
    sent.iter().find(|m| {
        m["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("🔐 Approval needed"))
    })
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
    configure(&setup, &tg, "");
    let gateway = common::Chat::spawn(setup.chela(&["gateway"]));

    // A user DMs the bot: a Message as Telegram would deliver it (the emulator numbers it).
    tg.user_says("slow 300 6").await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_press_on_an_inline_keyboard_answers_an_exec_approval_through_the_emulator() {
    let tg = Emulator::start().await;
    let setup = common::Setup::openai("steer").await;
    let tables = format!(
        "[tools]\nexec_approvals = \"ask\"\napproval_timeout_s = 120\n\
         [commands]\nowner_allow_from = [\"telegram:{USER}\"]\n"
    );
    configure(&setup, &tg, &tables);
    let gateway = common::Chat::spawn(setup.chela(&["gateway"]));

    // Ann asks for a command; exec waits for an owner's answer, asked with three buttons.
    tg.user_says(r#"tool exec {"command": "touch pressed.txt"}"#)
        .await;
    tg.wait_sent(USER, "the question with buttons", &gateway, |sent| {
        question(sent).is_some_and(|q| keyboard(q).len() == 3)
    })
    .await;
    let asked = question(&tg.bot_messages(USER).await).unwrap().clone();
    let buttons = keyboard(&asked);
    let labels: Vec<&str> = buttons.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["Allow once", "Always", "Deny"], "{asked}");
    assert!(
        !setup.path("ws/pressed.txt").exists(),
        "ran before approval"
    );

    // Ann presses "Allow once": the command runs, the run answers, the question says so.
    let message_id = asked["message_id"].as_i64().unwrap();
    tg.user_presses(message_id, &buttons[0].1).await;
    tg.wait_sent(
        USER,
        "the run's answer and the ended question",
        &gateway,
        |sent| {
            let done = sent
                .iter()
                .any(|m| m["text"].as_str().is_some_and(|t| t.starts_with("done:")));
            done && question(sent).is_some_and(|q| keyboard(q).is_empty())
        },
    )
    .await;
    assert!(setup.path("ws/pressed.txt").exists());

    // A late press on the buttons a client still shows (Deny) changes nothing.
    tg.user_presses(message_id, &buttons[2].1).await;
    tg.wait_sent(USER, "the late press answered", &gateway, |_| {
        tg.press_answers().len() == 2
    })
    .await;

    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(done.status.success(), "chela gateway: {}", done.stderr);
    let sent = tg.bot_messages(USER).await;
    let calls = tg.calls();
    let context = format!(
        "sent {sent:#?}\ncalls {calls:#?}\nchela stderr: {}",
        done.stderr
    );
    assert_pressed_once(&tg, &sent, message_id, &context);
}

/// What the emulator and the launcher's log show once Ann allowed the question
/// `message_id` once and then pressed Deny too late.
fn assert_pressed_once(tg: &Emulator, sent: &[Value], message_id: i64, context: &str) {
    let calls = tg.calls();
    let answers = tg.press_answers();
    let texts: Vec<&str> = answers.iter().filter_map(|c| c["text"].as_str()).collect();
    assert_eq!(
        texts,
        [
            "Allowed once.",
            "Already ended: ✅ allowed once by Ann Lee."
        ],
        "{context}"
    );
    // Each press answered with the id the emulator gave it, privately (no alert).
    let ids: Vec<&str> = answers
        .iter()
        .filter_map(|c| c["callback_query_id"].as_str())
        .collect();
    assert_eq!(ids, ["1", "2"], "{context}");
    assert!(
        answers.iter().all(|c| c["show_alert"] == false),
        "{context}"
    );

    // The question was sent with the keyboard and edited once: to its outcome, keyboard gone.
    let of_question = |method: &str| -> Vec<&Value> {
        calls
            .iter()
            .filter(|c| c["method"] == method && c["message_id"] == message_id)
            .collect()
    };
    let sends = of_question("sendMessage");
    assert_eq!(sends.len(), 1, "{context}");
    assert_eq!(
        sends[0]["inline_keyboard"][0].as_array().map(Vec::len),
        Some(3),
        "{context}"
    );
    let edits = of_question("editMessageText");
    assert_eq!(edits.len(), 1, "{context}");
    assert!(edits[0]["inline_keyboard"].is_null(), "{context}");
    let ended = question(sent).expect("the question is still there");
    assert!(
        ended["text"]
            .as_str()
            .is_some_and(|t| t.trim_end().ends_with("✅ allowed once by Ann Lee.")),
        "{context}"
    );
    assert!(keyboard(ended).is_empty(), "{context}");

    // The command ran once: one answer of the run.
    let runs = sent
        .iter()
        .filter(|m| m["text"].as_str().is_some_and(|t| t.starts_with("done:")));
    assert_eq!(runs.count(), 1, "{context}");
    assert!(
        calls.iter().all(|c| c["method"] != "deleteMessage"),
        "{context}"
    );
}
