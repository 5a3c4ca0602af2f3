//! `[tools.browser]`: the `browser` tool's Chromium, its limits and its viewport. Which
//! addresses it may reach is `[tools.web]`'s rule (`allow_private`, `allow_hosts`).

use serde::{Deserialize, Serialize};

/// `[tools.browser]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowserConfig {
    /// Whether the agent gets the `browser` tool (it starts Chromium at its first use).
    pub enabled: bool,
    /// The Chromium (or Chrome) program; empty: the first of `chromium`, `chromium-browser`,
    /// `google-chrome`, `google-chrome-stable` found on `PATH`.
    pub executable: String,
    /// Seconds one browser action may take (a navigation waits at most this for the load).
    #[serde(deserialize_with = "super::lenient::secs")]
    pub timeout_s: u64,
    /// Most chars of page text or snapshot one call returns.
    pub max_chars: usize,
    /// The page's width in CSS pixels (screenshots are this wide).
    pub width: u32,
    /// The page's height in CSS pixels.
    pub height: u32,
    /// Whether Chromium runs under Landlock with chela's config, store and token files hidden
    /// from it (where the kernel has Landlock).
    pub landlock: bool,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            executable: String::new(),
            timeout_s: 30,
            max_chars: 20_000,
            width: 1280,
            height: 800,
            landlock: true,
        }
    }
}

impl BrowserConfig {
    /// Checks the limits; the error names the key.
    pub fn check(&self) -> Result<(), (String, String)> {
        let positive = [
            ("tools.browser.timeout_s", self.timeout_s),
            ("tools.browser.max_chars", self.max_chars as u64),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err((key.into(), "must be at least 1".into()));
            }
        }
        for (key, value) in [
            ("tools.browser.width", self.width),
            ("tools.browser.height", self.height),
        ] {
            if !(200..=4000).contains(&value) {
                return Err((key.into(), format!("{value} is outside 200 to 4000 pixels")));
            }
        }
        Ok(())
    }
}
