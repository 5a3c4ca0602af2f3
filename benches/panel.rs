//! The control panel's figures against the real `chela gateway` binary: page weight of each
//! page with its assets, time to first render of the overview and the sessions page with
//! 10,000 sessions in the store (server time over HTTP, and first contentful paint in headless
//! Chromium when chromedriver is on PATH), and the idle RSS with the panel on and off.
//!
//! Run with `cargo bench --bench panel` (release profile), or `cargo bench --profile dev
//! --bench panel` for the debug build; `CHELA_BENCH_BIN` names another binary. Reports
//! figures only; nothing here asserts a time.

mod common;
// The tests' WebDriver client: test support that panics on a broken browser, by design.
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../tests/common/webdriver.rs"]
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chela::domain::message::{ContentBlock, Message, UserMessage};
use common::{BenchResult, Summary, memory_of, mib, ms, row, table};
use tokio::process::{Child, ChildStdin, Command};

/// Sessions seeded for the first-render figures.
const SESSIONS: usize = 10_000;
/// Requests timed per page.
const SAMPLES: usize = 10;
/// Idle time before the memory is read.
const IDLE: Duration = Duration::from_secs(3);
/// The client token.
const TOKEN: &str = "bench-client-token";

/// Writes the config of a gateway in `dir` (echo model, terminal channel, RPC on a free
/// port) with the panel `on` or off.
fn config(dir: &Path, on: bool) -> BenchResult<PathBuf> {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[model]\nprovider = \"echo\"\n[store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\n\
             [rpc]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\npanel = {on}\n"
        ),
    )?;
    Ok(path)
}

/// Seeds `n` sessions with one user message each into the store of `config`.
async fn seed(config: &Path, n: usize) -> BenchResult {
    let loaded = chela::config::Config::load(Some(config))?;
    let store = chela::store::Store::open_config(&loaded.config)?;
    for i in 0..n {
        let key = format!("agent:main:telegram:direct:{}", 100_000 + i);
        store.ensure_session(&key, "/tmp")?;
        let message = Message::User(UserMessage {
            content: vec![ContentBlock::Text {
                text: format!("hello from user {i}"),
            }],
            timestamp: 1_767_225_600_000 + i as u64,
        });
        store.append_message(&key, &message)?;
    }
    store.flush().await?;
    Ok(())
}

/// A running gateway: the process, its stdin held open, its RPC address and operator token.
struct Gateway {
    child: Child,
    _stdin: Option<ChildStdin>,
    address: String,
    operator: String,
}

