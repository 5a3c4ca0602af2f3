//! Starting Chromium: headless, in its own process group, from the scrubbed environment,
//! under Landlock with chela's files hidden (where the kernel has it), with a profile folder
//! of its own in the temp dir, every connection through the [`Proxy`], and DevTools on a
//! loopback port chela connects to (chromiumoxide drives it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use chromiumoxide::Browser;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::handler::viewport::Viewport;
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::BrowserError;
use super::proxy::Proxy;
use crate::agent::tools::web::Resolver;
use crate::config::{BrowserConfig, WebConfig};
use crate::sandbox::{ChildSandbox, ProcessGroup};

/// How long Chromium has to say where DevTools listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Programs tried when `[tools.browser] executable` is empty.
const CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// What starting the browser needs.
#[derive(Clone)]
pub struct LaunchSettings {
    /// `[tools.browser]`.
    pub browser: BrowserConfig,
    /// `[tools.web]` (the address rule).
    pub web: WebConfig,
    /// Resolves host names for the proxy.
    pub resolve: Resolver,
    /// How Chromium is confined.
    pub sandbox: ChildSandbox,
}

/// A running Chromium; dropping it kills its process group and removes its profile.
pub struct Running {
    /// The DevTools client.
    pub browser: Browser,
    handler: JoinHandle<()>,
    group: ProcessGroup,
    _child: Child,
    profile: PathBuf,
    _proxy: Proxy,
}

impl Running {
    /// Whether the DevTools connection still runs (Chromium did not exit or crash).
    pub fn alive(&self) -> bool {
        !self.handler.is_finished()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handler.abort();
        self.group.kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The Chromium program: the configured one, else the first candidate on `PATH`.
pub fn executable(config: &BrowserConfig) -> Result<PathBuf, BrowserError> {
    let configured = config.executable.trim();
    if !configured.is_empty() {
        let path = PathBuf::from(configured);
        return match (configured.contains('/'), path.is_file()) {
            (true, true) => Ok(path),
            (true, false) => Err(BrowserError::NoChromium(format!(
                "{configured} is not a file"
            ))),
            (false, _) => on_path(configured)
                .ok_or_else(|| BrowserError::NoChromium(format!("{configured} is not on PATH"))),
        };
    }
    CANDIDATES.iter().find_map(|name| on_path(name)).ok_or_else(|| {
        BrowserError::NoChromium("none of chromium, chromium-browser, google-chrome is on PATH (set [tools.browser] executable)".into())
    })
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// Starts Chromium and connects to it.
pub async fn launch(settings: &LaunchSettings) -> Result<Running, BrowserError> {
    let program = executable(&settings.browser)?;
    let proxy = Proxy::start(settings.web.clone(), settings.resolve.clone())
        .await
        .map_err(BrowserError::io)?;
    let profile =
        std::env::temp_dir().join(format!("chela-browser-{}", uuid::Uuid::new_v4().simple()));
    // Its temp files and sockets go inside its profile too: under Landlock nothing can be
    // made directly in a folder that holds a hidden path (the temp dir may be one).
    let tmp = profile.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(BrowserError::io)?;
    let argv = chromium_args(&program, &profile, &proxy, &settings.browser);
    let argv = settings.sandbox.argv(&argv);
    let (first, rest) = argv
        .split_first()
        .ok_or_else(|| BrowserError::NoChromium("no program".into()))?;
    let mut child = Command::new(first)
        .args(rest)
        .env_clear()
        .envs(crate::sandbox::env::scrubbed(&[]))
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BrowserError::Start(format!("cannot start {}: {e}", program.display())))?;
    let group = ProcessGroup::led_by(child.id());
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| BrowserError::Start("no stderr".into()))?;
    let ws = match tokio::time::timeout(START_TIMEOUT, devtools_url(stderr)).await {
        Ok(Some(ws)) => ws,
        _ => {
            group.kill();
            let _ = std::fs::remove_dir_all(&profile);
            return Err(BrowserError::Start(
                "Chromium did not start (no DevTools address on its stderr)".into(),
            ));
        }
    };
    let handler_config = HandlerConfig {
        ignore_https_errors: false,
        request_timeout: Duration::from_secs(settings.browser.timeout_s),
        viewport: Some(Viewport {
            width: settings.browser.width,
            height: settings.browser.height,
            ..Viewport::default()
        }),
        ..HandlerConfig::default()
    };
    let (browser, mut handler) = match Browser::connect_with_config(ws, handler_config).await {
        Ok(connected) => connected,
        Err(e) => {
            group.kill();
            let _ = std::fs::remove_dir_all(&profile);
            return Err(BrowserError::Start(format!(
                "cannot reach Chromium's DevTools: {e}"
            )));
        }
    };
    let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
    Ok(Running {
        browser,
        handler,
        group,
        _child: child,
        profile,
        _proxy: proxy,
    })
}

/// Chromium's command line.
fn chromium_args(
    program: &Path,
    profile: &Path,
    proxy: &Proxy,
    config: &BrowserConfig,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![program.into()];
    let flags = [
        "--headless=new".to_string(),
        "--disable-gpu".into(),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-extensions".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-default-apps".into(),
        "--disable-dev-shm-usage".into(),
        "--mute-audio".into(),
        "--hide-scrollbars".into(),
        "--remote-debugging-address=127.0.0.1".into(),
        "--remote-debugging-port=0".into(),
        format!("--user-data-dir={}", profile.display()),
        format!("--proxy-server=http://{}", proxy.addr()),
        // Loopback goes through the proxy too (Chromium bypasses it by default).
        "--proxy-bypass-list=<-loopback>".into(),
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        format!("--window-size={},{}", config.width, config.height),
    ];
    args.extend(flags.into_iter().map(OsString::from));
    // Chromium's own sandbox cannot start as root; Landlock confines it instead.
    if runs_as_root() {
        args.push("--no-sandbox".into());
    }
    args.push("about:blank".into());
    args
}

/// Whether chela runs as root (`/proc/self` belongs to the effective user).
fn runs_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Reads Chromium's stderr until it says `DevTools listening on ws://…`; the rest of its
/// stderr is read (and dropped) in the background so it never blocks on a full pipe.
async fn devtools_url(stderr: tokio::process::ChildStderr) -> Option<String> {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(url) = line.split("DevTools listening on ").nth(1) {
            let url = url.trim().to_string();
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return Some(url);
        }
    }
    None
}
