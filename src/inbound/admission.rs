//! Admission (SPEC 1.3): who may talk to the bot, before any model call.
//!
//! A pure decision over the channel's access rules and what the store knows about the
//! sender; the router acts on it (pairing prompt, group history, drop with a log line).

use chela_channel::{ChatKind, Inbound};

use crate::config::{AccessConfig, DmPolicy, GroupPolicy};

/// What to do with an inbound message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Admit,
    /// Unknown DM sender under `pairing`: send the pairing prompt, do not run it.
    Pair,
    /// An unmentioned group message: keep it as context for the next mentioned turn.
    History,
    /// Drop it (no model call); the reason is logged.
    Drop(&'static str),
}

/// What the store knows about the sender.
#[derive(Debug, Clone, Copy, Default)]
pub struct SenderFacts {
    /// Approved by pairing on this channel account.
    pub paired: bool,
    /// An owner (configured or made by the first pairing).
    pub owner: bool,
}

/// Decides about `inbound` under `access`.
pub fn decide(access: &AccessConfig, inbound: &Inbound, facts: SenderFacts) -> Verdict {
    let sender = inbound.sender.id.as_str();
    match inbound.conversation.kind {
        ChatKind::Direct => match access.dm_policy {
            DmPolicy::Disabled => Verdict::Drop("direct messages are disabled"),
            DmPolicy::Open => Verdict::Admit,
            _ if facts.owner || listed(&access.allow_from, sender) => Verdict::Admit,
            DmPolicy::Allowlist => Verdict::Drop("sender not in allow_from"),
            DmPolicy::Pairing if facts.paired => Verdict::Admit,
            DmPolicy::Pairing => Verdict::Pair,
        },
        ChatKind::Group | ChatKind::Channel => {
            // Pairing grants DM access only: groups check their own list.
            let list = if access.group_allow_from.is_empty() {
                &access.allow_from
            } else {
                &access.group_allow_from
            };
            let allowed =
                access.group_policy == GroupPolicy::Open || facts.owner || listed(list, sender);
            if !allowed {
                return Verdict::Drop(
                    "sender not in the group allowlist (group_allow_from, else allow_from; \
                     group_policy = \"open\" admits every member)",
                );
            }
            if access.require_mention && !mentioned(access, inbound) {
                return Verdict::History;
            }
            Verdict::Admit
        }
    }
}

/// True when the bot was mentioned, replied to, or a mention pattern matches.
pub fn mentioned(access: &AccessConfig, inbound: &Inbound) -> bool {
    if inbound.mentioned {
        return true;
    }
    let text = inbound.text.to_lowercase();
    access
        .mention_patterns
        .iter()
        .any(|p| !p.is_empty() && text.contains(&p.to_lowercase()))
}

fn listed(list: &[String], sender: &str) -> bool {
    list.iter().any(|entry| entry == "*" || entry == sender)
}

/// Recent unmentioned group messages, kept in memory as context for the next mentioned turn.
/// Bounded: a few messages per group, a fixed number of groups.
#[derive(Debug, Default)]
pub struct GroupHistory {
    groups: std::collections::HashMap<String, std::collections::VecDeque<String>>,
    order: std::collections::VecDeque<String>,
}

/// Messages kept per group.
pub const HISTORY_PER_GROUP: usize = 20;
/// Groups kept (the least recently touched is forgotten first).
pub const HISTORY_GROUPS: usize = 256;
/// Longest kept line.
const HISTORY_LINE_CHARS: usize = 400;

impl GroupHistory {
    /// The history saved by an earlier process (`(key, lines)` in any order), bounded as
    /// [`GroupHistory::remember`] bounds it.
    pub fn restore(saved: Vec<(String, Vec<String>)>) -> GroupHistory {
        let mut history = GroupHistory::default();
        for (key, lines) in saved.into_iter().take(HISTORY_GROUPS) {
            let skip = lines.len().saturating_sub(HISTORY_PER_GROUP);
            history.order.push_back(key.clone());
            history
                .groups
                .insert(key, lines.into_iter().skip(skip).collect());
        }
        history
    }

