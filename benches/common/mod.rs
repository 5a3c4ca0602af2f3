//! Helpers shared by the bench targets: latency summaries, `/proc` memory readings and the
//! table printer. Benches report figures; nothing here asserts a time.

// Each bench target compiles this module separately and uses only part of it.
#![allow(dead_code)]

pub mod capture;
pub mod model;
pub mod tg_gateway;

use std::path::PathBuf;
use std::time::Duration;

/// The `chela` binary a bench runs: `CHELA_BENCH_BIN` (another build, e.g. of an older commit
/// or another profile, for a before/after figure), else this build's.
pub fn chela_binary() -> PathBuf {
    std::env::var_os("CHELA_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_chela")))
}

/// A count from the environment variable `name`, else `default`.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The error type every bench function returns (benches may not `unwrap`).
pub type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A summary of a set of durations.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile (nearest rank).
    pub p99: Duration,
    /// Arithmetic mean.
    pub mean: Duration,
    /// Smallest sample.
    pub min: Duration,
    /// Largest sample.
    pub max: Duration,
}

impl Summary {
    /// Summarizes `samples` (in any order); `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let total: Duration = sorted.iter().sum();
        let n = sorted.len();
        Some(Summary {
            n,
            p50: percentile(&sorted, 50.0),
            p99: percentile(&sorted, 99.0),
            mean: total / u32::try_from(n).unwrap_or(u32::MAX),
            min: sorted[0],
            max: sorted[n - 1],
        })
    }
}

/// The nearest-rank percentile `p` (0-100] of an ascending, non-empty slice.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let n = sorted.len();
    // Nearest rank: ceil(p/100 * n), 1-based.
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// A duration in milliseconds with three decimals, e.g. `1.234 ms`.
pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// A signed difference `a - b` in milliseconds, e.g. `-0.120 ms`.
pub fn ms_diff(a: Duration, b: Duration) -> String {
    format!("{:.3} ms", (a.as_secs_f64() - b.as_secs_f64()) * 1000.0)
}

/// Memory figures of a process, from `/proc/<pid>/status`, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// Resident set size now.
    pub rss_kib: u64,
    /// Peak resident set size ("high water mark").
    pub hwm_kib: u64,
    /// The anonymous part of the resident set (heap, stacks): what is left once the pages of
    /// the binary and the libraries (file-backed, shared, reclaimable) are taken out.
    pub anon_kib: u64,
}

/// Reads VmRSS, VmHWM and RssAnon of `pid` (`"self"` for this process).
pub fn memory_of(pid: &str) -> BenchResult<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    Ok(Memory {
        rss_kib: field("VmRSS:").ok_or("no VmRSS in /proc status")?,
        hwm_kib: field("VmHWM:").ok_or("no VmHWM in /proc status")?,
        anon_kib: field("RssAnon:").ok_or("no RssAnon in /proc status")?,
    })
}

/// KiB as MiB with one decimal, e.g. `12.3 MiB`.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Prints a two-column table with a title.
pub fn table(title: &str, rows: &[(String, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!();
    println!("{title}");
    println!("{}", "-".repeat(title.len().max(width + 20)));
    for (k, v) in rows {
        println!("  {k:<width$}  {v}");
    }
}

/// A row of a table.
pub fn row(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}