async fn start(dir: &Path, config: &Path) -> BenchResult<Gateway> {
    let mut child = Command::new(common::chela_binary())
        .arg("--config")
        .arg(config)
        .arg("gateway")
        .env_clear()
        .env("HOME", dir)
        .env("USER", "bench")
        .env("RUST_LOG", "warn")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take();
    let path = dir.join("data.rpc");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = chela::rpc::discovery::read(&path) {
            return Ok(Gateway {
                child,
                _stdin: stdin,
                address: found.address,
                operator: found.operator_token.ok_or("no operator token")?,
            });
        }
        if Instant::now() > deadline {
            return Err("the gateway did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Gateway {
    fn pid(&self) -> BenchResult<String> {
        Ok(self.child.id().ok_or("gateway gone")?.to_string())
    }

    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// Logs in over HTTP: the session cookie.
async fn login(http: &reqwest::Client, base: &str, token: &str) -> BenchResult<String> {
    let r = http
        .post(format!("{base}/panel/login"))
        .form(&[("token", token)])
        .send()
        .await?;
    let cookie = r
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .ok_or("no cookie")?
        .to_str()?;
    Ok(cookie.split(';').next().unwrap_or_default().to_owned())
}

/// Times `SAMPLES` GETs of `path`: the summary and the body's size.
async fn time_page(
    http: &reqwest::Client,
    base: &str,
    cookie: &str,
    path: &str,
) -> BenchResult<(Summary, usize)> {
    let mut samples = Vec::new();
    let mut size = 0;
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let body = http
            .get(format!("{base}{path}"))
            .header(reqwest::header::COOKIE, cookie)
            .send()
            .await?
            .bytes()
            .await?;
        samples.push(started.elapsed());
        size = body.len();
    }
    Ok((Summary::of(&samples).ok_or("no samples")?, size))
}

/// Page weights and server times of every page against `gw`.
async fn pages(gw: &Gateway, label: &str) -> BenchResult {
    let base = format!("http://{}", gw.address);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let cookie = login(&http, &base, &gw.operator).await?;
    let mut assets = 0;
    for asset in ["/panel/assets/panel.css", "/panel/assets/panel.js"] {
        assets += http
            .get(format!("{base}{asset}"))
            .send()
            .await?
            .bytes()
            .await?
            .len();
    }
    let mut rows = vec![row(
        "assets (panel.css + panel.js)",
        format!("{:.1} KB", assets as f64 / 1000.0),
    )];
    let paths = [
        "/panel",
        "/panel/sessions",
        "/panel/sessions?q=direct:1099",
        "/panel/session?key=agent:main:telegram:direct:100000",
        "/panel/live",
        "/panel/pairing",
        "/panel/bindings",
        "/panel/dead",
        "/panel/config",
    ];
    for path in paths {
        let (summary, size) = time_page(&http, &base, &cookie, path).await?;
        rows.push(row(
            path,
            format!(
                "{:.1} KB page + assets = {:.1} KB; server p50 {} (min {}, max {})",
                size as f64 / 1000.0,
                (size + assets) as f64 / 1000.0,
                ms(summary.p50),
                ms(summary.min),
                ms(summary.max)
            ),
        ));
    }
    table(&format!("Panel pages, {label}"), &rows);
    Ok(())
}

/// First contentful paint and load of the overview and sessions pages in headless Chromium.
async fn browser(gw: &Gateway) -> BenchResult {
    let Some(driver) = webdriver::Driver::start().await else {
        return Ok(());
    };
    let base = format!("http://{}", gw.address);
    let b = driver.browser().await;
    b.goto(&format!("{base}/panel/login")).await;
    let token = b.find("#token").await;
    b.type_into(&token, &gw.operator).await;
    b.click(&b.find("#login").await).await;
    b.find(".cards").await;
    let script = "const n = performance.getEntriesByType('navigation')[0]; \
        const p = performance.getEntriesByName('first-contentful-paint')[0]; \
        return [n.responseStart, n.responseEnd, n.domContentLoadedEventEnd, n.loadEventEnd, p ? p.startTime : -1];";
    let mut rows = Vec::new();
    for path in ["/panel", "/panel/sessions"] {
        let mut fcp = Vec::new();
        let mut last = serde_json::Value::Null;
        for _ in 0..SAMPLES {
            b.goto(&format!("{base}{path}")).await;
            b.find("main h1").await;
            let mut timing = b.run(script).await;
            // The paint entry may come a moment after the load.
            for _ in 0..20 {
                if timing[4].as_f64().unwrap_or(-1.0) >= 0.0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                timing = b.run(script).await;
            }
            if let Some(t) = timing[4].as_f64().filter(|t| *t >= 0.0) {
                fcp.push(Duration::from_secs_f64(t / 1000.0));
            }
            last = timing;
        }
        let summary = Summary::of(&fcp).ok_or("no paint timings")?;
        rows.push(row(
            path,
            format!(
                "first contentful paint p50 {} (min {}, max {}); last: first byte {:.1} ms, DOM loaded {:.1} ms",
                ms(summary.p50),
                ms(summary.min),
                ms(summary.max),
                last[0].as_f64().unwrap_or(-1.0),
                last[2].as_f64().unwrap_or(-1.0)
            ),
        ));
    }
    b.quit().await;
    table(&format!("Headless Chromium, {SESSIONS} sessions"), &rows);
    Ok(())
}

/// Idle RSS of a fresh gateway with the panel on or off.
async fn idle_rss(on: bool) -> BenchResult<(u64, u64)> {
    let dir = tempfile::tempdir()?;
    let config = config(dir.path(), on)?;
    let gw = start(dir.path(), &config).await?;
    tokio::time::sleep(IDLE).await;
    let idle = memory_of(&gw.pid()?)?;
    let mut used = idle;
    if on {
        pages(&gw, "empty store").await?;
        tokio::time::sleep(IDLE).await;
        used = memory_of(&gw.pid()?)?;
    }
    gw.stop().await;
    Ok((idle.rss_kib, used.rss_kib))
}

#[tokio::main]
async fn main() -> BenchResult {
    println!("binary: {}", common::chela_binary().display());
    let mut off = Vec::new();
    let mut on = Vec::new();
    let mut used = Vec::new();
    for _ in 0..3 {
        off.push(idle_rss(false).await?.0);
        let (idle, after) = idle_rss(true).await?;
        on.push(idle);
        used.push(after);
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (off, on, used) = (median(&mut off), median(&mut on), median(&mut used));
    table(
        "Idle RSS (median of 3 fresh gateways, empty store)",
        &[
            row("panel off", mib(off)),
            row(
                "panel on, never opened",
                format!("{} ({:+} KiB)", mib(on), on as i64 - off as i64),
            ),
            row(
                "panel on, after a login and every page x10",
                format!(
                    "{} ({:+} KiB over off)",
                    mib(used),
                    used as i64 - off as i64
                ),
            ),
        ],
    );

    let dir = tempfile::tempdir()?;
    let config = config(dir.path(), true)?;
    let seeding = Instant::now();
    seed(&config, SESSIONS).await?;
    println!("\nseeded {SESSIONS} sessions in {}", ms(seeding.elapsed()));
    let gw = start(dir.path(), &config).await?;
    pages(&gw, &format!("{SESSIONS} sessions")).await?;
    browser(&gw).await?;
    gw.stop().await;
    Ok(())
}
