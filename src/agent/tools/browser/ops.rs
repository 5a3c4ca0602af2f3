//! What each action does to an agent's tab, over the DevTools protocol: load a URL, read the
//! page (its accessibility outline or its text), click or type into a node by reference,
//! take a screenshot.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::{CaptureScreenshotFormat, NavigateParams};
use chromiumoxide::cdp::js_protocol::runtime::CallFunctionOnParams;
use chromiumoxide::page::ScreenshotParams;

use super::BrowserError;
use super::engine::Tab;
use super::snapshot;

/// How long after a click or a submit the page is given to start loading.
const SETTLE: Duration = Duration::from_millis(300);

/// Loads `url` and waits (at most `timeout`) for it.
pub async fn navigate(tab: &mut Tab, url: &str, timeout: Duration) -> Result<(), BrowserError> {
    tab.refs.clear();
    let params = NavigateParams::builder()
        .url(url)
        .build()
        .map_err(BrowserError::Cdp)?;
    let loaded = tokio::time::timeout(timeout, tab.page.goto(params)).await;
    match loaded {
        Err(_) => Err(BrowserError::Timeout),
        Ok(Err(e)) => Err(BrowserError::cdp(e)),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Where the tab is: its URL and title.
pub async fn location(tab: &Tab) -> (String, String) {
    let url = tab.page.url().await.ok().flatten().unwrap_or_default();
    let title = tab
        .page
        .get_title()
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    (url, title)
}

/// The page's accessibility outline (at most `max_chars`); its references replace the
/// tab's.
pub async fn outline(tab: &mut Tab, max_chars: usize) -> Result<String, BrowserError> {
    let tree = tab
        .page
        .execute(GetFullAxTreeParams::default())
        .await
        .map_err(BrowserError::cdp)?;
    let nodes: Vec<serde_json::Value> = tree
        .result
        .nodes
        .iter()
        .filter_map(|node| serde_json::to_value(node).ok())
        .collect();
    let outline = snapshot::outline(&nodes, max_chars);
    tab.refs = outline.refs;
    Ok(outline.text)
}

/// The page's visible text (`innerText`), at most `max_chars`.
pub async fn text(tab: &Tab, max_chars: usize) -> Result<String, BrowserError> {
    // Cut in the page, so a huge page never crosses the protocol whole.
    let script = format!(
        "(() => {{ const t = document.body ? document.body.innerText : ''; \
         return JSON.stringify([t.length, t.slice(0, {max_chars})]); }})()"
    );
    let value = tab.page.evaluate(script).await.map_err(BrowserError::cdp)?;
    let json = value.into_value::<String>().unwrap_or_default();
    let (total, text): (usize, String) = serde_json::from_str(&json).unwrap_or_default();
    let mut out: String = text.chars().take(max_chars).collect();
    if total > out.chars().count() {
        out.push_str(&format!("\n… (cut: the page has {total} characters)"));
    }
    Ok(out)
}

/// Clicks the node of `reference` (scrolled into view first), then lets the page settle.
pub async fn click(tab: &Tab, reference: &str, timeout: Duration) -> Result<(), BrowserError> {
    call_on(
        tab,
        reference,
        "function() { this.scrollIntoView({block: 'center'}); this.click(); }",
    )
    .await?;
    settle(tab, timeout).await;
    Ok(())
}

/// Types `text` into the node of `reference` (its content replaced), then with `submit`
/// presses Enter and lets the page settle.
pub async fn type_text(
    tab: &Tab,
    reference: &str,
    text: &str,
    submit: bool,
    timeout: Duration,
) -> Result<(), BrowserError> {
    call_on(
        tab,
        reference,
        "function() { this.scrollIntoView({block: 'center'}); this.focus(); if (typeof this.select === 'function') this.select(); }",
    )
    .await?;
    let insert = InsertTextParams::new(text);
    tab.page.execute(insert).await.map_err(BrowserError::cdp)?;
    if submit {
        for kind in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
            let mut key = DispatchKeyEventParams::builder()
                .r#type(kind.clone())
                .key("Enter")
                .code("Enter")
                .windows_virtual_key_code(13);
            if kind == DispatchKeyEventType::KeyDown {
                key = key.text("\r");
            }
            let key = key.build().map_err(BrowserError::Cdp)?;
            tab.page.execute(key).await.map_err(BrowserError::cdp)?;
        }
        settle(tab, timeout).await;
    }
    Ok(())
}

/// A JPEG (quality [`JPEG_QUALITY`]) of what the tab shows: a fraction of a PNG's bytes,
/// which matters as each one goes to the model.
pub async fn screenshot(tab: &Tab) -> Result<Vec<u8>, BrowserError> {
    let params = ScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Jpeg)
        .quality(JPEG_QUALITY)
        .build();
    tab.page.screenshot(params).await.map_err(BrowserError::cdp)
}

/// The JPEG quality of screenshots.
pub const JPEG_QUALITY: i64 = 80;

/// Runs `function` with the node of `reference` as `this`.
async fn call_on(tab: &Tab, reference: &str, function: &str) -> Result<(), BrowserError> {
    let backend = *tab
        .refs
        .get(reference)
        .ok_or_else(|| BrowserError::NoRef(reference.to_string()))?;
    let resolve = ResolveNodeParams::builder()
        .backend_node_id(BackendNodeId::new(backend))
        .build();
    let node = tab
        .page
        .execute(resolve)
        .await
        .map_err(|_| BrowserError::Stale(reference.to_string()))?;
    let object = node
        .result
        .object
        .object_id
        .clone()
        .ok_or_else(|| BrowserError::Stale(reference.to_string()))?;
    let call = CallFunctionOnParams::builder()
        .function_declaration(function)
        .object_id(object)
        .build()
        .map_err(BrowserError::Cdp)?;
    let done = tab.page.execute(call).await.map_err(BrowserError::cdp)?;
    if let Some(thrown) = &done.result.exception_details {
        return Err(BrowserError::Cdp(format!(
            "the page threw: {}",
            thrown.text
        )));
    }
    Ok(())
}

/// Waits a moment, then (at most `timeout`) until the document is loaded.
async fn settle(tab: &Tab, timeout: Duration) {
    tokio::time::sleep(SETTLE).await;
    let ready = async {
        loop {
            let state = tab
                .page
                .evaluate("document.readyState")
                .await
                .ok()
                .and_then(|v| v.into_value::<String>().ok());
            if state.as_deref() == Some("complete") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let _ = tokio::time::timeout(timeout, ready).await;
}
