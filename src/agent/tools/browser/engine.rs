//! One Chromium per gateway, started at the first call and again if it died; one browser
//! context per agent (its own cookies, storage and cache, gone when chela stops), each with
//! one tab the agent's calls drive in turn.

use std::collections::HashMap;
use std::sync::Arc;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use tokio::sync::Mutex;

use super::BrowserError;
use super::launch::{LaunchSettings, Running, launch};

/// An agent's tab: its page and the references of its last snapshot.
pub struct Tab {
    /// The page.
    pub page: Page,
    /// Reference (`e3`) -> `backendDOMNodeId`, from the last snapshot.
    pub refs: HashMap<String, i64>,
}

/// The gateway's browser.
pub struct Engine {
    settings: LaunchSettings,
    running: Mutex<Option<Running>>,
    tabs: Mutex<HashMap<String, Arc<Mutex<Tab>>>>,
}

impl Engine {
    /// A browser started with `settings` at its first use.
    pub fn new(settings: LaunchSettings) -> Engine {
        Engine {
            settings,
            running: Mutex::new(None),
            tabs: Mutex::new(HashMap::new()),
        }
    }

    /// The settings it starts with.
    pub fn settings(&self) -> &LaunchSettings {
        &self.settings
    }

    /// Agent `agent`'s tab, starting Chromium (again) and making the agent's context when
    /// needed.
    pub async fn tab(&self, agent: &str) -> Result<Arc<Mutex<Tab>>, BrowserError> {
        let mut running = self.running.lock().await;
        let mut tabs = self.tabs.lock().await;
        if running.as_ref().is_some_and(|r| !r.alive()) {
            tracing::warn!("the browser had stopped; starting it again");
            *running = None;
            tabs.clear();
        }
        if running.is_none() {
            *running = Some(launch(&self.settings).await?);
        }
        if let Some(tab) = tabs.get(agent) {
            return Ok(tab.clone());
        }
        let Some(live) = running.as_ref() else {
            return Err(BrowserError::Start("the browser did not start".into()));
        };
        let context = live
            .browser
            .create_browser_context(CreateBrowserContextParams::default())
            .await
            .map_err(BrowserError::cdp)?;
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
        tabs.insert(agent.to_string(), tab.clone());
        Ok(tab)
    }

    /// Stops Chromium (the gateway is stopping); the next call starts it again.
    pub async fn stop(&self) {
        self.tabs.lock().await.clear();
        *self.running.lock().await = None;
    }
}