    /// The kept lines of group session `key`, oldest first.
    pub fn lines(&self, key: &str) -> Vec<String> {
        self.groups
            .get(key)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Remembers an unmentioned message of the group session `key`; returns the key of a
    /// group forgotten to make room, if any.
    pub fn remember(&mut self, key: &str, sender: &str, text: &str) -> Option<String> {
        let mut forgotten = None;
        let line = history_line(sender, text);
        if !self.groups.contains_key(key) {
            if self.order.len() >= HISTORY_GROUPS
                && let Some(oldest) = self.order.pop_front()
            {
                self.groups.remove(&oldest);
                forgotten = Some(oldest);
            }
            self.order.push_back(key.to_string());
        }
        let lines = self.groups.entry(key.to_string()).or_default();
        if lines.len() >= HISTORY_PER_GROUP {
            lines.pop_front();
        }
        lines.push_back(line);
        forgotten
    }

    /// Takes the kept messages of `key`, framing `text` with them (unchanged when none).
    pub fn frame(&mut self, key: &str, text: &str) -> String {
        let Some(lines) = self.groups.remove(key) else {
            return text.to_string();
        };
        self.order.retain(|k| k != key);
        frame_lines(lines, text)
    }
}

/// The kept line of an unmentioned message of `sender` (bounded).
pub fn history_line(sender: &str, text: &str) -> String {
    format!("{sender}: {text}")
        .chars()
        .take(HISTORY_LINE_CHARS)
        .collect()
}

/// `text` framed with the kept `lines` of its group (unchanged when there are none).
pub fn frame_lines(lines: impl IntoIterator<Item = String>, text: &str) -> String {
    let mut lines = lines.into_iter().peekable();
    if lines.peek().is_none() {
        return text.to_string();
    }
    let mut out = String::from("[Recent group messages]\n");
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("\n[Current message]\n");
    out.push_str(text);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela_channel::{Conversation, Sender};

    fn msg(kind: ChatKind, sender: &str, text: &str, mentioned: bool) -> Inbound {
        Inbound {
            conversation: Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind,
                chat_id: "-100".into(),
                thread_id: None,
            },
            sender: Sender {
                id: sender.into(),
                name: sender.into(),
                username: None,
            },
            message_id: "1".into(),
            text: text.into(),
            reply_to: None,
            mentioned,
            timestamp_ms: 0,
            interaction: None,
            attachments: Vec::new(),
        }
    }

    fn access(dm: DmPolicy) -> AccessConfig {
        AccessConfig {
            dm_policy: dm,
            allow_from: vec!["7".into()],
            group_policy: GroupPolicy::Allowlist,
            group_allow_from: Vec::new(),
            require_mention: true,
            mention_patterns: vec!["chela".into()],
        }
    }

    #[test]
    fn dm_policies() {
        let stranger = msg(ChatKind::Direct, "9", "hi", false);
        let friend = msg(ChatKind::Direct, "7", "hi", false);
        let no = SenderFacts::default();
        assert_eq!(
            decide(&access(DmPolicy::Pairing), &stranger, no),
            Verdict::Pair
        );
        assert_eq!(
            decide(
                &access(DmPolicy::Pairing),
                &stranger,
                SenderFacts {
                    paired: true,
                    owner: false
                }
            ),
            Verdict::Admit
        );
        assert_eq!(
            decide(&access(DmPolicy::Pairing), &friend, no),
            Verdict::Admit
        );
        assert!(matches!(
            decide(&access(DmPolicy::Allowlist), &stranger, no),
            Verdict::Drop(_)
        ));
        assert_eq!(
            decide(&access(DmPolicy::Open), &stranger, no),
            Verdict::Admit
        );
        assert!(matches!(
            decide(&access(DmPolicy::Disabled), &friend, no),
            Verdict::Drop(_)
        ));
    }

