//! [`Poll`]: a native poll the bot sends ([`Channel::send_poll`](crate::Channel::send_poll)).

use serde::{Deserialize, Serialize};

/// Fewest options a poll has (Telegram and Discord both need two).
pub const POLL_MIN_OPTIONS: usize = 2;
/// Most options a poll may have on every platform chela speaks (Telegram's 10; Discord takes
/// 10 too).
pub const POLL_MAX_OPTIONS: usize = 10;
/// Longest question, in chars (Telegram 300, Discord 300).
pub const POLL_MAX_QUESTION: usize = 300;
/// Longest option, in chars (Discord 55; Telegram takes 100).
pub const POLL_MAX_OPTION: usize = 55;

/// A poll: a question and the options people choose among.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Poll {
    /// The question.
    pub question: String,
    /// The options, in order.
    pub options: Vec<String>,
    /// Whether one person may choose several options.
    pub multiple: bool,
}

impl Poll {
    /// Why this poll cannot be sent on any platform (too few or too many options, an empty
    /// or too long question or option), or `None` when it can.
    pub fn problem(&self) -> Option<String> {
        let question = self.question.trim();
        if question.is_empty() {
            return Some("a poll needs a question".into());
        }
        if question.chars().count() > POLL_MAX_QUESTION {
            return Some(format!(
                "a poll's question has at most {POLL_MAX_QUESTION} characters"
            ));
        }
        let count = self.options.len();
        if !(POLL_MIN_OPTIONS..=POLL_MAX_OPTIONS).contains(&count) {
            return Some(format!(
                "a poll has {POLL_MIN_OPTIONS} to {POLL_MAX_OPTIONS} options, not {count}"
            ));
        }
        if let Some(bad) = self.options.iter().find(|o| {
            let o = o.trim();
            o.is_empty() || o.chars().count() > POLL_MAX_OPTION
        }) {
            return Some(format!(
                "each poll option has 1 to {POLL_MAX_OPTION} characters, not {bad:?}"
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(question: &str, options: &[&str]) -> Poll {
        Poll {
            question: question.into(),
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            multiple: false,
        }
    }

    #[test]
    fn a_poll_is_checked_against_every_platforms_limits() {
        assert_eq!(poll("Lunch?", &["pizza", "soup"]).problem(), None);
        assert!(poll(" ", &["a", "b"]).problem().is_some());
        assert!(poll("q", &["only one"]).problem().is_some());
        let eleven: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
        assert!(poll("q", &eleven).problem().is_some());
        assert!(poll("q", &["a", ""]).problem().is_some());
        assert!(poll("q", &["a", &"x".repeat(56)]).problem().is_some());
        assert!(poll(&"q".repeat(301), &["a", "b"]).problem().is_some());
    }
}
