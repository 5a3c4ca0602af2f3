//! `[pricing.MODEL]`: what a model's tokens cost, in US dollars per million tokens, for the
//! cost `/usage`, the terminal and the metrics show. Entries here come before the built-in
//! prices of well-known models (`agent::pricing`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// US dollars per million tokens (a float; compared bit for bit so the config stays `Eq`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate(pub f64);

impl PartialEq for Rate {
    fn eq(&self, other: &Rate) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Rate {}

/// The prices of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceEntry {
    /// Prompt tokens not read from a cache.
    pub input: Rate,
    /// Completion tokens (reasoning included).
    pub output: Rate,
    /// Prompt tokens read from the provider's cache; unset: `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<Rate>,
    /// Prompt tokens written to the provider's cache; unset: `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<Rate>,
}

/// The key of the first rate of `pricing` that is negative, infinite or not a number.
pub fn wrong_rate(pricing: &BTreeMap<String, PriceEntry>) -> Option<String> {
    pricing.iter().find_map(|(model, entry)| {
        let rates = [
            ("input", Some(entry.input)),
            ("output", Some(entry.output)),
            ("cache_read", entry.cache_read),
            ("cache_write", entry.cache_write),
        ];
        rates.iter().find_map(|(name, rate)| {
            let wrong = rate.is_some_and(|r| !r.0.is_finite() || r.0 < 0.0);
            wrong.then(|| format!("pricing.{model}.{name}"))
        })
    })
}
