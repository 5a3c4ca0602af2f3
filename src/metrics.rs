//! The gateway's metrics, served as `/metrics` on the RPC listener (OpenMetrics text, which
//! Prometheus reads). Counters and histograms are bumped where the thing happens (an atomic
//! add, a label lookup among a handful of channel names); gauges of state (pending turns, ACP
//! processes, store size, channel connections) are read when scraped ([`Gauges`]). Labels
//! are small fixed sets: channel names ([`channel_label`]) and run outcomes, never a chat id
//! or a session key. The bottom layer: it names no other module of chela.

use std::sync::{LazyLock, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChannelLabel {
    channel: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabel {
    provider: String,
    model: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkipLabel {
    provider: String,
    model: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabel {
    provider: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// The channels that always exist; the platforms' channels are registered as the gateway
/// starts them ([`register_channel`]).
const BUILT_IN_CHANNELS: &[&str] = &["terminal", "rpc", "subagent"];

/// The channel names registered so far (each leaked once: a handful per process).
static CHANNELS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// Makes `name` a channel label of its own (the gateway registers each channel it runs, so a
/// new platform needs no change here). Names are few and fixed by the code, never input.
pub fn register_channel(name: &str) {
    let mut names = CHANNELS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !BUILT_IN_CHANNELS.contains(&name) && !names.contains(&name) {
        names.push(Box::leak(name.to_owned().into_boxed_str()));
    }
}

/// The label of channel `name`: a built-in or registered channel's name, `other` for
/// anything else (so a label never grows with input).
pub fn channel_label(name: &str) -> &'static str {
    if let Some(known) = BUILT_IN_CHANNELS.iter().find(|n| **n == name) {
        return known;
    }
    let names = CHANNELS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    names
        .iter()
        .find(|n| **n == name)
        .copied()
        .unwrap_or("other")
}

/// How a run ended, as the `outcome` label of `chela_runs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The model (or coding agent) finished.
    Ok,
    /// Stopped: `/stop`, an interrupt, shutdown.
    Cancelled,
    /// Hit the run timeout.
    TimedOut,
    /// Failed in any other way.
    Error,
}

impl RunOutcome {
    fn label(self) -> &'static str {
        match self {
            RunOutcome::Ok => "ok",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::TimedOut => "timed_out",
            RunOutcome::Error => "error",
        }
    }
}

/// State read when `/metrics` is scraped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Turns queued durably and not yet answered (`None`: the store could not be read).
    pub pending_turns: Option<u64>,
    /// Live coding-agent processes.
    pub acp_sessions: u64,
    /// Bytes the store takes: its files on disk, or its tables in PostgreSQL (`None`:
    /// unreadable).
    pub store_bytes: Option<u64>,
    /// Each running channel and whether it is connected to its platform.
    pub channels: Vec<(String, bool)>,
}

/// What `/readyz` reports: ready when the store answers and every channel is connected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Why the store does not answer, if it does not.
    pub store_error: Option<String>,
    /// Each running channel and whether it is connected to its platform.
    pub channels: Vec<(String, bool)>,
}

impl Readiness {
    /// What is not ready, one short line each (empty: ready).
    pub fn not_ready(&self) -> Vec<String> {
        let store = self.store_error.iter().map(|e| format!("store: {e}"));
        let channels = self
            .channels
            .iter()
            .filter(|(_, up)| !up)
            .map(|(name, _)| format!("channel {name}: not connected"));
        store.chain(channels).collect()
    }
}

/// Bytes the files at `path` take (a file, or a folder and everything in it; symlinks are
/// not followed).
pub fn disk_usage(path: &std::path::Path) -> std::io::Result<u64> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Ok(meta.len());
    }
    let mut total = 0u64;
    let mut folders = vec![path.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            match meta.is_dir() {
                true => folders.push(entry.path()),
                false => total = total.saturating_add(meta.len()),
            }
        }
    }
    Ok(total)
}

