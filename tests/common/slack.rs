//! Slack helpers for the end-to-end tests: an [`SlSetup`] whose config carries a
//! `[channels.slack]` table pointing at a [`FakeSlack`], the `chela gateway` process started
//! and waited on until Socket Mode said hello, and readers of what the bot posted and what
//! the model was asked.

use std::time::Duration;

use chela_testkit::slack::{FakeSlack, SentMessage};

use super::{Chat, Provider, Setup, last_user_text};

/// How long any wait on the fake Slack may take.
pub const SL_WAIT: Duration = Duration::from_secs(40);

/// A fake model, a fake Slack and a config pointing at both.
pub struct SlSetup {
    /// The temp dir and the fake model.
    pub setup: Setup,
    /// The fake Slack.
    pub slack: FakeSlack,
}

impl SlSetup {
    /// Open DMs and channels (`dm_policy` and `group_policy` open).
    pub async fn open() -> SlSetup {
        SlSetup::with("dm_policy = \"open\"\ngroup_policy = \"open\"").await
    }

    /// A setup whose `[channels.slack]` table also holds `extra` lines.
    pub async fn with(extra: &str) -> SlSetup {
        let setup = Setup::start(Provider::OpenAi, "steer", 200, "").await;
        let slack = FakeSlack::start().await.expect("start the fake Slack");
        let mut text = std::fs::read_to_string(setup.config()).expect("read config");
        text.push_str(&format!(
            "\n[channels.slack]\nbot_token = \"{}\"\napp_token = \"{}\"\napi_url = \"{}\"\n{extra}\n",
            FakeSlack::BOT_TOKEN,
            FakeSlack::APP_TOKEN,
            slack.api_url(),
        ));
        std::fs::write(setup.config(), text).expect("write config");
        SlSetup { setup, slack }
    }

    /// Starts `chela gateway` and waits until its Socket Mode connection said hello.
    pub async fn gateway(&self) -> Chat {
        let opened = self.slack.connections_opened();
        let mut cmd = self.setup.chela(&["gateway"]);
        cmd.env("RUST_LOG", "warn,chela_slack=info,chela::intake=debug");
        let gw = Chat::spawn(cmd);
        self.wait("the Socket Mode connection", |s| {
            s.slack.connections_opened() > opened && s.slack.connected()
        })
        .await;
        gw.wait_stderr_line("slack connected").await;
        gw
    }

    /// Waits until `done` holds, failing with what the bot did and the model was asked.
    pub async fn wait(&self, what: &str, mut done: impl FnMut(&SlSetup) -> bool) {
        if self.slack.wait_for(|_| done(self), SL_WAIT).await {
            return;
        }
        panic!(
            "timed out waiting for {what}\ncalls: {:#?}\nmodel asked: {:#?}",
            self.calls_summary(),
            self.asked()
        );
    }

    /// The bot's messages in `channel`.
    pub fn sent(&self, channel: &str) -> Vec<SentMessage> {
        self.slack.sent(channel)
    }

    /// The last user text of every model request so far.
    pub fn asked(&self) -> Vec<String> {
        self.setup
            .model_calls()
            .iter()
            .map(last_user_text)
            .collect()
    }

    /// The Web API calls so far, one short line each.
    pub fn calls_summary(&self) -> Vec<String> {
        self.slack
            .calls()
            .iter()
            .map(|c| {
                let text: String = c.params["text"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(60)
                    .collect();
                format!(
                    "{} channel {} ts {} thread {} {text:?}",
                    c.method, c.params["channel"], c.params["ts"], c.params["thread_ts"]
                )
            })
            .collect()
    }

    /// `chela <args>` to completion: exit success and stdout + stderr.
    pub async fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = self.setup.run(args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.success(), format!("{stdout}{stderr}"))
    }
}

/// Stops a gateway with SIGTERM and returns its log (it must exit cleanly).
pub async fn stop(gw: Chat) -> String {
    gw.signal("TERM");
    let done = gw.finish().await;
    assert!(
        done.status.success(),
        "chela gateway exited {}: {}",
        done.status,
        done.stderr
    );
    done.stderr
}
