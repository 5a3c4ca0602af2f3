//! The pending queue of one lane: cap, drop policies and collect-mode merging.
//! Pure data logic with no I/O, so every policy is tested directly.

use crate::config::DropPolicy;

/// One accepted message waiting for its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedTurn {
    /// Durable pending-queue sequence numbers this turn answers (removed when it has run).
    pub seqs: Vec<u64>,
    /// Text handed to the model.
    pub text: String,
    /// Display name of the sender, for collect headers and overflow summaries.
    pub sender: String,
    /// Authorization / reply-target context; collect never merges across contexts.
    pub context: String,
    /// Where the reply goes.
    pub target: chela_channel::Conversation,
    /// The platform message the reply quotes (busy group chats), if any.
    pub quote: Option<String>,
    /// The files that came with its messages, each with the seq of its message (downloaded
    /// when the turn runs).
    pub files: Vec<(u64, chela_channel::Attachment)>,
    /// A turn chela scheduled itself (a cron job, the heartbeat): it waits for a running turn
    /// instead of being steered into it or interrupting it, and is never merged with others.
    pub scheduled: bool,
    /// When its (first) message was queued, ms since the epoch; 0 when unknown.
    pub queued_ms: u64,
}

/// What pushing into a full queue did.
#[derive(Debug, Clone, PartialEq)]
pub enum PushOutcome {
    /// Queued normally.
    Queued,
    /// The oldest turn was dropped to make room (its seqs are given back to be removed).
    DroppedOldest(QueuedTurn),
    /// The incoming turn was rejected (`drop = "new"`); the sender should be told.
    Rejected(QueuedTurn),
}

/// The header of a collect-mode batch (SPEC 3).
pub const COLLECT_HEADER: &str = "[Queued messages while agent was busy]";
/// The head of a queue-overflow summary turn (SPEC 3).
pub const OVERFLOW_HEADER: &str = "[Queue overflow]";
/// Longest one-line summary of a dropped message.
const SUMMARY_MAX_CHARS: usize = 160;

/// A lane's queue of pending turns.
#[derive(Debug, Default)]
pub struct TurnQueue {
    turns: std::collections::VecDeque<QueuedTurn>,
    overflow: Vec<String>,
    overflow_seqs: Vec<u64>,
}

