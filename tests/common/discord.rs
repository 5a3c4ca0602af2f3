//! Discord helpers for the end-to-end tests: a [`Setup`] whose config carries a
//! `[channels.discord]` table pointing at a [`FakeDiscord`] (REST through serenity's proxy,
//! the gateway forced), the `chela gateway` process started and waited on until its Discord
//! handler has seen READY, and readers of what the bot sent and what the model was asked.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_testkit::discord::{BotMessage, ChannelSpec, FakeDiscord, MessageOptions, UserSpec};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin};

use super::{Provider, Setup, last_user_text};

/// How long any wait on the fake Discord may take (generous: loaded machines, 429 waits).
pub const DC_WAIT: Duration = Duration::from_secs(40);

/// The guild every test channel lives in.
pub const GUILD: u64 = 9_000_000_001;

/// How the config is built: the queue and the extra lines of each table.
pub struct DcConfig<'a> {
    /// Queue mode.
    pub mode: &'a str,
    /// Extra lines for `[queue]`.
    pub queue: &'a str,
    /// Extra lines for `[channels.discord]` (token, api_url and gateway_url are set).
    pub discord: &'a str,
}

impl Default for DcConfig<'_> {
    fn default() -> Self {
        DcConfig {
            mode: "steer",
            queue: "",
            discord: "group_policy = \"open\"\ndm_policy = \"open\"",
        }
    }
}

/// A fake model, a fake Discord and a config pointing at both.
pub struct DcSetup {
    /// The temp dir and the fake model.
    pub setup: Setup,
    /// The fake Discord (gateway and REST).
    pub dc: FakeDiscord,
}

impl DcSetup {
    /// Steer mode, open guild channels and DMs.
    pub async fn open() -> DcSetup {
        DcSetup::with(DcConfig::default()).await
    }

    /// A setup built from `config`.
    pub async fn with(config: DcConfig<'_>) -> DcSetup {
        let setup = Setup::start(Provider::OpenAi, config.mode, 200, "").await;
        let dc = FakeDiscord::start().await.expect("start the fake Discord");
        let mut text = std::fs::read_to_string(setup.config()).expect("read config");
        // The generated config ends with the [queue] table.
        text.push_str(config.queue);
        text.push_str(&format!(
            "\n[channels.discord]\ntoken = \"{}\"\napi_url = \"{}\"\ngateway_url = \"{}\"\n{}\n",
            dc.token(),
            dc.rest_url(),
            dc.gateway_url(),
            config.discord,
        ));
        std::fs::write(setup.config(), text).expect("write config");
        DcSetup { setup, dc }
    }

    /// Starts `chela gateway` and waits until it identified, READY was dispatched to it and
    /// its handler logged `discord connected` (before that, messages would be lost).
    pub async fn gateway(&self) -> Gateway {
        let identified = self.dc.identify_count();
        let mut cmd = self.setup.chela(&["gateway"]);
        cmd.env(
            "RUST_LOG",
            "warn,chela_discord=info,chela::inbound::route=debug,chela::intake=debug",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn chela gateway");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let mut from = child.stderr.take().expect("stderr");
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let mut gw = Gateway {
            stdin: child.stdin.take(),
            child: Some(child),
            stderr,
        };
        gw.wait(self, "chela's IDENTIFY and READY", |s| {
            s.dc.identify_count() > identified
                && s.dc.connected()
                && s.dc.dispatches().iter().any(|d| d["t"] == "READY")
        })
        .await;
        gw.wait_log(self, "discord connected").await;
        gw
    }

    /// The bot's messages in `channel` (deleted ones left out).
    pub fn sent(&self, channel: u64) -> Vec<BotMessage> {
        self.dc
            .sent(channel)
            .into_iter()
            .filter(|m| !m.deleted)
            .collect()
    }

    /// The texts of the bot's messages in `channel`, in order.
    pub fn texts(&self, channel: u64) -> Vec<String> {
        self.sent(channel).into_iter().map(|m| m.content).collect()
    }

    /// The last user text of every model request so far.
    pub fn asked(&self) -> Vec<String> {
        self.setup
            .model_calls()
            .iter()
            .map(last_user_text)
            .collect()
    }

    /// `author` writes `text` in `channel`, mentioning the bot; the message id.
    pub fn mention(&self, channel: ChannelSpec, author: UserSpec, text: &str) -> u64 {
        let options = MessageOptions {
            mentions_bot: true,
            ..MessageOptions::default()
        };
        self.dc.user_sends_with(channel, author, text, options)
    }

    /// `chela <args>` to completion: exit success and stdout + stderr.
    pub async fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = self.setup.run(args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.success(), format!("{stdout}{stderr}"))
    }