    #[test]
    fn groups_check_their_list_and_gate_on_mentions() {
        let a = access(DmPolicy::Pairing);
        let no = SenderFacts::default();
        assert_eq!(
            decide(&a, &msg(ChatKind::Group, "7", "hello", true), no),
            Verdict::Admit
        );
        assert_eq!(
            decide(&a, &msg(ChatKind::Group, "7", "hello all", false), no),
            Verdict::History
        );
        assert_eq!(
            decide(&a, &msg(ChatKind::Group, "7", "hey Chela, hi", false), no),
            Verdict::Admit
        );
        // Pairing grants DM access only.
        let paired = SenderFacts {
            paired: true,
            owner: false,
        };
        assert!(matches!(
            decide(&a, &msg(ChatKind::Group, "9", "hi", true), paired),
            Verdict::Drop(_)
        ));
        let open = AccessConfig {
            group_policy: GroupPolicy::Open,
            ..a
        };
        assert_eq!(
            decide(&open, &msg(ChatKind::Group, "9", "hi", true), no),
            Verdict::Admit
        );
    }

    const OWNER: SenderFacts = SenderFacts {
        paired: false,
        owner: true,
    };
    const NOBODY: SenderFacts = SenderFacts {
        paired: false,
        owner: false,
    };

    #[test]
    fn an_unlisted_owner_is_admitted_in_dms_under_pairing_and_allowlist_only() {
        // Sender 9 is in no list: only being an owner lets them in.
        let owner = msg(ChatKind::Direct, "9", "hi", false);
        for dm in [DmPolicy::Pairing, DmPolicy::Allowlist, DmPolicy::Open] {
            assert_eq!(decide(&access(dm), &owner, OWNER), Verdict::Admit, "{dm:?}");
        }
        // Without the owner fact the same sender is a stranger.
        assert_eq!(
            decide(&access(DmPolicy::Pairing), &owner, NOBODY),
            Verdict::Pair
        );
        assert!(matches!(
            decide(&access(DmPolicy::Allowlist), &owner, NOBODY),
            Verdict::Drop(_)
        ));
        // `disabled` means no direct messages at all, owners' included.
        assert!(matches!(
            decide(&access(DmPolicy::Disabled), &owner, OWNER),
            Verdict::Drop(_)
        ));
    }

    #[test]
    fn dm_allow_from_admits_listed_senders_and_a_star_everyone() {
        let friend = msg(ChatKind::Direct, "7", "hi", false);
        let stranger = msg(ChatKind::Direct, "9", "hi", false);
        let a = access(DmPolicy::Allowlist);
        assert_eq!(decide(&a, &friend, NOBODY), Verdict::Admit);
        assert!(matches!(decide(&a, &stranger, NOBODY), Verdict::Drop(_)));
        // Pairing approves DMs only under `pairing`: a paired sender is no listed one.
        let paired = SenderFacts {
            paired: true,
            owner: false,
        };
        assert!(matches!(decide(&a, &stranger, paired), Verdict::Drop(_)));
        let star = AccessConfig {
            allow_from: vec!["*".into()],
            ..access(DmPolicy::Allowlist)
        };
        assert_eq!(decide(&star, &stranger, NOBODY), Verdict::Admit);
        let star_pairing = AccessConfig {
            allow_from: vec!["*".into()],
            ..access(DmPolicy::Pairing)
        };
        assert_eq!(decide(&star_pairing, &stranger, NOBODY), Verdict::Admit);
    }

