//! Which chats a catch-up pass reads, from the cursors in the store: channels
//! (`slack:<account>:last:C1`) and threads (`…:last:C1/1700000000.000100`), the most
//! recently active first, at most [`MAX_CHATS`]; a thread whose cursor is older than the
//! window is no longer read (its cursor stays in the store: sinks cannot delete cursors).

use std::cmp::Reverse;

use super::MAX_CHATS;
use crate::state::MAX_THREADS;
use crate::ts;

/// A channel or a thread to read, from its cursor on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chat {
    /// The channel id.
    pub channel: String,
    /// The thread's `ts`, for a thread.
    pub thread: Option<String>,
    /// The cursor: the last message taken (µs).
    pub at: i64,
}

/// What one pass does.
#[derive(Debug, Default)]
pub struct Plan {
    /// The chats it reads, the most recently active first.
    pub chats: Vec<Chat>,
    /// Every thread with a cursor (the bot is in it), the most recently active first, at
    /// most as many as the state remembers.
    pub threads: Vec<(String, String)>,
}

impl Plan {
    /// The plan of `cursors` (names starting with `prefix`), reading nothing older than
    /// `floor` (µs).
    pub fn of(prefix: &str, cursors: Vec<(String, i64)>, floor: i64) -> Plan {
        let mut all: Vec<Chat> = cursors
            .into_iter()
            .filter_map(|(name, at)| chat(name.strip_prefix(prefix)?, at))
            .collect();
        all.sort_by_key(|chat| Reverse(chat.at));
        let threads = all
            .iter()
            .filter_map(|chat| Some((chat.channel.clone(), chat.thread.clone()?)))
            .take(MAX_THREADS)
            .collect();
        let chats = all
            .into_iter()
            .filter(|chat| chat.thread.is_none() || chat.at >= floor)
            .take(MAX_CHATS)
            .collect();
        Plan { chats, threads }
    }
}

/// The chat of cursor `place` (`C1` or `C1/1700000000.000100`), if it names one.
fn chat(place: &str, at: i64) -> Option<Chat> {
    let (channel, thread) = match place.split_once('/') {
        Some((channel, thread)) => (channel, Some(thread)),
        None => (place, None),
    };
    if channel.is_empty() || thread.is_some_and(|t| ts::to_micros(t).is_none()) {
        return None;
    }
    Some(Chat {
        channel: channel.to_string(),
        thread: thread.map(str::to_string),
        at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "slack:default:last:";

    fn cursor(place: &str, at: i64) -> (String, i64) {
        (format!("{P}{place}"), at)
    }

    #[test]
    fn chats_are_read_newest_first_and_stale_threads_are_not_read() {
        let cursors = vec![
            cursor("C1", 100),
            cursor("C1/1.000050", 50),
            cursor("D1", 300),
            cursor("C2/1.000200", 200),
            cursor("C3", 10),
            cursor("C1/not-a-ts", 400),
            ("slack:other:last:C9".to_string(), 500),
        ];
        let plan = Plan::of(P, cursors, 60);
        let read: Vec<(&str, Option<&str>)> = plan
            .chats
            .iter()
            .map(|c| (c.channel.as_str(), c.thread.as_deref()))
            .collect();
        assert_eq!(
            read,
            [
                ("D1", None),
                ("C2", Some("1.000200")),
                ("C1", None),
                ("C3", None)
            ],
            "the thread older than the window is left, a quiet channel is not"
        );
        assert_eq!(
            plan.threads,
            [
                ("C2".to_string(), "1.000200".to_string()),
                ("C1".to_string(), "1.000050".to_string())
            ],
            "every thread the bot is in is known, the stale one too"
        );
    }

    #[test]
    fn at_most_max_chats_are_read() {
        let cursors = (0..MAX_CHATS as i64 + 20)
            .map(|i| cursor(&format!("C{i}"), i))
            .collect();
        let plan = Plan::of(P, cursors, 0);
        assert_eq!(plan.chats.len(), MAX_CHATS);
        assert_eq!(plan.chats[0].at, MAX_CHATS as i64 + 19, "the newest first");
    }
}
