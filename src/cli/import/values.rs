//! Reading single values of OpenClaw's `openclaw.json`, for the config and the agents.

use serde_json::Value;

/// A path in OpenClaw's config: one under `~/.openclaw/` is taken to be under `dir`.
pub fn openclaw_path(path: &str, dir: &std::path::Path) -> String {
    match path.strip_prefix("~/.openclaw/") {
        Some(rest) => dir.join(rest).display().to_string(),
        None => path.to_string(),
    }
}

/// `provider/model` from a model setting (a string or `{ primary }`).
pub fn model_ref(model: &Value) -> Option<String> {
    model
        .as_str()
        .or_else(|| model["primary"].as_str())
        .map(str::to_string)
}