    #[test]
    fn an_unlisted_owner_passes_a_group_allowlist_and_a_member_does_not() {
        let a = access(DmPolicy::Pairing);
        for kind in [ChatKind::Group, ChatKind::Channel] {
            let owner = msg(kind, "9", "hello", true);
            assert_eq!(decide(&a, &owner, OWNER), Verdict::Admit, "{kind:?}");
            assert!(
                matches!(decide(&a, &owner, NOBODY), Verdict::Drop(_)),
                "{kind:?}"
            );
            // The owner is still gated on mentions.
            let quiet = msg(kind, "9", "hello all", false);
            assert_eq!(decide(&a, &quiet, OWNER), Verdict::History, "{kind:?}");
        }
        // Both lists empty (the default): only owners are answered in groups.
        let empty = AccessConfig {
            allow_from: Vec::new(),
            ..access(DmPolicy::Pairing)
        };
        let owner = msg(ChatKind::Group, "9", "hi", true);
        assert_eq!(decide(&empty, &owner, OWNER), Verdict::Admit);
        let member = msg(ChatKind::Group, "7", "hi", true);
        assert!(matches!(decide(&empty, &member, NOBODY), Verdict::Drop(_)));
    }

    #[test]
    fn group_allow_from_replaces_allow_from_when_set() {
        let a = AccessConfig {
            group_allow_from: vec!["8".into()],
            ..access(DmPolicy::Pairing)
        };
        // 7 is in allow_from only: not in groups once group_allow_from is set.
        assert!(matches!(
            decide(&a, &msg(ChatKind::Group, "7", "hi", true), NOBODY),
            Verdict::Drop(_)
        ));
        assert_eq!(
            decide(&a, &msg(ChatKind::Group, "8", "hi", true), NOBODY),
            Verdict::Admit
        );
        let star = AccessConfig {
            group_allow_from: vec!["*".into()],
            ..access(DmPolicy::Pairing)
        };
        assert_eq!(
            decide(&star, &msg(ChatKind::Group, "5", "hi", true), NOBODY),
            Verdict::Admit
        );
    }

    #[test]
    fn without_require_mention_every_allowed_group_message_runs() {
        let a = AccessConfig {
            require_mention: false,
            ..access(DmPolicy::Pairing)
        };
        assert_eq!(
            decide(&a, &msg(ChatKind::Group, "7", "hello all", false), NOBODY),
            Verdict::Admit
        );
        // Still only for allowed senders.
        assert!(matches!(
            decide(&a, &msg(ChatKind::Group, "9", "hello all", false), NOBODY),
            Verdict::Drop(_)
        ));
        // An empty mention pattern matches nothing.
        let blank = AccessConfig {
            mention_patterns: vec![String::new()],
            ..access(DmPolicy::Pairing)
        };
        assert_eq!(
            decide(&blank, &msg(ChatKind::Group, "7", "hello", false), NOBODY),
            Verdict::History
        );
    }

    #[test]
    fn group_history_frames_the_next_turn_and_is_bounded() {
        let mut h = GroupHistory::default();
        for i in 0..30 {
            h.remember("g", "ann", &format!("m{i}"));
        }
        let framed = h.frame("g", "question");
        assert!(framed.starts_with("[Recent group messages]\nann: m10\n"));
        assert!(framed.ends_with("[Current message]\nquestion"));
        assert_eq!(h.frame("g", "again"), "again");
        for i in 0..(HISTORY_GROUPS + 5) {
            h.remember(&format!("g{i}"), "x", "y");
        }
        assert_eq!(h.groups.len(), HISTORY_GROUPS);
    }

    #[test]
    fn restored_history_is_bounded_and_frames_like_before() {
        let lines: Vec<String> = (0..30).map(|i| format!("ann: m{i}")).collect();
        let mut h = GroupHistory::restore(vec![("g".into(), lines)]);
        assert_eq!(h.lines("g").len(), HISTORY_PER_GROUP);
        assert!(
            h.frame("g", "q")
                .starts_with("[Recent group messages]\nann: m10\n")
        );
        assert!(h.lines("g").is_empty());
    }
}