impl TurnQueue {
    /// Number of queued turns.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// True when nothing waits, overflow summary included.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty() && self.overflow.is_empty()
    }

    /// True when a message of someone's waits (a scheduled turn does not count): a newer
    /// one may not overtake it.
    pub fn has_waiting_messages(&self) -> bool {
        !self.overflow.is_empty() || self.turns.iter().any(|t| !t.scheduled)
    }

    /// Queues `turn`, applying `cap` and `drop` when full.
    pub fn push(&mut self, turn: QueuedTurn, cap: usize, drop: DropPolicy) -> PushOutcome {
        if self.turns.len() < cap.max(1) {
            self.turns.push_back(turn);
            return PushOutcome::Queued;
        }
        match drop {
            DropPolicy::New => PushOutcome::Rejected(turn),
            DropPolicy::Old => {
                let oldest = self.turns.pop_front();
                self.turns.push_back(turn);
                oldest.map_or(PushOutcome::Queued, PushOutcome::DroppedOldest)
            }
            DropPolicy::Summarize => {
                if let Some(oldest) = self.turns.pop_front() {
                    self.overflow.push(summarize(&oldest));
                    self.overflow_seqs.extend(&oldest.seqs);
                }
                self.turns.push_back(turn);
                PushOutcome::Queued
            }
        }
    }

    /// Puts `turn` at the front (interrupt mode: the newest runs next).
    pub fn push_front(&mut self, turn: QueuedTurn) {
        self.turns.push_front(turn);
    }

    /// The next turn in followup order; an overflow summary, if any, comes first.
    pub fn pop_next(&mut self) -> Option<QueuedTurn> {
        let next = self.take_overflow().or_else(|| self.turns.pop_front());
        self.release_if_empty();
        next
    }

    /// Gives an emptied queue's buffer back. A lane outlives its last turn by a minute, and
    /// a buffer of a few turns (about 1 KiB) kept by each of thousands of lanes that ran once
    /// was the largest single share of a busy gateway's memory (issue #11).
    fn release_if_empty(&mut self) {
        if self.turns.is_empty() {
            self.turns = std::collections::VecDeque::new();
        }
    }

    /// The next collect batch: every queued turn from the front that shares the first one's
    /// context merged into one turn (an overflow summary, if any, comes first on its own).
    pub fn pop_collected(&mut self) -> Option<QueuedTurn> {
        if let Some(summary) = self.take_overflow() {
            return Some(summary);
        }
        let first = self.turns.pop_front()?;
        let mut batch = vec![first];
        while self
            .turns
            .front()
            .is_some_and(|t| t.context == batch[0].context)
        {
            if let Some(next) = self.turns.pop_front() {
                batch.push(next);
            }
        }
        self.release_if_empty();
        if batch.len() == 1 {
            return batch.pop();
        }
        let mut text = String::from(COLLECT_HEADER);
        let mut seqs = Vec::new();
        let mut files = Vec::new();
        for (i, turn) in batch.iter().enumerate() {
            text.push_str(&format!(
                "\n\n---\nQueued #{} ({}):\n{}",
                i + 1,
                turn.sender,
                turn.text
            ));
            seqs.extend(&turn.seqs);
            files.extend(turn.files.iter().cloned());
        }
        Some(QueuedTurn {
            seqs,
            text,
            sender: batch[0].sender.clone(),
            context: batch[0].context.clone(),
            target: batch[0].target.clone(),
            quote: batch.last().and_then(|t| t.quote.clone()),
            files,
            scheduled: false,
            queued_ms: batch[0].queued_ms,
        })
    }

    /// Whether pending seq `seq` is queued (or summarized in the overflow).
    pub fn holds(&self, seq: u64) -> bool {
        self.overflow_seqs.contains(&seq) || self.turns.iter().any(|t| t.seqs.contains(&seq))
    }

    /// Empties the queue, returning every pending seq it held (for `/stop`).
    pub fn clear(&mut self) -> Vec<u64> {
        let mut seqs: Vec<u64> = std::mem::take(&mut self.overflow_seqs);
        self.overflow.clear();
        for turn in std::mem::take(&mut self.turns) {
            seqs.extend(turn.seqs);
        }
        seqs
    }

    fn take_overflow(&mut self) -> Option<QueuedTurn> {
        if self.overflow.is_empty() {
            return None;
        }
        // Overflow only happens when a newer turn is pushed, so one is always queued here.
        let next = self.turns.front()?;
        let lines = std::mem::take(&mut self.overflow);
        let seqs = std::mem::take(&mut self.overflow_seqs);
        Some(QueuedTurn {
            target: next.target.clone(),
            quote: None,
            context: next.context.clone(),
            seqs,
            text: format!(
                "{OVERFLOW_HEADER} {} older message(s) were dropped while the queue was full:\n{}",
                lines.len(),
                lines.join("\n")
            ),
            sender: "system".into(),
            files: Vec::new(),
            scheduled: false,
            queued_ms: next.queued_ms,
        })
    }
}

