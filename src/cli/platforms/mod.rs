//! The chat platforms `chela gateway` runs beside the terminal, each an entry of
//! [`PLATFORMS`] in a file of its own: when it is configured, how its channel is built and
//! how `chela doctor` checks it. A new platform is a channel crate, a file here and one line
//! in [`PLATFORMS`]; the commands that name platforms (`chela status`, `chela doctor`,
//! `chela pairing`, the gateway's choice of the terminal) and the metrics' channel labels
//! read the list.

mod discord;
mod slack;
mod telegram;

use std::sync::Arc;
use std::time::Duration;

use chela::agent::provider::BoxFuture;
use chela::config::Config;
use chela_channel::Channel;

/// The outcome of one check: whether it passed, and what to print.
pub type Verdict = (bool, String);

/// One chat platform.
pub struct Platform {
    /// Its channel's name (`telegram`): config table, session keys, pairing, metrics.
    pub name: &'static str,
    /// Its name as people write it (`Telegram`).
    pub title: &'static str,
    /// The environment variable its token is usually set from (what `chela doctor` asks for).
    pub token_env: &'static str,
    /// Whether the config runs it (its token is set).
    pub configured: fn(&Config) -> bool,
    /// Its channel, from the config; the error names the key at fault.
    pub build: fn(&Config) -> Result<Arc<dyn Channel>, String>,
    /// `chela doctor`'s check: the platform asked who the token belongs to.
    pub check: for<'a> fn(&'a Config) -> BoxFuture<'a, Verdict>,
}

/// Every platform, in the order channels start.
pub const PLATFORMS: &[Platform] = &[telegram::PLATFORM, discord::PLATFORM, slack::PLATFORM];

/// The platforms `config` runs.
pub fn configured(config: &Config) -> impl Iterator<Item = &'static Platform> + '_ {
    PLATFORMS.iter().filter(|p| (p.configured)(config))
}

/// Every platform's name.
pub fn names() -> Vec<&'static str> {
    PLATFORMS.iter().map(|p| p.name).collect()
}

/// A command-line argument naming a platform (people pair on these; the terminal's user needs
/// no pairing).
pub fn name_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(names())
}

/// The HTTP client of `chela doctor`'s checks (5 s for each).
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_has_its_own_name_and_none_runs_without_a_token() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PLATFORMS.len());
        assert_eq!(configured(&Config::default()).count(), 0);
    }
}
