//! Conformance: the real `chela gateway` against the third-party Discord emulator
//! `discord-digital-twin` (npm, pinned in tests/conformance/discord), started by our launcher
//! (tests/conformance/discord/launcher.mjs), which fills a few gaps of the emulator (loopback
//! only, REST token check, `mentions` in MESSAGE_CREATE, a user opening a thread) and lets this
//! test drive the emulator's actor API with JSON lines on its stdin/stdout.
//!
//! chela speaks to it through serenity exactly as to Discord, except for the two URLs:
//! `api_url` (serenity's proxy; requests go to `{api_url}/api/v10/...`) and `gateway_url`
//! (the emulator has no `GET /api/v10/gateway`, so serenity is told where to connect; its
//! builder still asks first and logs a harmless WARN when that fails).
//!
//! The cases: (a) a mention in a guild text channel gets one streamed reply there: a preview,
//! then edits of that same message up to the whole answer; (b) a mention inside a thread the
//! user opened is answered in that thread, never in the parent, in a session of its own: for
//! a thread opened while chela was connected (it saw THREAD_CREATE) and one opened before
//! (it has to ask `GET /channels/{id}` where the channel sits).
//!
//! (c) an exec approval asked in the channel (where `group_profile = "coding"` gives exec)
//! comes with Allow once / Always / Deny buttons; the user presses one (the emulator's own
//! INTERACTION_CREATE, type 3), chela acknowledges it with a deferred ephemeral response,
//! then answers privately by editing that response; the command runs and the question is
//! edited to its outcome without buttons; a late press is told the question ended.
//!
//! What the emulator lets us observe: every message of a channel or thread with its latest
//! text and `edited_timestamp`; and, through the launcher's log on stderr, every
//! MESSAGE_CREATE / MESSAGE_UPDATE / MESSAGE_DELETE / THREAD_CREATE it dispatched, with the text
//! at that moment (and its buttons); and each interaction's response record (acknowledged,
//! callback type, data, the message its answer became). One gap left unfilled: the emulator
//! turns the edit of a deferred *ephemeral* response into an ordinary channel message (flags
//! 0, dispatched as MESSAGE_UPDATE), so the private answers show up among the channel's
//! messages. Not observable here: rate limits and 429s, the 2000-char limit, nonce
//! de-duplication (the emulator enforces none of them) and how Discord renders markdown;
//! chela's unit tests and own fakes cover those.
//!
//! Needs `node` and `npm ci` in tests/conformance/discord: `scripts/test.sh` does both.

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

/// The bot token the emulator expects (on the gateway and, through the launcher, on REST).
const TOKEN: &str = "chela-conformance-token";

fn emulator_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/discord")
}

/// Collects everything `from` writes into a shared buffer.
fn collect(mut from: impl AsyncRead + Unpin + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let sink = Arc::new(Mutex::new(Vec::new()));
    let to = sink.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            to.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    sink
}