    /// What `chela sessions list` prints (the gateway must be stopped).
    pub async fn sessions(&self) -> String {
        let (ok, list) = self.cli(&["sessions", "list"]).await;
        assert!(ok, "sessions list: {list}");
        list
    }

    /// Waits (at most about a minute) until `chela status`, answered by the running gateway,
    /// shows no pending turn and no undelivered reply: a reply's last text can be in the fake
    /// before its final is marked delivered (under a rate limit, its last edits are paced).
    pub async fn wait_settled(&self) {
        let mut status = String::new();
        for _ in 0..300 {
            let (ok, now) = self.cli(&["status"]).await;
            if ok && now.contains("pending turns: 0") && now.contains("undelivered replies: 0") {
                return;
            }
            status = now;
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        panic!("never settled: {status}");
    }

    /// Asserts `chela status` shows no pending turn and no undelivered reply.
    pub async fn assert_settled(&self) {
        let (ok, status) = self.cli(&["status"]).await;
        assert!(ok, "{status}");
        assert!(status.contains("pending turns: 0"), "{status}");
        assert!(status.contains("undelivered replies: 0"), "{status}");
    }

    /// The REST calls on channels (sends, edits, typing, lookups), one short line each.
    pub fn calls_summary(&self) -> Vec<String> {
        self.dc
            .calls()
            .iter()
            .filter(|c| c.path.starts_with("/channels"))
            .map(|c| {
                let content = c.body["content"].as_str().unwrap_or_default();
                let head: String = content.chars().take(60).collect();
                let reference = &c.body["message_reference"]["message_id"];
                format!(
                    "{} {} ({} chars: {head:?}) nonce {} ref {reference}",
                    c.method,
                    c.path,
                    content.chars().count(),
                    c.body["nonce"]
                )
            })
            .collect()
    }
}

/// A guild text channel of [`GUILD`].
pub fn text_channel(id: u64) -> ChannelSpec {
    ChannelSpec::guild_text(GUILD, id)
}

/// A running `chela gateway` with its stderr collected.
pub struct Gateway {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Gateway {
    /// What the gateway logged so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until `done` holds; on timeout fails with the gateway's log, the bot's calls and
    /// what the model was asked.
    pub async fn wait(&mut self, s: &DcSetup, what: &str, mut done: impl FnMut(&DcSetup) -> bool) {
        if s.dc.wait_for(|_| done(s), DC_WAIT).await {
            return;
        }
        panic!(
            "timed out waiting for {what}\ncalls: {:#?}\nmodel asked: {:#?}\nchela stderr: {}",
            s.calls_summary(),
            s.asked(),
            self.stderr()
        );
    }

    /// Waits until the gateway's log contains `needle`.
    pub async fn wait_log(&mut self, s: &DcSetup, needle: &str) {
        let deadline = tokio::time::Instant::now() + DC_WAIT;
        while !self.stderr().contains(needle) {
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "timed out waiting for {needle:?} in the log\ncalls: {:#?}\nchela stderr: {}",
                    s.calls_summary(),
                    self.stderr()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many times `needle` appears in the gateway's log.
    pub fn log_count(&self, needle: &str) -> usize {
        self.stderr().matches(needle).count()
    }

    /// SIGTERM, then waits for a clean exit; returns the gateway's log.
    pub async fn stop(mut self) -> String {
        let mut child = self.child.take().expect("gateway still running");
        let pid = child.id().expect("gateway still running");
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let status = tokio::time::timeout(DC_WAIT, child.wait())
            .await
            .unwrap_or_else(|_| panic!("chela did not exit on SIGTERM: {}", self.stderr()))
            .expect("wait for chela");
        self.drain().await;
        let stderr = self.stderr();
        assert!(status.success(), "chela gateway exited {status}: {stderr}");
        stderr
    }

    /// SIGKILL (kill -9) and waits for the process to go; returns its log.
    pub async fn kill(mut self) -> String {
        let mut child = self.child.take().expect("gateway still running");
        child.start_kill().expect("send SIGKILL");
        tokio::time::timeout(DC_WAIT, child.wait())
            .await
            .expect("killed gateway exits")
            .expect("wait");
        self.drain().await;
        self.stderr()
    }

    /// Lets the stderr reader take what the exited process left.
    async fn drain(&mut self) {
        self.stdin = None;
        for _ in 0..100 {
            if Arc::strong_count(&self.stderr) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
