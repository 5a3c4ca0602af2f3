//! Slack in a build without the `slack` feature: listed like the other platforms, but a
//! config that runs it is refused at load (`SlackConfig::check_built`), and so is a build of
//! its channel.

use std::sync::Arc;

use chela::config::Config;
use chela_channel::Channel;

use super::super::Verdict;

/// What the config's check says, for a config that got past it.
pub(super) fn build(config: &Config) -> Result<Arc<dyn Channel>, String> {
    let (key, message) = config
        .channels
        .slack
        .check_built()
        .err()
        .unwrap_or_else(|| {
            let message = "needs the Slack channel, which this chela was built without";
            ("channels.slack".to_owned(), message.to_owned())
        });
    Err(format!("{key}: {message}"))
}

/// `chela doctor`'s line: the same refusal.
pub(super) async fn check(config: &Config) -> Verdict {
    match build(config) {
        Ok(_) => (true, String::new()),
        Err(message) => (false, message),
    }
}
