//! Starting Chromium: headless, in its own process group, from the scrubbed environment,
//! with a profile folder of its own in the temp dir (its temp files inside it), every
//! connection through the [`Proxy`], DevTools over a pipe ([`Bridge`]: Chromium listens on
//! no port), and where the kernel has Landlock, chela's files hidden from it and TCP only to
//! the proxy.

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
use super::pipe::{Bridge, FDS_FROM_STDIO};
use super::proxy::Proxy;
use crate::agent::tools::web::Resolver;
use crate::config::{BrowserConfig, WebConfig};
use crate::sandbox::{ChildSandbox, ProcessGroup};

/// How long Chromium has to answer over DevTools after it started.
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
    /// How Chromium is confined (its TCP is then limited to the proxy's port).
    pub sandbox: ChildSandbox,
    /// Addresses the proxy never connects to whatever the rule opens (chela's own RPC).
    pub forbidden: Vec<std::net::SocketAddr>,
}

/// A running Chromium; dropping it kills its process group and removes its profile.
pub struct Running {
    /// The DevTools client.
    pub browser: Browser,
    handler: JoinHandle<()>,
    group: ProcessGroup,
    child: Child,
    profile: PathBuf,
    _bridge: Bridge,
    _proxy: Proxy,
}

impl Running {
    /// Whether Chromium still runs and its DevTools connection too.
    pub fn alive(&mut self) -> bool {
        !self.handler.is_finished() && matches!(self.child.try_wait(), Ok(None))
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
    let proxy = Proxy::start(
        settings.web.clone(),
        settings.resolve.clone(),
        settings.forbidden.clone(),
    )
    .await
    .map_err(BrowserError::io)?;
    let profile =
        std::env::temp_dir().join(format!("chela-browser-{}", uuid::Uuid::new_v4().simple()));
    // Its temp files and sockets go inside its profile too: under Landlock nothing can be
    // made directly in a folder that holds a hidden path (the temp dir may be one).
    let tmp = profile.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(BrowserError::io)?;
    let started = start(&program, &profile, &tmp, &proxy, settings).await;
    let (child, group, bridge) = match started {
        Ok(started) => started,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&profile);
            return Err(e);
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
    let connected = tokio::time::timeout(
        START_TIMEOUT,
        Browser::connect_with_config(bridge.url(), handler_config),
    )
    .await;
    let (browser, mut handler) = match connected {
        Ok(Ok(connected)) => connected,
        Ok(Err(e)) => {
            group.kill();
            let _ = std::fs::remove_dir_all(&profile);
            return Err(BrowserError::Start(format!(
                "Chromium's DevTools did not answer: {e}"
            )));
        }
        Err(_) => {
            group.kill();
            let _ = std::fs::remove_dir_all(&profile);
            return Err(BrowserError::Start(
                "Chromium's DevTools did not answer in time".into(),
            ));
        }
    };
    let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
    Ok(Running {
        browser,
        handler,
        group,
        child,
        profile,
        _bridge: bridge,
        _proxy: proxy,
    })
}

/// Spawns Chromium (through `sh`, which hands it the DevTools pipe on fds 3 and 4) and
/// bridges the pipe.
async fn start(
    program: &Path,
    profile: &Path,
    tmp: &Path,
    proxy: &Proxy,
    settings: &LaunchSettings,
) -> Result<(Child, ProcessGroup, Bridge), BrowserError> {
    let mut argv: Vec<OsString> = vec!["/bin/sh".into(), "-c".into(), FDS_FROM_STDIO.into()];
    argv.extend(chromium_args(program, profile, proxy, &settings.browser));
    // TCP only to the proxy; Chromium listens on its own Unix sockets (never on a TCP port:
    // binding one stays refused).
    let sandbox = (settings.sandbox.clone()).with_network(Some(vec![proxy.addr().port()]), true);
    let argv = sandbox.argv(&argv);
    let (first, rest) = argv
        .split_first()
        .ok_or_else(|| BrowserError::NoChromium("no program".into()))?;
    let mut child = Command::new(first)
        .args(rest)
        .env_clear()
        .envs(crate::sandbox::env::scrubbed(&[]))
        .env("TMPDIR", tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BrowserError::Start(format!("cannot start {}: {e}", program.display())))?;
    let group = ProcessGroup::led_by(child.id());
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(drain(stderr));
    }
    let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
        group.kill();
        return Err(BrowserError::Start("no pipe to Chromium".into()));
    };
    match Bridge::start(to, from).await {
        Ok(bridge) => Ok((child, group, bridge)),
        Err(e) => {
            group.kill();
            Err(BrowserError::io(e))
        }
    }
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
        "--remote-debugging-pipe".into(),
        format!("--user-data-dir={}", profile.display()),
        format!("--proxy-server=http://{}", proxy.addr()),
        // Loopback goes through the proxy too (Chromium bypasses it by default).
        "--proxy-bypass-list=<-loopback>".into(),
        // WebRTC sends no UDP of its own: only what goes through the proxy.
        "--webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
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

/// Reads Chromium's stderr to its end (dropped, at debug level to the log) so it never
/// blocks on a full pipe.
async fn drain(stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::trace!(target: "chela::browser::chromium", "{line}");
    }
}
