//! What a model call costs: its tokens (in, out, read from and written to the provider's
//! cache) times the model's prices. Prices come from `[pricing.MODEL]`, else from the
//! built-in table of well-known models below, taken from the providers' pricing pages on
//! [`PRICES_TAKEN`] (standard tier, no batch, short context); a model in neither has no
//! cost (`None`), never a guessed one.

use std::collections::BTreeMap;

use crate::config::PriceEntry;
use crate::domain::message::Usage;

/// When the built-in prices were read off the providers' pages.
pub const PRICES_TAKEN: &str = "2026-11";

/// US dollars per million tokens: input, output, cache read, cache write.
type Rates = (f64, f64, f64, f64);

/// The built-in prices, by model name without a date suffix.
const BUILT_IN: &[(&str, Rates)] = &[
    // OpenAI (cache writes are not charged).
    ("gpt-5", (1.25, 10.0, 0.125, 1.25)),
    ("gpt-5-mini", (0.25, 2.0, 0.025, 0.25)),
    ("gpt-5-nano", (0.05, 0.40, 0.005, 0.05)),
    ("gpt-4.1", (2.0, 8.0, 0.50, 2.0)),
    ("gpt-4.1-mini", (0.40, 1.60, 0.10, 0.40)),
    ("gpt-4.1-nano", (0.10, 0.40, 0.025, 0.10)),
    ("gpt-4o", (2.50, 10.0, 1.25, 2.50)),
    ("gpt-4o-2024-05-13", (5.0, 15.0, 5.0, 5.0)),
    ("gpt-4o-mini", (0.15, 0.60, 0.075, 0.15)),
    ("o3", (2.0, 8.0, 0.50, 2.0)),
    ("o4-mini", (1.10, 4.40, 0.275, 1.10)),
    // Anthropic (5-minute cache writes).
    ("claude-opus-4-5", (5.0, 25.0, 0.50, 6.25)),
    ("claude-opus-4-1", (15.0, 75.0, 1.50, 18.75)),
    ("claude-opus-4-0", (15.0, 75.0, 1.50, 18.75)),
    ("claude-sonnet-4-5", (3.0, 15.0, 0.30, 3.75)),
    ("claude-sonnet-4-0", (3.0, 15.0, 0.30, 3.75)),
    ("claude-3-7-sonnet", (3.0, 15.0, 0.30, 3.75)),
    ("claude-haiku-4-5", (1.0, 5.0, 0.10, 1.25)),
    ("claude-3-5-haiku", (0.80, 4.0, 0.08, 1.0)),
];

/// The prices chela knows.
#[derive(Debug, Clone, Default)]
pub struct Pricing {
    configured: BTreeMap<String, PriceEntry>,
    /// The models the config names (the agent's, `[model] models`): the metrics label other
    /// names `other`, so a chat cannot make series without end. Empty: every name is kept.
    named: Vec<String>,
}

impl Pricing {
    /// `[pricing]` of the config, before the built-in table.
    pub fn new(configured: BTreeMap<String, PriceEntry>) -> Pricing {
        Pricing {
            configured,
            named: Vec::new(),
        }
    }

    /// As [`Pricing::new`], the metrics labelling only the models in `named` by name.
    pub fn with_named(configured: BTreeMap<String, PriceEntry>, named: Vec<String>) -> Pricing {
        Pricing { configured, named }
    }

    /// The metrics' label for `model`: its name when the config names it, else `other`.
    pub fn label<'a>(&self, model: &'a str) -> &'a str {
        match self.named.is_empty() || self.named.iter().any(|n| n == model) {
            true => model,
            false => "other",
        }
    }

    /// The prices of `model` of `provider`: `[pricing."provider/model"]`, `[pricing.model]`,
    /// the same without a date suffix (such as `-2025-04-14`), else the built-in table
    /// (exact name first, then without the date).
    pub fn rates(&self, provider: &str, model: &str) -> Option<Rates> {
        let bare = model.rsplit('/').next().unwrap_or(model);
        let base = undated(bare);
        let configured = [model, bare, base].iter().find_map(|name| {
            self.configured
                .get(&format!("{provider}/{name}"))
                .or_else(|| self.configured.get(*name))
        });
        if let Some(entry) = configured {
            let input = entry.input.0;
            let read = entry.cache_read.map_or(input, |r| r.0);
            let write = entry.cache_write.map_or(input, |r| r.0);
            return Some((input, entry.output.0, read, write));
        }
        [bare, base].iter().find_map(|name| {
            BUILT_IN
                .iter()
                .find(|(known, _)| known == name || aliases(known).contains(name))
                .map(|(_, rates)| *rates)
        })
    }

    /// What `usage` of `model` of `provider` cost in US dollars; `None` when its prices are
    /// not known.
    pub fn cost(&self, provider: &str, model: &str, usage: &Usage) -> Option<f64> {
        let (input, output, read, write) = self.rates(provider, model)?;
        let tokens = |n: u64, rate: f64| n as f64 * rate;
        let sum = tokens(usage.input, input)
            + tokens(usage.output, output)
            + tokens(usage.cache_read, read)
            + tokens(usage.cache_write, write);
        Some(sum / 1_000_000.0)
    }
}

