//! End-to-end, the web control panel of a running `chela gateway` (Telegram fake, fake model,
//! fake ACP agent): in headless Chromium driven over WebDriver (log in, overview, a Telegram
//! message seen as a live run until it finishes, its transcript, a pairing approved from the
//! page and the user answered, an ACP binding closed), and over plain HTTP (every page and
//! action refused without a login, POSTs refused without the CSRF token or from another
//! origin, client-token limits, secrets hidden, the failed-login limit).

use crate::common;
#[path = "../common/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;

use chela::rpc::discovery::{self, Discovery};
use chela_testkit::{ChatSpec, UserSpec};
use common::acp::{self, AgentFiles};
use common::telegram::{Gateway, TgConfig, TgSetup};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, ORIGIN, SET_COOKIE};

/// The client token (`[rpc] token`).
const CLIENT: &str = "panel-client-secret";
/// The owner (`owner_allow_from`), who talks to the bot in a DM.
const ANN: i64 = 7;
/// A stranger who asks for pairing.
const ZED: i64 = 78;

/// The gateway with the panel, Ann the owner, the fake ACP agent as the default harness.
async fn start() -> (TgSetup, AgentFiles, Gateway, Discovery) {
    let s = TgSetup::with(TgConfig {
        tables: &format!(
            "[commands]\nowner_allow_from = [\"telegram:{ANN}\"]\n[rpc]\ntoken = \"{CLIENT}\"\n"
        ),
        ..TgConfig::default()
    })
    .await;
    let files = acp::configure(&s.setup, "approve-reads", "");
    let (gw, found) = ready_gateway(&s).await;
    (s, files, gw, found)
}

/// Starts `s`'s gateway and returns it with its discovery file once it is ready (Telegram
/// connected: its getMe answered) before any page is looked at.
async fn ready_gateway(s: &TgSetup) -> (Gateway, Discovery) {
    let mut gw = s.gateway();
    let path = s.setup.path("data.rpc");
    gw.wait(s, "the discovery file", |_| {
        discovery::read(&path).is_some()
    })
    .await;
    let found = discovery::read(&path).unwrap();
    let ready = format!("http://{}/readyz", found.address);
    let mut tries = 0;
    while reqwest::get(&ready).await.unwrap().status() != StatusCode::OK {
        tries += 1;
        assert!(tries < 200, "the gateway never became ready");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    (gw, found)
}

/// Where the test run leaves its screenshots: `target/panel-artifacts/` of the repository.
fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/panel-artifacts")
}

