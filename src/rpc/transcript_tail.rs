//! `sessions.show`'s `tail`: the last messages of a transcript rendered as `chela sessions
//! show` renders them (`role: text` lines, tool calls `  -> name(args)`, tool results
//! `  <- name: text`, resets and compactions as rules), without rendering the rest.

use crate::store::{Entry, EntryKind};

/// The rendered tail of a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tail {
    /// The rendered lines.
    pub text: String,
    /// How many messages it shows.
    pub shown: usize,
    /// How many messages the transcript has.
    pub total: usize,
}

/// The last `count` message entries of `entries` (tool results count as messages) and the
/// other entries (resets, compactions, model changes) among them, rendered; the header and
/// everything before are left out.
pub(super) fn render(entries: &[Entry], count: usize) -> Tail {
    let messages: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Entry::Item(i) if matches!(i.kind, EntryKind::Message(_))))
        .map(|(at, _)| at)
        .collect();
    let total = messages.len();
    let shown = count.min(total);
    let from = match shown {
        0 => entries.len(),
        n => messages[total - n],
    };
    let mut text = String::new();
    for entry in entries[from..]
        .iter()
        .filter(|e| matches!(e, Entry::Item(_)))
    {
        crate::store::render_entry(&mut text, entry);
    }
    Tail { text, shown, total }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::domain::message::{AssistantMessage, ContentBlock, Message, StopReason, Usage};
    use crate::store::Store;

    fn answer(text: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text(text)],
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: 1,
        })
    }

    fn transcript() -> Vec<Entry> {
        let store = Store::temporary().unwrap();
        store.ensure_session("k", "/w").unwrap();
        store.append_message("k", &Message::user("one")).unwrap();
        store.append_message("k", &answer("ok: one")).unwrap();
        store.append_reset("k", "/new").unwrap();
        store.append_message("k", &Message::user("two")).unwrap();
        store.append_message("k", &answer("ok: two")).unwrap();
        store.entries("k").unwrap()
    }

    #[test]
    fn the_tail_is_the_last_messages_and_what_lies_between_them() {
        let entries = transcript();
        let last = render(&entries, 1);
        assert_eq!(last.text, "assistant: ok: two\n");
        assert_eq!((last.shown, last.total), (1, 4));
        let three = render(&entries, 3);
        assert_eq!(
            three.text,
            "assistant: ok: one\n--- reset (/new) ---\nuser: two\nassistant: ok: two\n"
        );
    }

    #[test]
    fn a_tail_longer_than_the_transcript_shows_every_message_and_no_header() {
        let entries = transcript();
        let all = render(&entries, 100);
        assert!(all.text.starts_with("user: one\n"), "{}", all.text);
        assert_eq!((all.shown, all.total), (4, 4));
        let none = render(&entries, 0);
        assert_eq!((none.text.as_str(), none.shown), ("", 0));
    }
}
