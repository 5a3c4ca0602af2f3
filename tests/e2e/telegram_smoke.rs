//! Smoke test: a Telegram DM through the real binary, the fake Bot API and the fake model.

use crate::common;

use std::time::Duration;

use chela_testkit::{ChatSpec, FakeTelegram, UserSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_from_an_allowed_user_is_answered() {
    let setup = common::Setup::openai("steer").await;
    let tg = FakeTelegram::start().await.unwrap();
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[channels.telegram]\ntoken = \"{}\"\napi_url = \"{}\"\nallow_from = [\"42\"]\npoll_timeout_s = 1\n",
        tg.token(),
        tg.api_url()
    ));
    std::fs::write(setup.config(), config).unwrap();
    let gateway = common::Chat::spawn(setup.chela(&["gateway"]));
    tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), "hello bot");
    let answered = tg
        .wait_for(
            |t| t.sent(42).iter().any(|m| m.text == "ok: hello bot"),
            Duration::from_secs(20),
        )
        .await;
    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(answered, "sent: {:?}\nstderr: {}", tg.sent(42), done.stderr);
    assert_eq!(tg.sent(42).len(), 1, "{:?}", tg.sent(42));
}
