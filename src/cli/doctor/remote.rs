//! `chela doctor`'s network check of the model server (and whether it serves the model); the
//! chat platforms' checks are their entries' in [`crate::cli::platforms`].

use chela::config::ProviderKind;

/// The outcome of one check: whether it passed, and what to print.
pub use crate::cli::platforms::Verdict;

/// Asks the provider's model list (needs the key, costs no tokens) and looks for `model`.
pub async fn model_served(
    kind: ProviderKind,
    base: &str,
    key: Option<&str>,
    model: &str,
) -> Verdict {
    let client = match crate::cli::platforms::http_client() {
        Ok(c) => c,
        Err(e) => return (false, e),
    };
    let (url, request) = match kind {
        ProviderKind::Anthropic => {
            let url = format!("{}/v1/models", base.trim_end_matches("/v1"));
            let mut req = client.get(&url).header("anthropic-version", "2023-06-01");
            if let Some(key) = key {
                req = req.header("x-api-key", key);
            }
            (url, req)
        }
        _ => {
            let url = format!("{base}/models");
            let mut req = client.get(&url);
            if let Some(key) = key {
                req = req.bearer_auth(key);
            }
            (url, req)
        }
    };
    match request.send().await {
        Ok(resp) if resp.status().is_success() => {
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            served(&body, model)
        }
        Ok(resp) if resp.status().as_u16() == 401 || resp.status().as_u16() == 403 => (
            false,
            format!(
                "{url} refused the API key ({}); check the key",
                resp.status()
            ),
        ),
        Ok(resp) => (
            true,
            format!("reachable, but {url} answered {}", resp.status()),
        ),
        Err(e) => (
            false,
            format!("cannot reach {url}: {e}; is the server running? set model.base_url"),
        ),
    }
}

/// Whether the model list `body` (`{"data": [{"id": ...}]}`) has `model`: as listed, with
/// Ollama's `:latest` tag, or as an alias of a dated id (`claude-sonnet-4-5-20250929`).
fn served(body: &serde_json::Value, model: &str) -> Verdict {
    let Some(list) = body["data"].as_array() else {
        return (true, "reachable (its model list could not be read)".into());
    };
    let ids: Vec<&str> = list.iter().filter_map(|m| m["id"].as_str()).collect();
    let matches = |id: &str| {
        id == model
            || id.strip_suffix(":latest") == Some(model)
            || id
                .strip_prefix(model)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|date| !date.is_empty() && date.chars().all(|c| c.is_ascii_digit()))
    };
    if ids.iter().any(|id| matches(id)) {
        return (true, "reachable, serves it".into());
    }
    let mut shown = ids.iter().take(10).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > 10 {
        shown.push_str(&format!(", ... ({} in all)", ids.len()));
    }
    if shown.is_empty() {
        shown = "none".into();
    }
    (
        false,
        format!(
            "reachable, but it does not serve {model:?}; it lists: {shown} \
             (set model.model or CHELA_MODEL to one of them)"
        ),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::served;

    #[test]
    fn a_model_is_served_as_listed_tagged_latest_or_dated() {
        let body = json!({"data": [
            {"id": "llama3.2:latest"}, {"id": "claude-sonnet-4-5-20250929"}, {"id": "gpt-4.1"}
        ]});
        for model in [
            "llama3.2",
            "llama3.2:latest",
            "claude-sonnet-4-5",
            "gpt-4.1",
        ] {
            assert!(served(&body, model).0, "{model}");
        }
        for model in ["llama3", "gpt-4.1-mini", "claude-sonnet-4"] {
            let (good, detail) = served(&body, model);
            assert!(!good, "{model}");
            assert!(
                detail.contains("llama3.2:latest, claude-sonnet"),
                "{detail}"
            );
        }
        assert!(
            served(&json!({"object": "list"}), "x").0,
            "no list: not a failure"
        );
    }
}