/// A one-line summary of a dropped turn, at most 160 chars.
fn summarize(turn: &QueuedTurn) -> String {
    let flat: String = turn.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = format!("- {}: {}", turn.sender, flat);
    if line.chars().count() <= SUMMARY_MAX_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(SUMMARY_MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(seq: u64, text: &str, context: &str) -> QueuedTurn {
        QueuedTurn {
            seqs: vec![seq],
            text: text.into(),
            sender: "ann".into(),
            context: context.into(),
            scheduled: false,
            queued_ms: 0,
            target: chela_channel::Conversation {
                channel: "terminal".into(),
                account: "default".into(),
                kind: chela_channel::ChatKind::Direct,
                chat_id: "me".into(),
                thread_id: None,
            },
            quote: None,
            files: Vec::new(),
        }
    }

    #[test]
    fn an_emptied_queue_keeps_no_buffer() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "one", "c"), 20, DropPolicy::Summarize);
        q.push(turn(2, "two", "c"), 20, DropPolicy::Summarize);
        assert!(q.pop_next().is_some());
        assert!(q.turns.capacity() > 0, "a turn still waits");
        assert!(q.pop_next().is_some());
        assert_eq!(q.turns.capacity(), 0);
        q.push(turn(3, "three", "c"), 20, DropPolicy::Summarize);
        assert!(q.pop_collected().is_some());
        assert_eq!(q.turns.capacity(), 0);
        q.push(turn(4, "four", "c"), 20, DropPolicy::Summarize);
        assert_eq!(q.clear(), vec![4]);
        assert_eq!(q.turns.capacity(), 0);
    }

    #[test]
    fn followup_pops_in_order() {
        let mut q = TurnQueue::default();
        for i in 0..3 {
            q.push(turn(i, &format!("m{i}"), "c"), 20, DropPolicy::Summarize);
        }
        let texts: Vec<_> = std::iter::from_fn(|| q.pop_next())
            .map(|t| t.text)
            .collect();
        assert_eq!(texts, ["m0", "m1", "m2"]);
    }

    #[test]
    fn collect_merges_numbered_and_attributed() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "one", "c"), 20, DropPolicy::Summarize);
        q.push(turn(2, "two", "c"), 20, DropPolicy::Summarize);
        let batch = q.pop_collected().unwrap();
        assert!(batch.text.starts_with(COLLECT_HEADER));
        assert!(batch.text.contains("Queued #1 (ann):\none"));
        assert!(batch.text.contains("Queued #2 (ann):\ntwo"));
        assert_eq!(batch.seqs, vec![1, 2]);
        assert!(q.is_empty());
    }

    #[test]
    fn collect_keeps_the_files_of_every_merged_message() {
        let file = |r: &str| chela_channel::Attachment {
            kind: chela_channel::AttachmentKind::Image,
            file_ref: r.into(),
            mime_type: None,
            size: None,
            file_name: None,
        };
        let mut q = TurnQueue::default();
        let mut one = turn(1, "one", "c");
        one.files = vec![(1, file("a"))];
        let mut two = turn(2, "two", "c");
        two.files = vec![(2, file("b")), (2, file("c"))];
        q.push(one, 20, DropPolicy::Summarize);
        q.push(two, 20, DropPolicy::Summarize);
        let batch = q.pop_collected().unwrap();
        let refs: Vec<_> = batch
            .files
            .iter()
            .map(|(s, f)| (*s, f.file_ref.as_str()))
            .collect();
        assert_eq!(refs, [(1, "a"), (2, "b"), (2, "c")]);
    }

    #[test]
    fn collect_never_merges_across_contexts() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "a", "x"), 20, DropPolicy::Summarize);
        q.push(turn(2, "b", "y"), 20, DropPolicy::Summarize);
        assert_eq!(q.pop_collected().unwrap().text, "a");
        assert_eq!(q.pop_collected().unwrap().text, "b");
    }

    #[test]
    fn drop_new_rejects_incoming() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "a", "c"), 1, DropPolicy::New);
        assert!(
            matches!(q.push(turn(2, "b", "c"), 1, DropPolicy::New), PushOutcome::Rejected(t) if t.text == "b")
        );
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn drop_old_discards_oldest() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "a", "c"), 1, DropPolicy::Old);
        assert!(
            matches!(q.push(turn(2, "b", "c"), 1, DropPolicy::Old), PushOutcome::DroppedOldest(t) if t.text == "a")
        );
        assert_eq!(q.pop_next().unwrap().text, "b");
    }

    #[test]
    fn summarize_keeps_a_line_per_dropped_message_and_its_seqs() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "first message", "c"), 1, DropPolicy::Summarize);
        q.push(turn(2, &"long ".repeat(100), "c"), 1, DropPolicy::Summarize);
        q.push(turn(3, "third", "c"), 1, DropPolicy::Summarize);
        let summary = q.pop_next().unwrap();
        assert!(summary.text.starts_with(OVERFLOW_HEADER));
        assert!(summary.text.contains("- ann: first message"));
        assert!(summary.text.lines().all(|l| l.chars().count() <= 160));
        assert_eq!(summary.seqs, vec![1, 2]);
        assert_eq!(q.pop_next().unwrap().text, "third");
    }

    #[test]
    fn clear_returns_every_seq() {
        let mut q = TurnQueue::default();
        q.push(turn(1, "a", "c"), 1, DropPolicy::Summarize);
        q.push(turn(2, "b", "c"), 1, DropPolicy::Summarize);
        let mut seqs = q.clear();
        seqs.sort();
        assert_eq!(seqs, vec![1, 2]);
        assert!(q.is_empty());
    }
}
