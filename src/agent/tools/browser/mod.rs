//! `browser`: headless Chromium for the agent, over the DevTools protocol (chromiumoxide).
//! `navigate` loads a page and shows its accessibility outline with references (`[ref=e3]`),
//! `snapshot` shows it again, `text` reads the page's text, `click` and `type` act on a node
//! by reference, `screenshot` returns a PNG a vision model sees.
//!
//! - [`launch`]: starting Chromium confined, with its own profile, through the proxy.
//! - [`pipe`]: DevTools over a pipe, bridged to the WebSocket chromiumoxide speaks.
//! - [`proxy`]: the only way out, under `web_fetch`'s address rule.
//! - [`engine`]: one browser per gateway, a context per agent, a tab per session.
//! - [`snapshot`]: the accessibility outline and its references.
//! - [`ops`]: what each action does to a tab.
//! - [`shots`]: where screenshots are kept in the workspace.

pub mod engine;
pub mod launch;
pub mod ops;
pub mod pipe;
pub mod proxy;
pub mod shots;
pub mod snapshot;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{self, ArgError};
use super::web::Resolver;
use super::web::fetch::check_url;
use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};
use engine::Engine;

/// Why a browser action failed; the text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// No Chromium to start.
    #[error("no browser: {0}")]
    NoChromium(String),
    /// Chromium did not start or cannot be reached.
    #[error("the browser did not start: {0}")]
    Start(String),
    /// A file or socket failed.
    #[error("{0}")]
    Io(String),
    /// The DevTools protocol answered an error.
    #[error("the browser refused: {0}")]
    Cdp(String),
    /// A reference no snapshot gave.
    #[error("no element {0} in the last snapshot; take a snapshot and use its references")]
    NoRef(String),
    /// A reference whose element is gone (the page changed).
    #[error("element {0} is gone (the page changed); take a new snapshot")]
    Stale(String),
    /// The action took longer than `[tools.browser] timeout_s`.
    #[error("the page did not finish in time ([tools.browser] timeout_s)")]
    Timeout,
}

impl BrowserError {
    /// A file or socket error.
    pub fn io(e: std::io::Error) -> BrowserError {
        BrowserError::Io(e.to_string())
    }

    /// A chromiumoxide error.
    pub fn cdp(e: chromiumoxide::error::CdpError) -> BrowserError {
        BrowserError::Cdp(e.to_string())
    }
}

/// The `browser` tool.
pub struct BrowserTool {
    engine: Arc<Engine>,
}

/// One call's action.
#[derive(Debug, PartialEq)]
enum Action {
    Navigate(String),
    Snapshot,
    Text,
    Click(String),
    Type {
        reference: String,
        text: String,
        submit: bool,
    },
    Screenshot,
}

impl BrowserTool {
    /// The tool over the gateway's browser.
    pub fn new(engine: Arc<Engine>) -> BrowserTool {
        BrowserTool { engine }
    }

    async fn act(&self, action: Action, ctx: &ToolContext) -> Result<ToolOutput, BrowserError> {
        let settings = &self.engine.settings().browser;
        let timeout = Duration::from_secs(settings.timeout_s);
        let max_chars = settings.max_chars.min(ctx.max_output_chars.max(1));
        if let Action::Navigate(url) = &action {
            self.check(url).await?;
        }
        let tab = self
            .engine
            .tab(&agent_of(&ctx.session_key), &ctx.session_key)
            .await?;
        let mut tab = tab.lock().await;
        match action {
            Action::Navigate(url) => ops::navigate(&mut tab, &url, timeout).await?,
            Action::Click(reference) => ops::click(&tab, &reference, timeout).await?,
            Action::Type {
                reference,
                text,
                submit,
            } => ops::type_text(&tab, &reference, &text, submit, timeout).await?,
            Action::Text => {
                let (url, title) = ops::location(&tab).await;
                let text = ops::text(&tab, max_chars).await?;
                return Ok(ToolOutput::ok(format!("{title} ({url})\n\n{text}")));
            }
            Action::Screenshot => {
                let png = ops::screenshot(&tab).await?;
                let path = shots::save(&ctx.workspace, &ctx.session_key, &png).await?;
                let (url, title) = ops::location(&tab).await;
                return Ok(ToolOutput::ok(format!(
                    "screenshot of {title} ({url}), saved as {path}"
                ))
                .with_image(path));
            }
            Action::Snapshot => {}
        }
        let (url, title) = ops::location(&tab).await;
        let outline = ops::outline(&mut tab, max_chars).await?;
        Ok(ToolOutput::ok(format!("{title} ({url})\n\n{outline}")))
    }