/// The metrics of one process.
pub struct Metrics {
    registry: Registry,
    inbound: Family<ChannelLabel, Counter>,
    replies: Family<ChannelLabel, Counter>,
    runs: Family<OutcomeLabel, Counter>,
    rate_limited: Family<ChannelLabel, Counter>,
    retries: Family<ChannelLabel, Counter>,
    dead_letters: Family<ChannelLabel, Counter>,
    model_seconds: Histogram,
    model_tokens: Family<TokenLabel, Counter>,
    model_cost: Family<ModelLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    model_answers: Family<ModelLabel, Counter>,
    model_skips: Family<SkipLabel, Counter>,
    first_text_seconds: Histogram,
    pending_turns: Gauge,
    acp_sessions: Gauge,
    store_bytes: Gauge,
    connected: Family<ChannelLabel, Gauge>,
    /// One scrape at a time sets the gauges and encodes.
    scrape: Mutex<()>,
}

static GLOBAL: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

/// Seconds buckets from 50 ms to about 100 s.
fn seconds_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 12))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh set, all zero (the process has [`global`]; tests make their own).
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let metrics = Metrics {
            inbound: Family::default(),
            replies: Family::default(),
            runs: Family::default(),
            rate_limited: Family::default(),
            retries: Family::default(),
            dead_letters: Family::default(),
            model_seconds: seconds_buckets(),
            model_tokens: Family::default(),
            model_cost: Family::default(),
            model_answers: Family::default(),
            model_skips: Family::default(),
            first_text_seconds: seconds_buckets(),
            pending_turns: Gauge::default(),
            acp_sessions: Gauge::default(),
            store_bytes: Gauge::default(),
            connected: Family::default(),
            scrape: Mutex::new(()),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "chela_inbound_messages",
            "Messages taken in (new turns and commands; a redelivered platform message counts once), by channel",
            metrics.inbound.clone(),
        );
        r.register(
            "chela_replies_delivered",
            "Final replies delivered, by channel",
            metrics.replies.clone(),
        );
        r.register("chela_runs", "Runs ended, by outcome", metrics.runs.clone());
        r.register(
            "chela_platform_rate_limited",
            "Platform calls answered 429 (rate limited), by channel",
            metrics.rate_limited.clone(),
        );
        r.register(
            "chela_delivery_retries",
            "Final reply delivery attempts that failed and were retried, by channel",
            metrics.retries.clone(),
        );
        r.register(
            "chela_dead_letters",
            "Final replies moved to the dead letters, by channel",
            metrics.dead_letters.clone(),
        );
        r.register(
            "chela_model_call_duration_seconds",
            "Model calls, from the request to the end of the streamed answer",
            metrics.model_seconds.clone(),
        );
        r.register(
            "chela_model_tokens",
            "Tokens of model calls, by provider, model and kind (input, output, cache_read, cache_write)",
            metrics.model_tokens.clone(),
        );
        r.register(
            "chela_model_cost_usd",
            "What model calls cost in US dollars, by provider and model (calls of models with a known price)",
            metrics.model_cost.clone(),
        );
        r.register(
            "chela_model_answers",
            "Model calls answered (the first event came), by the provider and model that answered",
            metrics.model_answers.clone(),
        );
        r.register(
            "chela_model_skips",
            "Models skipped for a call (the next fallback was tried), by provider, model and reason (rate_limited, auth, not_found, overloaded, server_error, timeout, unreachable, broken, resting, error)",
            metrics.model_skips.clone(),
        );
        r.register(
            "chela_first_text_seconds",
            "From a message accepted to the first text of its reply visible on the platform",
            metrics.first_text_seconds.clone(),
        );
        r.register(
            "chela_pending_turns",
            "Turns queued durably and not yet answered (queue depth)",
            metrics.pending_turns.clone(),
        );
        r.register(
            "chela_acp_sessions",
            "Live coding-agent (ACP) processes",
            metrics.acp_sessions.clone(),
        );
        r.register(
            "chela_store_size_bytes",
            "Bytes the store takes: its files on disk, or its tables in PostgreSQL",
            metrics.store_bytes.clone(),
        );
        r.register(
            "chela_channel_connected",
            "1 while the channel is connected to its platform, else 0",
            metrics.connected.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// A message came in on `channel`.
    pub fn inbound(&self, channel: &str) {
        self.count(&self.inbound, channel);
    }

    /// A final reply was delivered on `channel`.
    pub fn reply_delivered(&self, channel: &str) {
        self.count(&self.replies, channel);
    }

    /// A platform call on `channel` was answered 429.
    pub fn rate_limited(&self, channel: &str) {
        self.count(&self.rate_limited, channel);
    }

    /// A final reply's delivery on `channel` failed and will be retried.
    pub fn delivery_retry(&self, channel: &str) {
        self.count(&self.retries, channel);
    }

    /// A final reply on `channel` went to the dead letters.
    pub fn dead_letter(&self, channel: &str) {
        self.count(&self.dead_letters, channel);
    }

    /// A run ended with `outcome`.
    pub fn run_ended(&self, outcome: RunOutcome) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.label(),
            })
            .inc();
    }

    /// A model call took `seconds`.
    pub fn model_call(&self, seconds: f64) {
        self.model_seconds.observe(seconds);
    }

    /// A model call of `model` of `provider` used `tokens` (by kind: `input`, `output`,
    /// `cache_read`, `cache_write`) and cost `cost` dollars (`None`: its price is not known).
    pub fn model_tokens(
        &self,
        provider: &str,
        model: &str,
        tokens: &[(&str, u64)],
        cost: Option<f64>,
    ) {
        for &(kind, n) in tokens.iter().filter(|(_, n)| *n > 0) {
            let label = TokenLabel {
                provider: provider.to_owned(),
                model: model.to_owned(),
                kind: kind.to_owned(),
            };
            self.model_tokens.get_or_create(&label).inc_by(n);
        }
        if let Some(cost) = cost {
            let label = ModelLabel {
                provider: provider.to_owned(),
                model: model.to_owned(),
            };
            self.model_cost.get_or_create(&label).inc_by(cost);
        }
    }

    /// A model call was answered by `model` of `provider`.
    pub fn model_answered(&self, provider: &str, model: &str) {
        let label = ModelLabel {
            provider: provider.to_owned(),
            model: model.to_owned(),
        };
        self.model_answers.get_or_create(&label).inc();
    }

    /// `model` of `provider` was skipped for a call, for `reason`.
    pub fn model_skipped(&self, provider: &str, model: &str, reason: &str) {
        let label = SkipLabel {
            provider: provider.to_owned(),
            model: model.to_owned(),
            reason: reason.to_owned(),
        };
        self.model_skips.get_or_create(&label).inc();
    }

    /// The first text of a reply became visible `seconds` after its message was accepted.
    pub fn first_text(&self, seconds: f64) {
        self.first_text_seconds.observe(seconds);
    }

    fn count(&self, family: &Family<ChannelLabel, Counter>, channel: &str) {
        family
            .get_or_create(&ChannelLabel {
                channel: channel_label(channel),
            })
            .inc();
    }

    /// The text of a scrape, with `gauges` read just before.
    pub fn render(&self, gauges: &Gauges) -> Result<String, std::fmt::Error> {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.pending_turns
            .set(gauges.pending_turns.map(clamp).unwrap_or(-1));
        self.acp_sessions.set(clamp(gauges.acp_sessions));
        self.store_bytes
            .set(gauges.store_bytes.map(clamp).unwrap_or(-1));
        self.connected.clear();
        for (name, up) in &gauges.channels {
            let label = ChannelLabel {
                channel: channel_label(name),
            };
            self.connected.get_or_create(&label).set(i64::from(*up));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn unregistered_channel_names_are_other() {
        assert_eq!(channel_label("rpc"), "rpc");
        assert_eq!(channel_label("no-such-platform"), "other");
        register_channel("a-new-platform");
        assert_eq!(channel_label("a-new-platform"), "a-new-platform");
    }

    #[test]
    fn counters_move_by_channel_and_outcome() {
        register_channel("telegram");
        register_channel("discord");
        let m = Metrics::new();
        m.inbound("telegram");
        m.inbound("telegram");
        m.inbound("discord");
        m.reply_delivered("telegram");
        m.run_ended(RunOutcome::Ok);
        m.run_ended(RunOutcome::Cancelled);
        m.rate_limited("telegram");
        m.delivery_retry("telegram");
        m.dead_letter("discord");
        m.model_answered("backup", "claude-x");
        m.model_skipped("openai", "gpt-x", "overloaded");
        let text = m.render(&Gauges::default()).unwrap();
        let want = [
            "chela_inbound_messages_total{channel=\"telegram\"} 2",
            "chela_inbound_messages_total{channel=\"discord\"} 1",
            "chela_replies_delivered_total{channel=\"telegram\"} 1",
            "chela_runs_total{outcome=\"ok\"} 1",
            "chela_runs_total{outcome=\"cancelled\"} 1",
            "chela_platform_rate_limited_total{channel=\"telegram\"} 1",
            "chela_delivery_retries_total{channel=\"telegram\"} 1",
            "chela_dead_letters_total{channel=\"discord\"} 1",
            "chela_model_answers_total{provider=\"backup\",model=\"claude-x\"} 1",
            "chela_model_skips_total{provider=\"openai\",model=\"gpt-x\",reason=\"overloaded\"} 1",
        ];
        for w in want {
            assert!(text.lines().any(|l| l == w), "{w} missing in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn labels_stay_bounded() {
        let m = Metrics::new();
        m.inbound("telegram:12345");
        m.inbound("somebody's own channel");
        let text = m.render(&Gauges::default()).unwrap();
        assert_eq!(
            line(&text, "chela_inbound_messages_total"),
            Some("chela_inbound_messages_total{channel=\"other\"} 2")
        );
    }

    #[test]
    fn histograms_count_observations() {
        let m = Metrics::new();
        m.model_call(0.3);
        m.model_call(1.2);
        m.first_text(0.04);
        let text = m.render(&Gauges::default()).unwrap();
        assert!(text.contains("chela_model_call_duration_seconds_count 2"));
        assert!(text.contains("chela_model_call_duration_seconds_sum 1.5"));
        assert!(text.contains("chela_first_text_seconds_bucket{le=\"0.05\"} 1"));
    }

    #[test]
    fn readiness_names_what_is_not_ready() {
        let ready = Readiness {
            store_error: None,
            channels: vec![("telegram".into(), true)],
        };
        assert!(ready.not_ready().is_empty());
        let not = Readiness {
            store_error: Some("closed".into()),
            channels: vec![("telegram".into(), false), ("rpc".into(), true)],
        };
        assert_eq!(
            not.not_ready(),
            ["store: closed", "channel telegram: not connected"]
        );
    }

    #[test]
    fn disk_usage_sums_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), [0u8; 100]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), [0u8; 23]).unwrap();
        assert_eq!(disk_usage(dir.path()).unwrap(), 123);
        assert_eq!(disk_usage(&dir.path().join("a")).unwrap(), 100);
        assert!(disk_usage(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn gauges_are_read_at_scrape_time() {
        register_channel("telegram");
        register_channel("discord");
        let m = Metrics::new();
        let gauges = Gauges {
            pending_turns: Some(3),
            acp_sessions: 1,
            store_bytes: Some(4096),
            channels: vec![("telegram".into(), true), ("discord".into(), false)],
        };
        let text = m.render(&gauges).unwrap();
        assert!(text.contains("\nchela_pending_turns 3\n"));
        assert!(text.contains("\nchela_acp_sessions 1\n"));
        assert!(text.contains("\nchela_store_size_bytes 4096\n"));
        assert!(text.contains("chela_channel_connected{channel=\"telegram\"} 1"));
        assert!(text.contains("chela_channel_connected{channel=\"discord\"} 0"));
        // A channel gone since the last scrape is not shown as it was.
        let text = m.render(&Gauges::default()).unwrap();
        assert!(!text.contains("chela_channel_connected{"));
        assert!(text.contains("\nchela_pending_turns -1\n"));
    }
}