/// The pairing code in the bot's prompt to `chat`.
fn pairing_code(s: &TgSetup, chat: i64) -> String {
    let prompt = s.texts(chat).concat();
    prompt
        .split("chela pairing approve telegram ")
        .nth(1)
        .map(|rest| rest.chars().take(8).collect())
        .unwrap_or_else(|| panic!("no approve command in {prompt:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_in_a_browser_shows_runs_transcripts_and_acts_on_pairing_and_bindings() {
    let Some(driver) = webdriver::Driver::start().await else {
        return;
    };
    let (s, files, mut gw, found) = start().await;
    let base = format!("http://{}", found.address);
    let operator = found.operator_token.clone().unwrap();
    let b = driver.browser().await;

    // Any page first asks for a login.
    b.goto(&format!("{base}/panel/sessions")).await;
    b.find("#token").await;
    assert!(b.url().await.ends_with("/panel/login"), "{}", b.url().await);
    let token = b.find("#token").await;
    b.type_into(&token, &operator).await;
    b.click(&b.find("#login").await).await;
    b.wait_text("h1", "the overview", |t| t == "Overview").await;
    assert!(b.text("header").await.contains("operator"));
    let overview = b.text("main").await;
    assert!(
        overview.contains("telegram")
            && overview.contains("connected")
            && !overview.contains("not connected"),
        "{overview}"
    );
    assert!(
        overview.contains("Memory (RSS)") && overview.contains("Uptime"),
        "{overview}"
    );
    b.screenshot(&artifacts().join("overview.png")).await;

    // A Telegram message shows up as a live run, streaming, and finishes.
    b.goto(&format!("{base}/panel/live")).await;
    b.wait_text("#feed-state", "the feed", |t| t.starts_with("Live"))
        .await;
    s.tg.user_sends(
        ChatSpec::private(ANN),
        UserSpec::new(ANN, "Ann"),
        "slow 300 8",
    );
    let partial = b
        .wait_text(".run .text", "streamed text", |t| t.contains("tick 2"))
        .await;
    assert!(
        !partial.contains("tick 8"),
        "seen while it streams: {partial:?}"
    );
    b.screenshot(&artifacts().join("live-run.png")).await;
    b.wait_text(".run .phase", "the run's end", |t| t == "ok")
        .await;
    assert!(b.text(".run .text").await.contains("tick 8"));
    assert_eq!(b.find_all(".run.finished").await.len(), 1);

    // Its transcript, reached from the sessions page.
    b.goto(&format!("{base}/panel/sessions?q=direct:{ANN}"))
        .await;
    let link = b.find("td a").await;
    b.click(&link).await;
    let transcript = b
        .wait_text(".transcript", "the transcript", |t| t.contains("tick 8"))
        .await;
    assert!(transcript.contains("slow 300 8"), "{transcript}");
    // What its model calls used and cost, as /usage says it.
    let usage = b.text(".usage").await;
    assert!(
        usage.contains("Session: ") && usage.contains(" · $0."),
        "{usage}"
    );

    // A stranger asks for pairing; the code is approved from the page; the stranger is answered.
    let (zed_chat, zed) = (ChatSpec::private(ZED), UserSpec::new(ZED, "Zed"));
    s.tg.user_sends(zed_chat.clone(), zed.clone(), "hi there");
    gw.wait(&s, "the pairing prompt", |s| !s.texts(ZED).is_empty())
        .await;
    let code = pairing_code(&s, ZED);
    b.goto(&format!("{base}/panel/pairing")).await;
    assert!(b.text("main").await.contains(&code));
    b.click(&b.find("form[action='/panel/pairing/approve'] button").await)
        .await;
    let outcome = b
        .wait_text("#outcome", "the approval", |t| !t.is_empty())
        .await;
    assert!(
        outcome.contains("Approved \"Zed\" (name unverified, id 78)"),
        "{outcome}"
    );
    s.tg.user_sends(zed_chat, zed, "hello again");
    gw.wait(&s, "Zed's answer", |s| {
        s.texts(ZED).iter().any(|t| t == "ok: hello again")
    })
    .await;

    // Ann binds her DM to the fake coding agent; the binding is closed from the page.
    s.tg.user_sends(
        ChatSpec::private(ANN),
        UserSpec::new(ANN, "Ann"),
        "/acp spawn fake",
    );
    gw.wait(&s, "the binding notice", |s| {
        s.texts(ANN).iter().any(|t| t.contains("is bound here"))
    })
    .await;
    b.goto(&format!("{base}/panel/bindings")).await;
    let row = b.text("tbody").await;
    assert!(
        row.contains("fake") && row.contains(&format!("direct:{ANN}")),
        "{row}"
    );
    b.click(&b.find("form[action='/panel/bindings/close'] button").await)
        .await;
    b.accept_dialog().await;
    let outcome = b
        .wait_text("#outcome", "the close", |t| !t.is_empty())
        .await;
    assert!(outcome.contains("Closed the fake binding"), "{outcome}");
    b.goto(&format!("{base}/panel/bindings")).await;
    assert!(b.text("main").await.contains("None."));
    s.tg.user_sends(
        ChatSpec::private(ANN),
        UserSpec::new(ANN, "Ann"),
        "back to chela",
    );
    gw.wait(&s, "the model's answer", |s| {
        s.texts(ANN).iter().any(|t| t == "ok: back to chela")
    })
    .await;

    // Logged out, the pages ask for a login again.
    b.click(&b.find("form[action='/panel/logout'] button").await)
        .await;
    b.find("#token").await;
    b.goto(&format!("{base}/panel/pairing")).await;
    b.find("#token").await;
    b.quit().await;
    gw.stop().await;
    assert_eq!(files.count("session/close"), 1, "{}", files.summary());
}

/// Every page, existing or not, asked for by GET.
const PAGES: [&str; 11] = [
    "/panel",
    "/panel/",
    "/panel/sessions?q=a",
    "/panel/session?key=agent:main:main",
    "/panel/live",
    "/panel/events",
    "/panel/pairing",
    "/panel/bindings",
    "/panel/dead",
    "/panel/config",
    "/panel/no-such-page",
];

/// Every action, existing or not.
const ACTIONS: [&str; 8] = [
    "/panel/pairing/approve",
    "/panel/pairing/reject",
    "/panel/bindings/close",
    "/panel/dead/retry",
    "/panel/dead/drop",
    "/panel/runs/abort",
    "/panel/logout",
    "/panel/no-such-action",
];

/// A client that does not follow redirects.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Status, Location and body of a response.
async fn shape(r: reqwest::Response) -> (StatusCode, String, String) {
    let location = r
        .headers()
        .get(LOCATION)
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status(), location, r.text().await.unwrap())
}

/// Logs in with `token`: the session cookie (`name=value`) and the page's CSRF token.
pub(crate) async fn login(c: &reqwest::Client, base: &str, token: &str) -> (String, String) {
    let r = c
        .post(format!("{base}/panel/login"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(flag), "{set}");
    }
    let cookie = set.split(';').next().unwrap().to_owned();
    let page = c
        .get(format!("{base}/panel"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("<meta name=csrf content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    (cookie, csrf)
}

/// An action's form fields with CSRF token `csrf`.
fn fields_with(csrf: &str) -> Vec<(&str, &str)> {
    vec![
        ("csrf", csrf),
        ("channel", "telegram"),
        ("code", "ABCDEFGH"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_action_refuses_without_a_login_csrf_token_or_own_origin() {
    let (s, _files, gw, found) = start().await;
    let base = format!("http://{}", found.address);
    let operator = found.operator_token.clone().unwrap();
    let c = http();

    // `chela panel` says where it is and where the token is, and prints no token.
    let (ok, out) = s.cli(&["panel"]).await;
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("{base}/panel")) && out.contains("data.rpc"),
        "{out}"
    );
    assert!(!out.contains(&operator) && !out.contains(CLIENT), "{out}");
    // The listener's root leads to the panel.
    let root = c.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(root.status(), StatusCode::SEE_OTHER);
    assert_eq!(root.headers()[reqwest::header::LOCATION], "/panel/");

    // Without a login, or with a made-up cookie, every path answers the same.
    for cookie in ["", "chela_panel=0123456789abcdef"] {
        let want = (
            StatusCode::SEE_OTHER,
            "/panel/login".to_owned(),
            String::new(),
        );
        for page in PAGES {
            let r = c
                .get(format!("{base}{page}"))
                .header(COOKIE, cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(shape(r).await, want, "GET {page} with {cookie:?}");
        }
        let want = (
            StatusCode::FORBIDDEN,
            String::new(),
            "log in first\n".to_owned(),
        );
        for action in ACTIONS {
            let r = c
                .post(format!("{base}{action}"))
                .header(COOKIE, cookie)
                .form(&[("channel", "telegram"), ("code", "ABCDEFGH")])
                .send()
                .await
                .unwrap();
            assert_eq!(shape(r).await, want, "POST {action} with {cookie:?}");
        }
    }

    // A wrong token does not log in.
    let r = c
        .post(format!("{base}/panel/login"))
        .form(&[("token", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get(SET_COOKIE).is_none());

    // The client token: pages yes, operator actions and the config no.
    let (cookie, csrf) = login(&c, &base, CLIENT).await;
    for page in PAGES
        .iter()
        .filter(|p| !p.contains("no-such") && !p.contains("events"))
    {
        let r = c
            .get(format!("{base}{page}"))
            .header(COOKIE, &cookie)
            .send()
            .await
            .unwrap();
        let want = match page.contains("session?") {
            true => StatusCode::NOT_FOUND,
            false => StatusCode::OK,
        };
        assert_eq!(r.status(), want, "GET {page}");
    }
    let config = c
        .get(format!("{base}/panel/config"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert!(
        config
            .text()
            .await
            .unwrap()
            .contains("needs the operator token")
    );
    let post = |path: &str, cookie: &str, fields: Vec<(&str, &str)>| {
        c.post(format!("{base}{path}"))
            .header(COOKIE, cookie.to_owned())
            .form(&fields)
            .send()
    };
    let r = post(
        "/panel/pairing/approve",
        &cookie,
        vec![
            ("csrf", &csrf),
            ("channel", "telegram"),
            ("code", "ABCDEFGH"),
        ],
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("needs the operator token"));

    // The operator: without the CSRF token, with another's, or from another origin: refused.
    let (cookie, csrf) = login(&c, &base, &operator).await;
    let csrf = csrf.as_str();
    for action in ACTIONS {
        let r = post(action, &cookie, vec![("channel", "telegram")])
            .await
            .unwrap();
        assert_eq!(
            shape(r).await.0,
            StatusCode::FORBIDDEN,
            "POST {action} without CSRF"
        );
        let r = post(action, &cookie, fields_with("0000")).await.unwrap();
        assert_eq!(
            shape(r).await.0,
            StatusCode::FORBIDDEN,
            "POST {action} with a wrong CSRF"
        );
        let r = c
            .post(format!("{base}{action}"))
            .header(COOKIE, &cookie)
            .header(ORIGIN, "http://evil.example")
            .form(&fields_with(csrf))
            .send()
            .await
            .unwrap();
        let (status, _, body) = shape(r).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::FORBIDDEN, "cross-site request refused\n"),
            "{action}"
        );
    }
    // With both, from the panel's own origin, the action runs (an unknown code is not found).
    let r = c
        .post(format!("{base}/panel/pairing/reject"))
        .header(COOKIE, &cookie)
        .header(ORIGIN, &base)
        .form(&fields_with(csrf))
        .send()
        .await
        .unwrap();
    let (status, _, body) = shape(r).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.contains("No pending code ABCDEFGH"), "{body}");
    // The CSRF token may also come as a header (scripts).
    let r = c
        .post(format!("{base}/panel/runs/abort"))
        .header(COOKIE, &cookie)
        .header("x-csrf-token", csrf)
        .form(&[("session", "agent:main:main")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // The config page hides every secret.
    let config = c
        .get(format!("{base}/panel/config"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    let text = config.text().await.unwrap();
    assert!(text.contains("[channels.telegram]"), "{text}");
    for secret in [CLIENT, s.tg.token(), "api_key = \"test\""] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    // Markup in a session key is escaped.
    let r = c
        .get(format!(
            "{base}/panel/sessions?q=%3Cscript%3Ealert(1)%3C/script%3E"
        ))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    let page = r.text().await.unwrap();
    assert!(
        !page.contains("<script>alert") && page.contains("&lt;script&gt;alert"),
        "{page}"
    );

    // Logged out, the cookie is worth nothing, and its open event stream ends.
    let mut stream = c
        .get(format!("{base}/panel/events"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let r = post("/panel/logout", &cookie, vec![("csrf", csrf)])
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let ended = tokio::time::timeout(common::WAIT, async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the event stream outlived the logout");
    let r = c
        .get(format!("{base}/panel"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // Wrong tokens flooding in never keep the right one out (no lockout).
    for _ in 0..6 {
        let r = c
            .post(format!("{base}/panel/login"))
            .form(&[("token", "guess")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    let r = c
        .post(format!("{base}/panel/login"))
        .form(&[("token", operator.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    gw.stop().await;
}

/// Dead letters from the panel: one sent again reaches the chat, one dropped is gone; the
/// client token may do neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_sent_again_or_dropped_from_the_panel() {
    let s = TgSetup::with(TgConfig {
        tables: &format!("[rpc]\ntoken = \"{CLIENT}\"\n"),
        ..TgConfig::default()
    })
    .await;
    s.tg.add_chat(ChatSpec::private(ANN));
    // Two replies an earlier run could not deliver in time.
    let mut ids = Vec::new();
    {
        let mut config = chela::config::Config::default();
        config.store.path = s.setup.path("data");
        let store = chela::store::Store::open_config(&config).unwrap();
        let to = chela_channel::Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: chela_channel::ChatKind::Direct,
            chat_id: ANN.to_string(),
            thread_id: None,
        };
        let key = format!("agent:main:telegram:direct:{ANN}");
        for text in ["the late answer", "the stale answer"] {
            let id = store.record_final(&key, &to, text, 1).await.unwrap();
            assert!(store.dead_letter(id).unwrap());
            ids.push(id.to_string());
        }
        store.flush().await.unwrap();
    }
    let (mut gw, found) = ready_gateway(&s).await;
    let base = format!("http://{}", found.address);
    let c = http();
    let act = |cookie: String, csrf: String, action: &'static str, id: String| {
        let c = c.clone();
        let base = base.clone();
        async move {
            let r = c
                .post(format!("{base}{action}"))
                .header(COOKIE, cookie)
                .header(ORIGIN, &base)
                .form(&[("csrf", csrf.as_str()), ("id", id.as_str())])
                .send()
                .await
                .unwrap();
            let status = r.status();
            (status, r.text().await.unwrap())
        }
    };
    // The client token sees them but may not act on them.
    let (cookie, csrf) = login(&c, &base, CLIENT).await;
    let (status, body) = act(cookie, csrf, "/panel/dead/retry", ids[0].clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    let (cookie, csrf) = login(&c, &base, &found.operator_token.clone().unwrap()).await;
    let dead_page = |cookie: String| {
        let c = c.clone();
        let base = base.clone();
        async move {
            c.get(format!("{base}/panel/dead"))
                .header(COOKIE, cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let page = dead_page(cookie.clone()).await;
    assert!(
        page.contains("the late answer") && page.contains("the stale answer"),
        "{page}"
    );
    let (status, body) = act(
        cookie.clone(),
        csrf.clone(),
        "/panel/dead/retry",
        ids[0].clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    gw.wait(&s, "the dead letter sent again", |s| {
        s.texts(ANN).iter().any(|t| t == "the late answer")
    })
    .await;
    let (status, body) = act(
        cookie.clone(),
        csrf.clone(),
        "/panel/dead/drop",
        ids[1].clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Each once: a second retry or drop finds nothing.
    let (status, _) = act(
        cookie.clone(),
        csrf.clone(),
        "/panel/dead/retry",
        ids[0].clone(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = act(cookie.clone(), csrf, "/panel/dead/drop", ids[1].clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let page = dead_page(cookie).await;
    assert!(
        !page.contains("the late answer") && !page.contains("the stale answer"),
        "{page}"
    );
    gw.stop().await;
    assert_eq!(
        s.texts(ANN)
            .iter()
            .filter(|t| *t == "the late answer")
            .count(),
        1
    );
    assert!(!s.texts(ANN).iter().any(|t| t == "the stale answer"));
}