    /// Refuses a URL `web_fetch` would refuse, before the browser goes there (the proxy
    /// refuses it too, and everything the page loads after).
    async fn check(&self, url: &str) -> Result<(), BrowserError> {
        let parsed =
            url::Url::parse(url).map_err(|_| BrowserError::Cdp(format!("{url:?} is not a URL")))?;
        let settings = self.engine.settings();
        check_url(&settings.web, &settings.resolve, &parsed)
            .await
            .map(drop)
            .map_err(|e| BrowserError::Cdp(e.to_string()))
    }
}

/// The agent a session key names (`agent:<id>:…`), `main` when it names none.
fn agent_of(session_key: &str) -> String {
    let mut parts = session_key.split(':');
    match (parts.next(), parts.next()) {
        (Some("agent"), Some(id)) if !id.is_empty() => id.to_string(),
        _ => "main".into(),
    }
}

fn parse(m: &serde_json::Map<String, Value>) -> Result<Action, ArgError> {
    let action = args::required_str(m, "action")?;
    let reference = || args::required_str(m, "ref").map(|r| r.trim().to_string());
    Ok(match action {
        "navigate" => Action::Navigate(args::required_str(m, "url")?.trim().to_string()),
        "snapshot" => Action::Snapshot,
        "text" => Action::Text,
        "click" => Action::Click(reference()?),
        "type" => Action::Type {
            reference: reference()?,
            text: args::required_str(m, "text")?.to_string(),
            submit: args::optional_bool(m, "submit")?.unwrap_or(false),
        },
        "screenshot" => Action::Screenshot,
        other => {
            return Err(ArgError::invalid(format!(
                "unknown action {other:?}: navigate, snapshot, text, click, type or screenshot"
            )));
        }
    })
}

impl Tool for BrowserTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "browser".to_owned(),
            description: "Drive a headless browser: `navigate` to a URL (answers the page's \
                          outline, whose actionable elements carry references like [ref=e3]), \
                          `snapshot` (the outline again), `text` (the page's text), `click` or \
                          `type` into an element by `ref` (`submit` presses Enter), \
                          `screenshot` (an image)."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["navigate", "snapshot", "text", "click", "type", "screenshot"]},
                    "url": {"type": "string"},
                    "ref": {"type": "string"},
                    "text": {"type": "string"},
                    "submit": {"type": "boolean"}
                },
                "required": ["action"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let action = match parse_args(&args, parse) {
                Ok(action) => action,
                Err(out) => return out,
            };
            tokio::select! {
                done = self.act(action, ctx) => done.unwrap_or_else(|e| ToolOutput::error(e.to_string())),
                () = ctx.cancel.cancelled() => ToolOutput::error("browser cancelled"),
            }
        })
    }
}

/// The browser tool of `config`, when `[tools.browser] enabled`; Chromium starts at its
/// first call and stops when `shutdown` fires.
pub fn tool(
    config: &crate::config::Config,
    resolve: Resolver,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Option<Arc<dyn Tool>> {
    if !config.tools.browser.enabled {
        return None;
    }
    let sandbox = if config.tools.browser.landlock {
        crate::sandbox::ChildSandbox::announced(
            crate::config::SandboxMode::Landlock,
            None,
            config,
            "tools.browser",
        )
    } else {
        crate::sandbox::ChildSandbox::from_config(crate::config::SandboxMode::Off, None, config)
    };
    let settings = launch::LaunchSettings {
        browser: config.tools.browser.clone(),
        web: config.tools.web.clone(),
        resolve,
        sandbox,
        // chela's RPC and panel, never reached from a page whatever the rule opens.
        forbidden: config.rpc.listen.trim().parse().into_iter().collect(),
    };
    let engine = Arc::new(Engine::new(settings));
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        runtime.spawn(async move {
            shutdown.cancelled().await;
            engine.stop().await;
        });
    }
    Some(Arc::new(BrowserTool::new(engine)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_and_name_what_is_missing() {
        let parsed = |v: Value| parse(v.as_object().unwrap());
        assert_eq!(
            parsed(json!({"action": "navigate", "url": " https://e.x "})).unwrap(),
            Action::Navigate("https://e.x".into())
        );
        assert_eq!(
            parsed(json!({"action": "type", "ref": "e2", "text": "hi", "submit": true})).unwrap(),
            Action::Type {
                reference: "e2".into(),
                text: "hi".into(),
                submit: true
            }
        );
        assert!(
            parsed(json!({"action": "click"}))
                .unwrap_err()
                .to_string()
                .contains("ref")
        );
        assert!(
            parsed(json!({"action": "fly"}))
                .unwrap_err()
                .to_string()
                .contains("navigate, snapshot")
        );
        assert_eq!(agent_of("agent:ops:telegram:direct:1"), "ops");
        assert_eq!(agent_of(""), "main");
    }
}
