//! Telegram helpers for the end-to-end tests: a [`Setup`] whose config carries a
//! `[channels.telegram]` table pointing at a [`FakeTelegram`], the `chela gateway` process,
//! and readers of what the bot sent and what the model was asked.

use std::time::Duration;

use chela_testkit::telegram::BotMessage;
use chela_testkit::{ChatSpec, FakeTelegram, UserSpec};

use super::{Chat, Finished, Provider, Setup, last_user_text};

/// How long any wait on the fake Telegram may take (generous: loaded machines, 429 retries).
pub const TG_WAIT: Duration = Duration::from_secs(40);

/// How the config is built: the queue and the extra lines of each table.
pub struct TgConfig<'a> {
    /// Queue mode.
    pub mode: &'a str,
    /// Collect-mode quiet window.
    pub debounce_ms: u64,
    /// Extra lines for `[queue]` (e.g. `cap = 100`).
    pub queue: &'a str,
    /// Extra lines for `[channels.telegram]` (token, api_url and poll_timeout_s are set).
    pub telegram: &'a str,
    /// Extra tables after `[channels.telegram]` (e.g. `[commands]`).
    pub tables: &'a str,
}

impl Default for TgConfig<'_> {
    fn default() -> Self {
        TgConfig {
            mode: "steer",
            debounce_ms: 200,
            queue: "",
            telegram: "",
            tables: "",
        }
    }
}

/// A fake model, a fake Telegram and a config pointing at both.
pub struct TgSetup {
    /// The temp dir and the fake model.
    pub setup: Setup,
    /// The fake Bot API.
    pub tg: FakeTelegram,
}

impl TgSetup {
    /// Steer mode; `telegram` is appended to the `[channels.telegram]` table.
    pub async fn new(telegram: &str) -> TgSetup {
        TgSetup::with(TgConfig {
            telegram,
            ..TgConfig::default()
        })
        .await
    }

    /// A setup built from `config`.
    pub async fn with(config: TgConfig<'_>) -> TgSetup {
        let setup = Setup::start(Provider::OpenAi, config.mode, config.debounce_ms, "").await;
        let tg = FakeTelegram::start()
            .await
            .expect("start the fake Telegram");
        let mut text = std::fs::read_to_string(setup.config()).expect("read config");
        // The generated config ends with the [queue] table.
        text.push_str(config.queue);
        text.push_str(&format!(
            "\n[channels.telegram]\ntoken = \"{}\"\napi_url = \"{}\"\npoll_timeout_s = 1\n{}\n{}\n",
            tg.token(),
            tg.api_url(),
            config.telegram,
            config.tables
        ));
        std::fs::write(setup.config(), text).expect("write config");
        TgSetup { setup, tg }
    }

    /// Starts `chela gateway`.
    pub fn gateway(&self) -> Gateway {
        self.gateway_with(&[])
    }

    /// Starts `chela gateway <extra args>`.
    pub fn gateway_with(&self, extra: &[&str]) -> Gateway {
        let mut args = vec!["gateway"];
        args.extend_from_slice(extra);
        Gateway {
            chat: Some(Chat::spawn(self.setup.chela(&args))),
        }
    }

    /// Starts `chela gateway` with extra environment variables (e.g. `CHELA_STORE_URL`).
    pub fn gateway_env(&self, env: &[(&str, &str)]) -> Gateway {
        let mut cmd = self.setup.chela(&["gateway"]);
        cmd.envs(env.iter().copied());
        Gateway {
            chat: Some(Chat::spawn(cmd)),
        }
    }

    /// The bot's messages in `chat` (deleted ones left out).
    pub fn sent(&self, chat: i64) -> Vec<BotMessage> {
        self.tg
            .sent(chat)
            .into_iter()
            .filter(|m| !m.deleted)
            .collect()
    }

    /// The texts of the bot's messages in `chat`, in order.
    pub fn texts(&self, chat: i64) -> Vec<String> {
        self.sent(chat).into_iter().map(|m| m.text).collect()
    }

    /// The last user text of every model request so far.
    pub fn asked(&self) -> Vec<String> {
        self.setup
            .model_calls()
            .iter()
            .map(last_user_text)
            .collect()
    }

    /// Waits until every update was confirmed by a later `getUpdates` (the gateway has
    /// handed each one to its router).
    pub async fn wait_consumed(&self, gateway: &mut Gateway) {
        gateway
            .wait(self, "every update consumed", |t| {
                t.tg.pending_updates().is_empty()
            })
            .await;
    }

    /// `chela <args>` to completion: exit success and stdout.
    pub async fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = self.setup.run(args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.success(), format!("{stdout}{stderr}"))
    }
}

/// A running `chela gateway`.
pub struct Gateway {
    chat: Option<Chat>,
}

impl Gateway {
    /// Waits until `done` holds for the setup; on timeout stops the gateway and fails with
    /// its stderr and what the bot sent.
    pub async fn wait(&mut self, s: &TgSetup, what: &str, mut done: impl FnMut(&TgSetup) -> bool) {
        if s.tg.wait_for(|_| done(s), TG_WAIT).await {
            return;
        }
        let stderr = match self.chat.take() {
            Some(chat) => {
                chat.signal("TERM");
                chat.finish().await.stderr
            }
            None => String::new(),
        };
        let sent: Vec<String> =
            s.tg.calls()
                .iter()
                .filter(|c| c.method != "getupdates")
                .map(|c| format!("{} {}", c.method, c.body))
                .collect();
        panic!(
            "timed out waiting for {what}\ncalls: {sent:#?}\nmodel asked: {:#?}\nstderr: {stderr}",
            s.asked()
        );
    }

    /// SIGTERM, then waits for a clean exit.
    pub async fn stop(mut self) -> Finished {
        let chat = self.chat.take().expect("gateway still running");
        chat.signal("TERM");
        let done = chat.finish().await;
        assert!(
            done.status.success(),
            "gateway exit {:?}: {}",
            done.status,
            done.stderr
        );
        done
    }

    /// Waits for a stderr line containing `needle` (the gateway's log); returns it.
    pub async fn wait_log(&self, needle: &str) -> String {
        let chat = self.chat.as_ref().expect("gateway still running");
        chat.wait_stderr_line(needle).await
    }

    /// SIGKILL (kill -9) and waits for the process to go.
    pub async fn kill(mut self) {
        let chat = self.chat.take().expect("gateway still running");
        chat.kill().await;
    }
}

/// The private chat with user `id` and that user (named `name`).
pub fn dm(id: i64, name: &str) -> (ChatSpec, UserSpec) {
    (ChatSpec::private(id), UserSpec::new(id, name))
}

/// The bot's mention as users type it.
pub fn at_bot() -> String {
    format!("@{}", FakeTelegram::BOT_USERNAME)
}

/// The data of the button labelled `label` under `message`.
pub fn button(message: &BotMessage, label: &str) -> String {
    let found = message.buttons.iter().find(|(l, _)| l == label);
    found
        .map(|(_, data)| data.clone())
        .unwrap_or_else(|| panic!("no {label}: {message:#?}"))
}

/// The texts the bot answered button presses with, in order.
pub fn press_answers(s: &TgSetup) -> Vec<String> {
    let calls = s.tg.calls();
    let answers = calls.iter().filter(|c| c.method == "answercallbackquery");
    answers
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}
