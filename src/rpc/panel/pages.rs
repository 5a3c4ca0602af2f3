//! The read pages: overview, sessions, pairing requests, ACP bindings, dead letters, config.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::http::StatusCode;
use axum::response::Response;

use super::super::methods::Role;
use super::html::{Viewer, esc, page, query_value, table, time};
use super::page::{Page, PageError};
use super::{Panel, transcript};
use crate::domain::message::now_ms;
use crate::domain::text::quoted;
use crate::lane::LaneSettings;

/// Most sessions listed on one sessions page.
pub(super) const SESSIONS_SHOWN: usize = 100;

/// `GET path`: the page, or the live event stream.
pub(super) async fn get(
    panel: &Panel,
    viewer: &Viewer<'_>,
    path: &str,
    query: &HashMap<String, String>,
) -> Response {
    let made = match path {
        "/panel" => overview(panel).await,
        "/panel/sessions" => sessions(panel, query),
        "/panel/session" => transcript::session(panel, viewer, query),
        "/panel/live" => transcript::live(panel, viewer, query).await,
        "/panel/pairing" => pairing(panel, viewer),
        "/panel/bindings" => bindings(panel, viewer),
        "/panel/dead" => dead(panel, viewer),
        "/panel/config" if viewer.role == Role::Client => Ok((
            "Config".to_owned(),
            "<p class=problem>The configuration needs the operator token: log in with the token of <code>&lt;store.path&gt;.rpc</code>.</p>".to_owned(),
        )),
        "/panel/config" => config(panel),
        _ => {
            let body = page(viewer, "Not found", "<p>No such page.</p>");
            return super::html(StatusCode::NOT_FOUND, body);
        }
    };
    match made {
        Ok((title, body)) => super::html(StatusCode::OK, page(viewer, &title, &body)),
        Err(e) => {
            let status = match e {
                PageError::NotFound(_) => StatusCode::NOT_FOUND,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let body = format!("<p class=problem>{}</p>", esc(&e.to_string()));
            super::html(status, page(viewer, "Error", &body))
        }
    }
}

/// The resident memory of this process in KiB (Linux; `None` elsewhere).
pub(super) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `3d 4h`, `5h 2m`, `7m 3s`.
fn span(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// The "MCP servers" section of the overview (empty when none is configured): each server's
/// transport, state, restarts and tools.
fn mcp_servers(status: &serde_json::Value) -> String {
    let Some(servers) = status["mcp"].as_array().filter(|s| !s.is_empty()) else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = servers
        .iter()
        .map(|server| {
            let text = |field: &str| server[field].as_str().unwrap_or_default().to_owned();
            let state = text("state");
            let class = if state == "ready" { "ok" } else { "problem" };
            let tools: Vec<&str> = (server["tools"].as_array().into_iter().flatten())
                .filter_map(|t| t.as_str())
                .collect();
            vec![
                esc(&text("name")),
                esc(&text("transport")),
                format!("<span class={class}>{}</span>", esc(&state)),
                server["restarts"].as_u64().unwrap_or(0).to_string(),
                esc(&tools.join(", ")),
            ]
        })
        .collect();
    let head = ["server", "transport", "state", "restarts", "tools"];
    format!("<h2>MCP servers</h2>{}", table(&head, &rows))
}

/// Overview: channels, live runs, queues, undelivered replies, dead letters, uptime, memory.
async fn overview(panel: &Panel) -> Page {
    let status = panel
        .api
        .status()
        .await
        .map_err(|f| PageError::Gateway(f.message))?;
    let n = |field: &str| status[field].as_u64().unwrap_or(0);
    let strings = |field: &str| -> Vec<String> {
        status[field]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let live = strings("liveRuns");
    let memory = rss_kib().map_or("?".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    let cards = [
        ("Uptime", span(panel.started.elapsed().as_secs())),
        ("Memory (RSS)", memory),
        ("Sessions", n("sessions").to_string()),
        ("Live runs", live.len().to_string()),
        ("Pending turns", n("pendingTotal").to_string()),
        ("Undelivered replies", n("undelivered").to_string()),
        ("Dead letters", n("deadTotal").to_string()),
    ];
    let mut body = String::from("<div class=cards>");
    for (label, value) in cards {
        let _ = write!(
            body,
            "<div class=card><span>{}</span><b>{}</b></div>",
            esc(label),
            esc(&value)
        );
    }
    body.push_str("</div><h2>Channels</h2>");
    // Connected to the platform (or, in a cluster, on standby while another node holds
    // its intake), as `/readyz` sees it.
    let channels: Vec<Vec<String>> = panel
        .api
        .readiness()
        .await
        .channels
        .iter()
        .map(|(name, up)| {
            let state = match up {
                true => "<span class=ok>connected</span>",
                false => "<span class=problem>not connected</span>",
            };
            vec![esc(name), state.to_owned()]
        })
        .collect();
    body.push_str(&table(&["channel", "state"], &channels));
    body.push_str(&mcp_servers(&status));
    body.push_str(&super::nodes::section(&status));
    body.push_str("<h2>Live runs</h2>");
    let runs: Vec<Vec<String>> = live
        .iter()
        .map(|key| {
            vec![format!(
                "<a href=\"/panel/live?session={q}\">{k}</a>",
                q = query_value(key),
                k = esc(key)
            )]
        })
        .collect();
    body.push_str(&table(&["session"], &runs));
    body.push_str("<h2>Queue depths</h2>");
    let queues: Vec<Vec<String>> = status["queues"]
        .as_object()
        .map(|q| {
            q.iter()
                .map(|(k, v)| vec![esc(k), v.as_u64().unwrap_or(0).to_string()])
                .collect()
        })
        .unwrap_or_default();
    body.push_str(&table(&["session", "pending"], &queues));
    if let Some(store) = status["store"].as_str() {
        let _ = write!(body, "<p class=hint>Store: {}</p>", esc(store));
    }
    Ok(("Overview".to_owned(), body))
}

/// Sessions: the most recently active first, filtered by `q` (part of the key).
fn sessions(panel: &Panel, query: &HashMap<String, String>) -> Page {
    let store = panel.api.store();
    let config = panel.api.config();
    let q = query
        .get("q")
        .map(|q| q.trim().to_lowercase())
        .unwrap_or_default();
    let mut all = store.list_sessions()?;
    let total = all.len();
    all.retain(|s| q.is_empty() || s.key.to_lowercase().contains(&q));
    let matching = all.len();
    all.sort_by_key(|s| std::cmp::Reverse(s.updated_ms));
    let default_model = match config.model.model.trim() {
        "" => "(provider default)".to_owned(),
        m => m.to_owned(),
    };
    let rows: Vec<Vec<String>> = all
        .iter()
        .take(SESSIONS_SHOWN)
        .map(|s| {
            let model = crate::agent::model_choice::chosen(store, &s.key)
                .or_else(|| agent_model(config, &s.key))
                .unwrap_or_else(|| default_model.clone());
            let mode = store
                .get_settings::<LaneSettings>(&s.key)
                .ok()
                .flatten()
                .map_or(config.queue.mode, |l| l.mode);
            let mode = serde_json::to_value(mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            vec![
                format!(
                    "<a href=\"/panel/session?key={}\">{}</a>",
                    query_value(&s.key),
                    esc(&s.key)
                ),
                esc(&time(s.updated_ms)),
                s.entries.to_string(),
                esc(&model),
                esc(&mode),
            ]
        })
        .collect();
    let mut body = format!(
        "<form class=search method=get action=\"/panel/sessions\"><input name=q type=search \
placeholder=\"part of a session key\" value=\"{}\"><button>Search</button></form>\
<p class=hint>{} of {matching} matching ({total} in all), most recent first.</p>",
        esc(&q),
        rows.len()
    );
    body.push_str(&table(
        &[
            "session",
            "last activity (UTC)",
            "entries",
            "model",
            "queue mode",
        ],
        &rows,
    ));
    Ok(("Sessions".to_owned(), body))
}

/// Pairing requests waiting, with approve and reject.
fn pairing(panel: &Panel, viewer: &Viewer<'_>) -> Page {
    let requests = panel.api.store().pairing_requests(now_ms())?;
    let rows: Vec<Vec<String>> = requests
        .iter()
        .map(|r| {
            let fields = [("channel", r.channel.as_str()), ("code", r.code.as_str())];
            vec![
                esc(&r.channel),
                format!("<code>{}</code>", esc(&r.code)),
                format!(
                    "name {} <small>(unverified, as the sender chose it)</small> (id {})",
                    esc(&quoted(&r.sender_name)),
                    esc(&r.sender_id)
                ),
                esc(&time(r.created_ms)),
                format!(
                    "{} {}",
                    viewer.button("/panel/pairing/approve", &fields, "Approve", true),
                    viewer.button("/panel/pairing/reject", &fields, "Reject", true)
                ),
            ]
        })
        .collect();
    let body = table(&["channel", "code", "sender", "asked (UTC)", ""], &rows);
    Ok(("Pairing requests".to_owned(), body))
}

/// ACP bindings, with close.
fn bindings(panel: &Panel, viewer: &Viewer<'_>) -> Page {
    let bindings = panel.api.store().list_bindings()?;
    let rows: Vec<Vec<String>> = bindings
        .iter()
        .map(|b| {
            let state = match &b.acp_session_id {
                Some(_) => "agent session open",
                None => "bound, not started",
            };
            vec![
                esc(&b.session_key),
                esc(&b.harness),
                format!("<code>{}</code>", esc(&b.cwd.display().to_string())),
                format!("{state}, active {}", esc(&time(b.last_active_ms))),
                viewer.button(
                    "/panel/bindings/close",
                    &[("key", b.session_key.as_str())],
                    "Close",
                    true,
                ),
            ]
        })
        .collect();
    let body = table(&["session", "harness", "folder", "state", ""], &rows);
    Ok(("ACP bindings".to_owned(), body))
}

/// Dead letters, each with retry and drop (operator).
fn dead(panel: &Panel, viewer: &Viewer<'_>) -> Page {
    let dead = panel.api.store().dead_letters()?;
    let rows: Vec<Vec<String>> = dead
        .iter()
        .map(|d| {
            let preview: String = d.text.chars().take(120).collect();
            vec![
                d.id.to_string(),
                esc(&d.session_key),
                esc(&time(d.created_ms)),
                d.attempts.to_string(),
                esc(&preview),
                format!(
                    "{} {}",
                    viewer.button(
                        "/panel/dead/retry",
                        &[("id", &d.id.to_string())],
                        "Retry",
                        true
                    ),
                    viewer.button(
                        "/panel/dead/drop",
                        &[("id", &d.id.to_string())],
                        "Drop",
                        true
                    )
                ),
            ]
        })
        .collect();
    let mut body = String::from(
        "<p class=hint>Replies that could not be delivered within <code>[delivery] ttl</code>. \
Retry sends one again (its time to live starts anew); drop forgets it.</p>",
    );
    body.push_str(&table(
        &["id", "session", "recorded (UTC)", "attempts", "text", ""],
        &rows,
    ));
    Ok(("Dead letters".to_owned(), body))
}

/// The effective configuration, secrets hidden (operator only).
fn config(panel: &Panel) -> Page {
    let text = toml::to_string(&panel.api.config().redacted())
        .map_err(|e| PageError::Gateway(format!("cannot show the configuration: {e}")))?;
    let body = format!(
        "<p class=hint>Tokens, keys and passwords are hidden.</p><pre>{}</pre>",
        esc(&mask(&text))
    );
    Ok(("Config".to_owned(), body))
}

/// `text` (TOML) with the value of every key that names a secret masked, besides what
/// `Config::redacted` hides already. A key names a secret when one of its words (split at
/// `_`, `-` and `.`) is one: `api_key`, `GITHUB_TOKEN`, not `max_tokens`.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.split_once('=') {
            Some((name, value))
                if names_a_secret(name) && !matches!(value.trim(), "\"\"" | "[]" | "{}") =>
            {
                let _ = writeln!(out, "{name}= \"<hidden>\"");
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Whether TOML key `name` names a secret (a word of it is one).
fn names_a_secret(name: &str) -> bool {
    const SECRET: [&str; 8] = [
        "token",
        "key",
        "apikey",
        "password",
        "passwd",
        "secret",
        "credential",
        "credentials",
    ];
    let name = name.trim().trim_matches('"').to_lowercase();
    name.split(['_', '-', '.'])
        .any(|word| SECRET.contains(&word))
}

/// The model of session `key`'s agent when an `[[agents]]` entry sets one.
fn agent_model(config: &crate::config::Config, key: &str) -> Option<String> {
    let agent = crate::domain::session_key::SessionKey::parse(key)
        .ok()?
        .agent;
    config.agents.iter().find(|a| a.id == agent)?.model.clone()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_are_masked_and_empty_ones_left_as_they_are() {
        let text = "[model]\napi_key = \"sk-123\"\nmodel = \"gpt\"\n[rpc]\ntoken = \"\"\nwebhook_secret = \"x\"\n";
        let masked = mask(text);
        assert!(
            !masked.contains("sk-123") && !masked.contains("\"x\""),
            "{masked}"
        );
        assert!(masked.contains("model = \"gpt\"") && masked.contains("token = \"\""));
        let kept = mask("max_tokens = 4096\nkeep_alive = 5\nGITHUB_TOKEN = \"ghp\"\n");
        assert!(kept.contains("max_tokens = 4096"), "{kept}");
        assert!(kept.contains("keep_alive = 5"), "{kept}");
        assert!(!kept.contains("ghp"), "{kept}");
    }

    #[test]
    fn spans_read_like_uptimes() {
        assert_eq!(span(5), "5s");
        assert_eq!(span(125), "2m 5s");
        assert_eq!(span(7300), "2h 1m");
        assert_eq!(span(90000), "1d 1h");
    }
}
