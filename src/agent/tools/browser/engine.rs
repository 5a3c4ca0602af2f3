//! One Chromium per gateway, started at the first call and again if it died; one browser
//! context per agent (its own cookies, storage and cache, like a profile; gone when chela
//! stops), and in it one tab per session (at most [`MAX_TABS`] in all: the one used longest
//! ago is closed first), so two conversations never click in each other's page.

use std::collections::HashMap;
use std::sync::Arc;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use tokio::sync::Mutex;

use super::BrowserError;
use super::launch::{LaunchSettings, Running, launch};

/// Tabs open at most.
pub const MAX_TABS: usize = 16;

/// A session's tab: its page and the references of its last snapshot.
pub struct Tab {
    /// The page.
    pub page: Page,
    /// Reference (`e3`) -> `backendDOMNodeId`, from the last snapshot.
    pub refs: HashMap<String, i64>,
}

/// The live browser's contexts and tabs.
#[derive(Default)]
struct Open {
    contexts: HashMap<String, BrowserContextId>,
    /// Session key -> (tab, when it was last used: a counter).
    tabs: HashMap<String, (Arc<Mutex<Tab>>, u64)>,
    uses: u64,
}

/// The gateway's browser.
pub struct Engine {
    settings: LaunchSettings,
    running: Mutex<Option<Running>>,
    open: Mutex<Open>,
}

impl Engine {
    /// A browser started with `settings` at its first use.
    pub fn new(settings: LaunchSettings) -> Engine {
        Engine {
            settings,
            running: Mutex::new(None),
            open: Mutex::new(Open::default()),
        }
    }

    /// The settings it starts with.
    pub fn settings(&self) -> &LaunchSettings {
        &self.settings
    }

    /// Session `session`'s tab in agent `agent`'s context, starting Chromium (again) and
    /// making the context and the tab when needed.
    pub async fn tab(&self, agent: &str, session: &str) -> Result<Arc<Mutex<Tab>>, BrowserError> {
        let mut running = self.running.lock().await;
        let mut open = self.open.lock().await;
        if running.as_mut().is_some_and(|r| !r.alive()) {
            tracing::warn!("the browser had stopped; starting it again");
            *running = None;
            *open = Open::default();
        }
        if running.is_none() {
            *running = Some(launch(&self.settings).await?);
        }
        open.uses += 1;
        let now = open.uses;
        if let Some((tab, used)) = open.tabs.get_mut(session) {
            *used = now;
            return Ok(tab.clone());
        }
        let Some(live) = running.as_ref() else {
            return Err(BrowserError::Start("the browser did not start".into()));
        };
        let context = match open.contexts.get(agent) {
            Some(context) => context.clone(),
            None => {
                let made = live
                    .browser
                    .create_browser_context(CreateBrowserContextParams::default())
                    .await
                    .map_err(BrowserError::cdp)?;
                open.contexts.insert(agent.to_string(), made.clone());
                made
            }
        };
        if open.tabs.len() >= MAX_TABS
            && let Some(oldest) = open
                .tabs
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            && let Some((tab, _)) = open.tabs.remove(&oldest)
        {
            let page = tab.lock().await.page.clone();
            let _ = page.close().await;
        }
        let target = CreateTargetParams::builder()
            .url("about:blank")
            .browser_context_id(context)
            .build()
            .map_err(BrowserError::Cdp)?;
        let page = live
            .browser
            .new_page(target)
            .await
            .map_err(BrowserError::cdp)?;
        let tab = Arc::new(Mutex::new(Tab {
            page,
            refs: HashMap::new(),
        }));
        open.tabs.insert(session.to_string(), (tab.clone(), now));
        Ok(tab)
    }

    /// Stops Chromium (the gateway is stopping); the next call starts it again.
    pub async fn stop(&self) {
        *self.open.lock().await = Open::default();
        *self.running.lock().await = None;
    }
}