/// Other names of a built-in model: Anthropic's aliases without `-0`, and the later
/// versions its pricing page lists at the same price (Opus 4.6 to 5, Sonnet 4.6).
fn aliases(name: &str) -> &'static [&'static str] {
    match name {
        "claude-opus-4-5" => &[
            "claude-opus-4-6",
            "claude-opus-4-7",
            "claude-opus-4-8",
            "claude-opus-5",
        ],
        "claude-opus-4-0" => &["claude-opus-4"],
        "claude-sonnet-4-5" => &["claude-sonnet-4-6"],
        "claude-sonnet-4-0" => &["claude-sonnet-4"],
        _ => &[],
    }
}

/// `model` without a trailing date: `-20250514`, `-2025-04-14`, `-latest`.
fn undated(model: &str) -> &str {
    if let Some(base) = model.strip_suffix("-latest") {
        return base;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((base, tail)) = model.rsplit_once('-')
        && tail.len() == 8
        && digits(tail)
    {
        return base;
    }
    let parts: Vec<&str> = model.rsplitn(4, '-').collect();
    if let [day, month, year, base] = parts.as_slice()
        && year.len() == 4
        && month.len() == 2
        && day.len() == 2
        && [day, month, year].iter().all(|p| digits(p))
    {
        return base;
    }
    model
}

/// `cost` in dollars, as short as it reads well: `$0.0012`, `$1.24`.
pub fn dollars(cost: f64) -> String {
    if cost >= 1.0 {
        format!("${cost:.2}")
    } else if cost >= 0.01 {
        format!("${cost:.3}")
    } else {
        format!("${cost:.4}")
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rate;

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: input + output + cache_read + cache_write,
        }
    }

    #[test]
    fn a_known_model_costs_its_tokens_at_its_prices() {
        let pricing = Pricing::default();
        // 1M in, 1M out, 1M cached of gpt-4.1-mini: 0.40 + 1.60 + 0.10.
        let cost = pricing
            .cost(
                "openai",
                "gpt-4.1-mini",
                &usage(1_000_000, 1_000_000, 1_000_000, 0),
            )
            .unwrap();
        assert!((cost - 2.10).abs() < 1e-9, "{cost}");
        // Dated and aliased names find their model.
        assert!(pricing.rates("openai", "gpt-4.1-mini-2025-04-14").is_some());
        assert!(
            pricing
                .rates("anthropic", "claude-sonnet-4-5-20250929")
                .is_some()
        );
        assert!(
            pricing
                .rates("anthropic", "claude-3-5-haiku-latest")
                .is_some()
        );
        assert_eq!(
            pricing.rates("anthropic", "claude-opus-4-6"),
            pricing.rates("anthropic", "claude-opus-4-5")
        );
        // A prefix is not the model: gpt-5.2 is priced apart.
        assert!(pricing.rates("openai", "gpt-5.2").is_none());
        // A snapshot priced apart keeps its own price.
        assert_eq!(
            pricing.rates("openai", "gpt-4o-2024-05-13"),
            Some((5.0, 15.0, 5.0, 5.0))
        );
        assert_eq!(
            pricing.rates("openai", "gpt-4o-2024-08-06"),
            pricing.rates("openai", "gpt-4o")
        );
        assert!(
            pricing
                .cost("ollama", "qwen3:8b", &usage(10, 10, 0, 0))
                .is_none()
        );
    }

    #[test]
    fn the_config_comes_before_the_built_in_prices() {
        let mut configured = BTreeMap::new();
        let entry = |input: f64| PriceEntry {
            input: Rate(input),
            output: Rate(2.0),
            cache_read: None,
            cache_write: Some(Rate(0.0)),
        };
        configured.insert("gpt-4.1-mini".to_owned(), entry(1.0));
        configured.insert("local/qwen3".to_owned(), entry(0.0));
        let pricing = Pricing::new(configured);
        assert_eq!(
            pricing.rates("openai", "gpt-4.1-mini"),
            Some((1.0, 2.0, 1.0, 0.0))
        );
        assert_eq!(pricing.rates("local", "qwen3"), Some((0.0, 2.0, 0.0, 0.0)));
        assert_eq!(pricing.rates("other", "qwen3"), None);
        // A configured name covers its dated snapshots too.
        assert_eq!(
            pricing.rates("openai", "gpt-4.1-mini-2025-04-14"),
            Some((1.0, 2.0, 1.0, 0.0))
        );
    }

    #[test]
    fn the_metrics_name_only_the_models_the_config_names() {
        let pricing = Pricing::with_named(BTreeMap::new(), vec!["gpt-4.1-mini".into()]);
        assert_eq!(pricing.label("gpt-4.1-mini"), "gpt-4.1-mini");
        assert_eq!(pricing.label("gpt-4o-00000001"), "other");
        assert_eq!(Pricing::default().label("anything"), "anything");
    }

    #[test]
    fn dates_come_off_and_costs_read_short() {
        assert_eq!(undated("claude-sonnet-4-20250514"), "claude-sonnet-4");
        assert_eq!(undated("gpt-4o-2024-08-06"), "gpt-4o");
        assert_eq!(undated("gpt-4o"), "gpt-4o");
        assert_eq!(undated("o4-mini"), "o4-mini");
        assert_eq!(dollars(0.000_42), "$0.0004");
        assert_eq!(dollars(0.042), "$0.042");
        assert_eq!(dollars(12.5), "$12.50");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
