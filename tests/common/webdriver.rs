//! A small W3C WebDriver client over reqwest for the panel's browser tests: starts
//! `chromedriver` on a free loopback port and drives headless Chromium (navigate, find,
//! click, type, read text, screenshots, dialogs).
//!
//! When `chromedriver` is not on PATH, [`Driver::start`] fails the test under CI
//! (`CHELA_CI` set, as `.ci/run` and `scripts/test.sh` do) and otherwise returns `None`
//! after a loud message, so the caller can skip.

// Shared by tests/e2e/panel.rs and benches/panel.rs, which use different parts of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long any wait for the page may take.
pub const PAGE_WAIT: Duration = Duration::from_secs(40);

/// A running `chromedriver`.
pub struct Driver {
    child: Child,
    base: String,
    http: reqwest::Client,
}

/// `name` found on PATH.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

impl Driver {
    /// Starts chromedriver, or `None` (outside CI only) when it is not installed.
    pub async fn start() -> Option<Driver> {
        let Some(binary) = on_path("chromedriver") else {
            let ci = std::env::var_os("CHELA_CI").is_some_and(|v| !v.is_empty());
            assert!(
                !ci,
                "chromedriver is not on PATH: the panel's browser tests need Chromium and its driver (apt-get install chromium chromium-driver; .ci/run installs them)"
            );
            // Written to the real stderr, past the test harness's capture, so it shows.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !! SKIPPED: chromedriver is not on PATH, so the panel's browser test did   !!\n\
                 !! not run. Install chromium and chromium-driver (CHELA_CI=1 makes this fail)!!\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let driver = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            let ready = driver
                .http
                .get(format!("{}/status", driver.base))
                .send()
                .await;
            if let Ok(r) = ready
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not get ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Some(driver)
    }

    /// A new headless Chromium session.
    pub async fn browser(&self) -> Browser {
        let mut options = json!({
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000"]
        });
        if Path::new("/usr/bin/chromium").is_file() {
            options["binary"] = json!("/usr/bin/chromium");
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options
        }}});
        let answer = self
            .call(reqwest::Method::POST, "/session", Some(caps))
            .await;
        let id = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Browser {
            base: format!("{}/session/{id}", self.base),
            http: self.http.clone(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        call(&self.http, method, &format!("{}{path}", self.base), body).await
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// One WebDriver command: the `value` of its answer; panics on a WebDriver error.
async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Value {
    try_call(http, method, url, body)
        .await
        .unwrap_or_else(|e| panic!("webdriver {url}: {e}"))
}

/// One WebDriver command: the `value` of its answer, or the error it gave.
async fn try_call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, Value> {
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer: Value = request
        .send()
        .await
        .expect("reach chromedriver")
        .json()
        .await
        .expect("a JSON answer");
    let value = answer.get("value").cloned().unwrap_or(Value::Null);
    match value["error"].is_string() {
        true => Err(value),
        false => Ok(value),
    }
}

/// A browser session.
pub struct Browser {
    base: String,
    http: reqwest::Client,
}

impl Browser {
    async fn post(&self, path: &str, body: Value) -> Value {
        call(
            &self.http,
            reqwest::Method::POST,
            &format!("{}{path}", self.base),
            Some(body),
        )
        .await
    }

    async fn get(&self, path: &str) -> Value {
        call(
            &self.http,
            reqwest::Method::GET,
            &format!("{}{path}", self.base),
            None,
        )
        .await
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url })).await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.get("/url")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The ids of the elements matching `css` now.
    pub async fn find_all(&self, css: &str) -> Vec<String> {
        let found = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await;
        found
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first element matching `css`, waiting for it.
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            if let Some(first) = self.find_all(css).await.into_iter().next() {
                return first;
            }
            assert!(
                Instant::now() < deadline,
                "no {css:?} on {}: {}",
                self.url().await,
                self.text("body").await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks element `id`.
    pub async fn click(&self, id: &str) {
        self.post(&format!("/element/{id}/click"), json!({})).await;
    }

    /// Types `text` into element `id`.
    pub async fn type_into(&self, id: &str, text: &str) {
        self.post(&format!("/element/{id}/value"), json!({ "text": text }))
            .await;
    }

    /// The visible text of the first element matching `css` ("" when none, or when the page
    /// changed under it).
    pub async fn text(&self, css: &str) -> String {
        let Some(id) = self.find_all(css).await.into_iter().next() else {
            return String::new();
        };
        let url = format!("{}/element/{id}/text", self.base);
        match try_call(&self.http, reqwest::Method::GET, &url, None).await {
            Ok(text) => text.as_str().unwrap_or_default().to_owned(),
            Err(_) => String::new(),
        }
    }

    /// Waits until the text of `css` satisfies `done`; returns it.
    pub async fn wait_text(&self, css: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            let text = self.text(css).await;
            if done(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} in {css:?} on {}: {:?}",
                self.url().await,
                self.text("body").await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Accepts an open `confirm()` dialog.
    pub async fn accept_dialog(&self) {
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            let answer: Value = self
                .http
                .post(format!("{}/alert/accept", self.base))
                .json(&json!({}))
                .send()
                .await
                .expect("reach chromedriver")
                .json()
                .await
                .expect("a JSON answer");
            if !answer["value"]["error"].is_string() {
                return;
            }
            assert!(Instant::now() < deadline, "no dialog: {answer}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Saves a PNG screenshot of the window to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let data = self.get("/screenshot").await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().expect("base64 screenshot"))
            .expect("decode the screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the artifacts folder");
        }
        std::fs::write(path, png).expect("write the screenshot");
    }

    /// Runs `script` in the page; its return value.
    pub async fn run(&self, script: &str) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// Ends the session (closes the browser).
    pub async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}
