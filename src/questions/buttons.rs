//! The buttons under the questions asked in chats (exec approvals for now): what a press on
//! each one means, and what a press says once its question ended. A button's data is a
//! random token looked up here, never the answer itself, so a press cannot be forged into
//! another question or another answer.
//!
//! Kept in memory: after a restart the questions are gone (their runs were cut), and a press
//! on an old button is told the question ended.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use chela_channel::{Button, Conversation, SentMessage};

use crate::agent::approval::Approval;

/// What a press on a button this node does not know says: the question ended (or chela
/// restarted), or on several nodes it may wait on another node, which the typed form reaches.
pub const UNKNOWN: &str =
    "This question has ended, or waits on another node: answer it with the /approve shown.";

/// How many ended questions still say why to a late press.
const ENDED_KEPT: usize = 256;

/// A question with buttons, asked in a chat.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Where it was asked.
    pub to: Conversation,
    /// The message carrying the buttons.
    pub message: SentMessage,
    /// The message's text (kept when it is edited to say how it ended).
    pub text: String,
}

/// What a press on a button means now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pressed {
    /// The button answers approval `id` with `decision`.
    Waiting {
        /// The approval.
        id: String,
        /// The answer the button gives.
        decision: Approval,
    },
    /// The question ended; the text says how ("Already answered: allowed once by Ann").
    Ended(String),
}

#[derive(Debug, Default)]
struct State {
    /// Button data -> (approval id, decision).
    waiting: HashMap<String, (String, Approval)>,
    /// Approval id -> where it was asked, once sent.
    asked: HashMap<String, Asked>,
    /// Approval id -> who answered by a press.
    answered_by: HashMap<String, String>,
    /// Button data of ended questions -> how they ended, oldest first.
    ended: VecDeque<(String, String)>,
}

/// The buttons of the questions waiting in chats.
#[derive(Debug, Default)]
pub struct Buttons {
    state: Mutex<State>,
}

impl Buttons {
    /// Buttons answering approval `id` with each of `choices` (label, decision); their data
    /// are fresh random tokens.
    pub fn offer(&self, id: &str, choices: &[(&str, Approval)]) -> Vec<Button> {
        let mut state = self.lock();
        choices
            .iter()
            .map(|(label, decision)| {
                let data = uuid::Uuid::new_v4().simple().to_string();
                state
                    .waiting
                    .insert(data.clone(), (id.to_owned(), *decision));
                Button {
                    label: (*label).to_owned(),
                    data,
                }
            })
            .collect()
    }

    /// Approval `id` was asked with buttons as `asked`.
    pub fn asked(&self, id: &str, asked: Asked) {
        self.lock().asked.insert(id.to_owned(), asked);
    }

    /// What a press on the button with `data` means.
    pub fn pressed(&self, data: &str) -> Pressed {
        let state = self.lock();
        if let Some((id, decision)) = state.waiting.get(data) {
            return Pressed::Waiting {
                id: id.clone(),
                decision: *decision,
            };
        }
        let ended = state.ended.iter().find(|(d, _)| d == data);
        Pressed::Ended(ended.map_or_else(|| UNKNOWN.to_owned(), |e| e.1.clone()))
    }

    /// Answers approval `id` by a press of `who` with `answer` (which gives the approval its
    /// decision, true when it was still waiting), recording `who` only when it answered.
    /// Under this registry's lock, so the question cannot end in between and name nobody,
    /// or name a presser whose answer lost.
    pub fn answer_by(&self, id: &str, who: &str, answer: impl FnOnce() -> bool) -> bool {
        let mut state = self.lock();
        let answered = answer();
        if answered {
            state.answered_by.insert(id.to_owned(), who.to_owned());
        }
        answered
    }

    /// Approval `id` ended with `outcome`: its buttons now say so, and where it was asked is
    /// returned with the text the message should now show.
    pub fn end(&self, id: &str, outcome: Approval) -> Option<(Asked, String)> {
        let mut state = self.lock();
        let by = state.answered_by.remove(id);
        let how = ending(outcome, by.as_deref());
        let State { waiting, ended, .. } = &mut *state;
        retire(waiting, ended, id, &how);
        let asked = state.asked.remove(id)?;
        let text = format!("{}\n{how}.", asked.text);
        Some((asked, text))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Moves the buttons of question `id` from `waiting` (data -> (question, answer)) to
/// `ended`, where a late press reads `how` it ended; `ended` keeps the newest
/// [`ENDED_KEPT`].
pub(super) fn retire<T>(
    waiting: &mut HashMap<String, (String, T)>,
    ended: &mut VecDeque<(String, String)>,
    id: &str,
    how: &str,
) {
    waiting.retain(|data, (question, _)| {
        if question != id {
            return true;
        }
        ended.push_back((data.clone(), format!("Already ended: {how}.")));
        false
    });
    while ended.len() > ENDED_KEPT {
        ended.pop_front();
    }
}

/// How an approval ended, in a few words (and by whom, when a press answered it).
fn ending(outcome: Approval, by: Option<&str>) -> String {
    let how = match outcome {
        Approval::AllowOnce => "✅ allowed once",
        Approval::AllowAlways => "✅ allowed always",
        Approval::Deny => "⛔ denied",
        Approval::TimedOut => "⌛ no answer in time: denied",
        Approval::Cancelled => "stopped",
        Approval::NoOneToAsk => "no one to ask",
    };
    match by {
        Some(who) => format!("{how} by {who}"),
        None => how.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const CHOICES: [(&str, Approval); 2] = [
        ("Allow once", Approval::AllowOnce),
        ("Deny", Approval::Deny),
    ];

    #[test]
    fn a_button_means_its_answer_until_the_question_ends_then_says_how() {
        let buttons = Buttons::default();
        let offered = buttons.offer("ab12", &CHOICES);
        assert_eq!(offered.len(), 2);
        assert_ne!(offered[0].data, offered[1].data);
        assert!(!offered[0].data.contains("ab12"), "the data is opaque");
        assert_eq!(
            buttons.pressed(&offered[1].data),
            Pressed::Waiting {
                id: "ab12".into(),
                decision: Approval::Deny
            }
        );
        assert!(buttons.answer_by("ab12", "Ann", || true));
        assert!(
            !buttons.answer_by("ab12", "Bob", || false),
            "an answer that lost"
        );
        assert!(buttons.end("ab12", Approval::Deny).is_none(), "never sent");
        let Pressed::Ended(late) = buttons.pressed(&offered[0].data) else {
            panic!("still waiting");
        };
        assert_eq!(late, "Already ended: ⛔ denied by Ann.");
        assert_eq!(buttons.pressed("forged"), Pressed::Ended(UNKNOWN.into()));
    }

    #[test]
    fn ending_gives_the_message_its_outcome() {
        let buttons = Buttons::default();
        buttons.offer("cd34", &CHOICES);
        let to = Conversation {
            channel: "telegram".into(),
            account: "main".into(),
            kind: chela_channel::ChatKind::Direct,
            chat_id: "42".into(),
            thread_id: None,
        };
        let message = SentMessage {
            message_id: "7".into(),
        };
        let text = "🔐 Approval needed".to_owned();
        buttons.asked("cd34", Asked { to, message, text });
        let (asked, text) = buttons.end("cd34", Approval::TimedOut).unwrap();
        assert_eq!(asked.message.message_id, "7");
        assert_eq!(text, "🔐 Approval needed\n⌛ no answer in time: denied.");
    }
}