fn text(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// The launcher running the emulator: its control channel and its event log.
struct Emulator {
    _child: Child,
    control: ChildStdin,
    answers: Lines<BufReader<ChildStdout>>,
    /// REST base for `api_url`.
    rest: String,
    /// Gateway URL for `gateway_url`.
    gateway: String,
    log: Arc<Mutex<Vec<u8>>>,
    /// The seeded guild text channel, human user and bot.
    channel: String,
    user: String,
    bot: String,
}

impl Emulator {
    async fn start() -> Emulator {
        let dir = emulator_dir();
        assert!(
            dir.join("node_modules/discord-digital-twin/package.json")
                .exists(),
            "discord-digital-twin is not installed in {}/node_modules: run scripts/test.sh (it \
             installs the npm packages)",
            dir.display()
        );
        let mut child = Command::new("node")
            .arg(dir.join("launcher.mjs"))
            .arg(TOKEN)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run node ({e}): run scripts/test.sh on a machine with node")
            });
        let log = collect(child.stderr.take().unwrap());
        let control = child.stdin.take().unwrap();
        let mut answers = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(common::WAIT, answers.next_line())
            .await
            .expect("the launcher printed its addresses in time")
            .expect("read the launcher's stdout");
        let urls: Vec<String> = line
            .as_deref()
            .and_then(|l| l.strip_prefix("listening "))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let [rest, gateway] = <[String; 2]>::try_from(urls).unwrap_or_else(|_| {
            panic!(
                "the launcher printed {line:?}, not `listening REST-URL GATEWAY-URL`; stderr: {}",
                text(&log)
            )
        });
        let mut emulator = Emulator {
            _child: child,
            control,
            answers,
            rest,
            gateway,
            log,
            channel: String::new(),
            user: String::new(),
            bot: String::new(),
        };
        let info = emulator.cmd(json!({ "cmd": "info" })).await;
        emulator.channel = info["channel"].as_str().unwrap().to_string();
        emulator.user = info["user"].as_str().unwrap().to_string();
        emulator.bot = info["bot"].as_str().unwrap().to_string();
        emulator
    }

    /// Sends one control command; its (successful) answer.
    async fn cmd(&mut self, command: Value) -> Value {
        let line = format!("{command}\n");
        self.control.write_all(line.as_bytes()).await.unwrap();
        self.control.flush().await.unwrap();
        let answer = tokio::time::timeout(common::WAIT, self.answers.next_line())
            .await
            .unwrap_or_else(|_| panic!("no answer to {command} in time; log: {}", self.log()))
            .expect("read the launcher's stdout")
            .unwrap_or_else(|| panic!("the launcher exited; log: {}", self.log()));
        let answer: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("the launcher answered {answer:?} ({e})"));
        assert_eq!(answer["ok"], true, "{command} -> {answer}");
        answer
    }

    /// The simulated user writes `content` into `channel` (a channel or a thread).
    async fn user_says(&mut self, channel: &str, content: &str) -> Value {
        let cmd = json!({ "cmd": "user_message", "channel": channel, "content": content });
        self.cmd(cmd).await["message"].clone()
    }

    /// The user writes a message into `channel` and opens a public thread from it; the thread.
    async fn open_thread(&mut self, channel: &str, name: &str) -> Value {
        let starter = self
            .user_says(channel, &format!("shall we talk about {name}?"))
            .await;
        let cmd = json!({
            "cmd": "create_thread", "channel": channel, "message": starter["id"], "name": name,
        });
        self.cmd(cmd).await["thread"].clone()
    }

    /// Every message in `channel`, oldest first, with its latest text.
    async fn messages(&mut self, channel: &str) -> Vec<Value> {
        let answer = self
            .cmd(json!({ "cmd": "messages", "channel": channel }))
            .await;
        answer["messages"].as_array().unwrap().clone()
    }

    /// The bot's messages in `channel`.
    async fn bot_messages(&mut self, channel: &str) -> Vec<Value> {
        let bot = self.bot.clone();
        self.messages(channel)
            .await
            .into_iter()
            .filter(|m| m["author"]["id"] == bot.as_str())
            .collect()
    }

    /// Waits until a bot message in `channel` reads `expected` (trailing blanks aside).
    async fn wait_bot_text(&mut self, channel: &str, expected: &str, chela: &Chela) {
        let deadline = Instant::now() + common::WAIT;
        loop {
            let sent = self.bot_messages(channel).await;
            if sent
                .iter()
                .any(|m| m["content"].as_str().map(str::trim_end) == Some(expected))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no bot message in {channel} reads {expected:?}; bot messages {sent:#?}\n\
                 launcher log: {}\nchela stderr: {}",
                self.log(),
                chela.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls the messages of `channel` until `done` holds for them; those messages.
    async fn wait_messages(
        &mut self,
        channel: &str,
        what: &str,
        chela: &Chela,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + common::WAIT;
        loop {
            let messages = self.messages(channel).await;
            if done(&messages) {
                return messages;
            }
            assert!(
                Instant::now() < deadline,
                "waited in vain for {what} in {channel}; messages {messages:#?}\n\
                 launcher log: {}\nchela stderr: {}",
                self.log(),
                chela.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The user presses the button `custom_id` under `message` in `channel`; the
    /// interaction's id.
    async fn press(&mut self, channel: &str, message: &Value, custom_id: &str) -> String {
        let cmd = json!({
            "cmd": "press", "channel": channel, "message": message["id"], "custom_id": custom_id,
        });
        let answer = self.cmd(cmd).await;
        answer["interaction"]["id"].as_str().unwrap().to_string()
    }

    /// The emulator's record of the bot's response to interaction `id`.
    async fn interaction(&mut self, id: &str) -> Value {
        let answer = self.cmd(json!({ "cmd": "interaction", "id": id })).await;
        answer["interaction"].clone()
    }

    /// Waits until interaction `id`, a press under `asked` in `channel`, was answered (its
    /// deferred response edited into a message of its own); its response record and that
    /// answer's text.
    async fn wait_answer(
        &mut self,
        channel: &str,
        asked: &Value,
        id: &str,
        chela: &Chela,
    ) -> (Value, String) {
        let deadline = Instant::now() + common::WAIT;
        loop {
            let record = self.interaction(id).await;
            // Until answered, the record names the pressed message (or none).
            let answered = record["acknowledged"] == true && record["messageId"] != asked["id"];
            if let Some(answer) = record["messageId"].as_str().filter(|_| answered) {
                let messages = self.messages(channel).await;
                if let Some(m) = messages.iter().find(|m| m["id"] == answer) {
                    return (record.clone(), content(m));
                }
            }
            assert!(
                Instant::now() < deadline,
                "interaction {id} was never answered: {record:#}\nlauncher log: {}\n\
                 chela stderr: {}",
                self.log(),
                chela.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The launcher's event log: one JSON object per dispatched event it logs.
    fn events(&self) -> Vec<Value> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    fn log(&self) -> String {
        text(&self.log)
    }
}

/// `chela gateway` with the Discord channel pointed at the emulator.
struct Chela {
    child: Child,
    _stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Chela {
    /// Starts the gateway and waits until its Discord handler has seen READY.
    async fn start(setup: &common::Setup, dc: &Emulator) -> Chela {
        Chela::start_with(setup, dc, "").await
    }

    /// [`Chela::start`] with `tables` appended to the config.
    async fn start_with(setup: &common::Setup, dc: &Emulator, tables: &str) -> Chela {
        let mut config = std::fs::read_to_string(setup.config()).unwrap();
        config.push_str(&format!(
            "[channels.discord]\ntoken = \"{TOKEN}\"\napi_url = \"{}\"\ngateway_url = \"{}\"\n\
             dm_policy = \"open\"\ngroup_policy = \"open\"\nrequire_mention = true\n{tables}",
            dc.rest, dc.gateway
        ));
        std::fs::write(setup.config(), config).unwrap();
        let mut cmd = setup.chela(&["gateway"]);
        // `discord connected` (info) tells us the READY handler ran: before that, the adapter
        // does not know its own id and drops messages.
        cmd.env("RUST_LOG", "warn,chela_discord=info")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn chela gateway");
        let stderr = collect(child.stderr.take().unwrap());
        let chela = Chela {
            _stdin: child.stdin.take(),
            child,
            stderr,
        };
        let deadline = Instant::now() + common::WAIT;
        while !chela.stderr().contains("discord connected") {
            assert!(
                Instant::now() < deadline,
                "chela did not connect to the emulator's gateway; chela stderr: {}\n\
                 launcher log: {}",
                chela.stderr(),
                dc.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        chela
    }

    fn stderr(&self) -> String {
        text(&self.stderr)
    }

    /// SIGTERM, then waits: asserts a clean exit; returns its stderr.
    async fn stop(mut self) -> String {
        let pid = self.child.id().expect("chela still running");
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let status = tokio::time::timeout(common::WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("chela did not exit on SIGTERM: {}", self.stderr()))
            .expect("wait for chela");
        // Let the stderr reader drain.
        for _ in 0..50 {
            if Arc::strong_count(&self.stderr) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stderr = self.stderr();
        assert!(status.success(), "chela gateway exited {status}: {stderr}");
        stderr
    }
}

/// `events` of kind `event` in `channel` written by `author`.
fn of<'a>(events: &'a [Value], event: &str, channel: &str, author: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"] == event && e["channel_id"] == channel && e["author"] == author)
        .collect()
}

/// What `chela sessions list` prints.
async fn sessions(setup: &common::Setup) -> String {
    let out = setup.run(&["sessions", "list"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sessions list: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The buttons under a message (or in a logged event) as (label, custom_id) pairs.
fn buttons(message: &Value) -> Vec<(String, String)> {
    if let Some(logged) = message["buttons"].as_array() {
        let field = |b: &Value, i: usize| b[i].as_str().unwrap_or_default().to_string();
        return logged.iter().map(|b| (field(b, 0), field(b, 1))).collect();
    }
    let rows = message["components"].as_array().into_iter().flatten();
    rows.filter_map(|row| row["components"].as_array())
        .flatten()
        .filter(|c| c["type"] == 2)
        .map(|b| {
            let field = |k: &str| b[k].as_str().unwrap_or_default().to_string();
            (field("label"), field("custom_id"))
        })
        .collect()
}

/// The bot's message among `messages` that asks for an exec approval.
fn question(messages: &[Value]) -> Option<&Value> {
    messages
        .iter()
        .find(|m| content(m).starts_with("🔐 Approval needed"))
}

fn content(event: &Value) -> String {
    event["content"]
        .as_str()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_mention_gets_one_streamed_reply_through_the_third_party_emulator() {
    let mut dc = Emulator::start().await;
    let setup = common::Setup::openai("steer").await;
    let chela = Chela::start(&setup, &dc).await;
    let (channel, bot) = (dc.channel.clone(), dc.bot.clone());

    // A user mentions the bot in the guild text channel; the fake model streams 6 ticks,
    // 300 ms apart, so chela sends a preview and edits it.
    dc.user_says(&channel, &format!("<@{bot}> slow 300 6"))
        .await;
    let expected = "tick 1 tick 2 tick 3 tick 4 tick 5 tick 6";
    dc.wait_bot_text(&channel, expected, &chela).await;

    // Stop the gateway so nothing more can be sent, then look at everything it did.
    let stderr = chela.stop().await;
    let sent = dc.bot_messages(&channel).await;
    let events = dc.events();
    let context = format!("sent {sent:#?}\nevents {events:#?}\nchela stderr: {stderr}");

    // The model saw the text without the mention.
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 1, "{context}");
    assert!(
        common::last_user_text(&calls[0]).contains("slow 300 6"),
        "{context}"
    );

    // The channel's session.
    let sessions = sessions(&setup).await;
    let key = format!("agent:main:discord:channel:{channel}");
    assert!(
        sessions.contains(&key),
        "no session {key}: {sessions}\n{context}"
    );

    // Exactly one bot message in the channel, edited into the whole answer.
    assert_eq!(sent.len(), 1, "{context}");
    assert_eq!(
        sent[0]["content"].as_str().unwrap().trim_end(),
        expected,
        "{context}"
    );
    assert!(
        sent[0]["edited_timestamp"].is_string(),
        "the reply was never edited: {context}"
    );

    // The event log: one MESSAGE_CREATE with a preview (a proper prefix of the answer), then
    // MESSAGE_UPDATEs of that very message only, each still a prefix, the last one the whole
    // answer; nothing deleted.
    let creates = of(&events, "MESSAGE_CREATE", &channel, &bot);
    assert_eq!(creates.len(), 1, "{context}");
    let preview = content(creates[0]);
    assert!(
        preview.len() < expected.len() && expected.starts_with(&preview),
        "the first message is not a preview: {context}"
    );
    assert_eq!(creates[0]["id"], sent[0]["id"], "{context}");
    let updates = of(&events, "MESSAGE_UPDATE", &channel, &bot);
    assert!(!updates.is_empty(), "{context}");
    for update in &updates {
        assert_eq!(update["id"], sent[0]["id"], "{context}");
        assert!(expected.starts_with(&content(update)), "{context}");
    }
    assert_eq!(content(updates[updates.len() - 1]), expected, "{context}");
    assert!(
        events.iter().all(|e| e["event"] != "MESSAGE_DELETE"),
        "{context}"
    );
    // Nothing went anywhere else.
    assert!(
        events
            .iter()
            .filter(|e| e["author"] == bot.as_str())
            .all(|e| e["channel_id"] == channel.as_str()),
        "{context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_in_a_thread_is_answered_in_that_thread_through_the_third_party_emulator() {
    let mut dc = Emulator::start().await;
    let setup = common::Setup::openai("steer").await;
    let (channel, bot, user) = (dc.channel.clone(), dc.bot.clone(), dc.user.clone());

    // The user opens a thread from a message of theirs (not mentioning the bot: not answered,
    // require_mention). One before chela connects (chela never sees its THREAD_CREATE and
    // must ask where the channel sits), one after.
    let early = dc.open_thread(&channel, "before chela came").await;
    let chela = Chela::start(&setup, &dc).await;
    let aside = dc.open_thread(&channel, "aside").await;
    for thread in [&early, &aside] {
        assert_eq!(thread["parent_id"], channel.as_str(), "{thread}");
        assert_eq!(thread["owner_id"], user.as_str(), "{thread}");
    }
    let (early, aside) = (
        early["id"].as_str().unwrap().to_string(),
        aside["id"].as_str().unwrap().to_string(),
    );

    // The user mentions the bot inside each thread: each is answered in that thread.
    dc.user_says(&aside, &format!("<@{bot}> hello from the thread"))
        .await;
    dc.wait_bot_text(&aside, "ok: hello from the thread", &chela)
        .await;
    dc.user_says(&early, &format!("<@{bot}> hello from the early thread"))
        .await;
    dc.wait_bot_text(&early, "ok: hello from the early thread", &chela)
        .await;

    let stderr = chela.stop().await;
    let in_aside = dc.bot_messages(&aside).await;
    let in_early = dc.bot_messages(&early).await;
    let in_channel = dc.bot_messages(&channel).await;
    let events = dc.events();
    let context = format!(
        "in aside {in_aside:#?}\nin early {in_early:#?}\nin channel {in_channel:#?}\n\
         events {events:#?}\nchela stderr: {stderr}"
    );

    // Two model calls, one per thread message; the unmentioned starters are not answered.
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 2, "{context}");
    assert!(
        common::last_user_text(&calls[0]).contains("hello from the thread"),
        "{context}"
    );
    assert!(
        common::last_user_text(&calls[1]).contains("hello from the early thread"),
        "{context}"
    );

    // chela took each thread as a thread under the channel (one session per thread), the
    // early one too: it asked the emulator where that channel sits.
    let sessions = sessions(&setup).await;
    for thread in [&aside, &early] {
        let key = format!("agent:main:discord:channel:{channel}:thread:{thread}");
        assert!(
            sessions.contains(&key),
            "no session {key}: {sessions}\n{context}"
        );
    }
    let channel_key = format!("agent:main:discord:channel:{channel}");
    assert!(
        !sessions
            .lines()
            .any(|l| l.split('\t').next() == Some(&*channel_key)),
        "the unmentioned starters made a channel session: {sessions}\n{context}"
    );

    // Each answer is one bot message in its own thread; none in the parent channel.
    for (thread, sent, expected) in [
        (&aside, &in_aside, "ok: hello from the thread"),
        (&early, &in_early, "ok: hello from the early thread"),
    ] {
        assert_eq!(sent.len(), 1, "{context}");
        assert_eq!(
            sent[0]["content"].as_str().unwrap().trim_end(),
            expected,
            "{context}"
        );
        assert!(
            of(&events, "MESSAGE_CREATE", thread, &bot).len() == 1,
            "{context}"
        );
    }
    assert!(in_channel.is_empty(), "{context}");
    assert!(
        of(&events, "MESSAGE_CREATE", &channel, &bot).is_empty(),
        "{context}"
    );
    assert!(
        events.iter().all(|e| e["event"] != "MESSAGE_DELETE"),
        "{context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_button_press_answers_an_exec_approval_through_the_third_party_emulator() {
    let mut dc = Emulator::start().await;
    let setup = common::Setup::openai("steer").await;
    let (channel, bot, user) = (dc.channel.clone(), dc.bot.clone(), dc.user.clone());
    let tables = format!(
        "[tools]\ngroup_profile = \"coding\"\nexec_approvals = \"ask\"\n\
         approval_timeout_s = 120\n[commands]\nowner_allow_from = [\"discord:{user}\"]\n"
    );
    let chela = Chela::start_with(&setup, &dc, &tables).await;

    // The user asks for a command; exec waits for an owner's answer, asked with buttons.
    let ask = format!(r#"<@{bot}> tool exec {{"command": "touch pressed.txt"}}"#);
    dc.user_says(&channel, &ask).await;
    let messages = dc
        .wait_messages(&channel, "the question with buttons", &chela, |m| {
            question(m).is_some_and(|q| buttons(q).len() == 3)
        })
        .await;
    let asked = question(&messages).unwrap().clone();
    let offered = buttons(&asked);
    let labels: Vec<&str> = offered.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["Allow once", "Always", "Deny"], "{asked:#}");
    assert!(
        !setup.path("ws/pressed.txt").exists(),
        "ran before approval"
    );

    // The owner presses "Allow once": acknowledged privately at once, then answered.
    let once = dc.press(&channel, &asked, &offered[0].1).await;
    let (record, answer) = dc.wait_answer(&channel, &asked, &once, &chela).await;
    assert_deferred_ephemeral(&record);
    assert_eq!(answer, "Allowed once.", "{record:#}");
    dc.wait_messages(
        &channel,
        "the run's answer, the question ended",
        &chela,
        |m| {
            let done = m.iter().any(|m| content(m).starts_with("done:"));
            done && question(m).is_some_and(|q| buttons(q).is_empty())
        },
    )
    .await;
    assert!(setup.path("ws/pressed.txt").exists());

    // A late press on buttons a client still shows (Deny) is told the question ended.
    let late = dc.press(&channel, &asked, &offered[2].1).await;
    let (record, answer) = dc.wait_answer(&channel, &asked, &late, &chela).await;
    assert_deferred_ephemeral(&record);
    assert_eq!(
        answer, "Already ended: ✅ allowed once by ann.",
        "{record:#}"
    );

    let stderr = chela.stop().await;
    let messages = dc.messages(&channel).await;
    let events = dc.events();
    let context = format!("messages {messages:#?}\nevents {events:#?}\nchela stderr: {stderr}");
    assert_question_ended(&events, &asked, &channel, &bot, &context);
    let ended = question(&messages).unwrap();
    assert!(buttons(ended).is_empty(), "{context}");
    let runs = messages.iter().filter(|m| content(m).starts_with("done:"));
    assert_eq!(runs.count(), 1, "the command ran once: {context}");
}

/// The bot acknowledged the interaction `record` with a deferred response seen by the
/// presser alone (callback type 5, flag 64: ephemeral).
fn assert_deferred_ephemeral(record: &Value) {
    assert_eq!(record["acknowledged"], true, "{record:#}");
    assert_eq!(record["type"], 5, "{record:#}");
    assert_eq!(record["data"]["flags"], 64, "{record:#}");
}

/// The event log: the question `asked` was created with three buttons, then edited once (by
/// the bot, in the channel) to its outcome with no buttons; nothing was deleted.
fn assert_question_ended(events: &[Value], asked: &Value, channel: &str, bot: &str, context: &str) {
    let of_question = |event: &str| -> Vec<&Value> {
        of(events, event, channel, bot)
            .into_iter()
            .filter(|e| e["id"] == asked["id"])
            .collect()
    };
    let creates = of_question("MESSAGE_CREATE");
    assert_eq!(creates.len(), 1, "{context}");
    assert_eq!(buttons(creates[0]).len(), 3, "{context}");
    let updates = of_question("MESSAGE_UPDATE");
    assert_eq!(updates.len(), 1, "{context}");
    assert!(buttons(updates[0]).is_empty(), "{context}");
    assert!(
        content(updates[0]).ends_with("✅ allowed once by ann."),
        "{context}"
    );
    assert!(
        events.iter().all(|e| e["event"] != "MESSAGE_DELETE"),
        "{context}"
    );
}
