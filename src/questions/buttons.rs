//! The buttons under the questions asked in chats (exec approvals, coding agents' permission
//! questions): what a press on each one means, who besides the owners may press it, and what
//! a press says once its question ended. A button's data is a
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
pub const UNKNOWN: &str = "This question has ended, or waits on another node: type the answer the message shows (/approve, allow or deny, or the command).";

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
pub enum Pressed<A> {
    /// The button answers question `id` with `decision`.
    Waiting {
        /// The question.
        id: String,
        /// The answer the button gives.
        decision: A,
        /// The button's label.
        label: String,
        /// Who besides the bot's owners may answer (`channel:sender_id`: a coding agent's
        /// question, its binding's owner), if anyone.
        also: Option<String>,
    },
    /// The question ended; the text says how ("Already answered: allowed once by Ann").
    Ended(String),
}

#[derive(Debug)]
struct State<A> {
    /// Button data -> (question id, (decision, label)).
    waiting: HashMap<String, (String, (A, String))>,
    /// Question id -> who besides the owners may answer it.
    also: HashMap<String, String>,
    /// Question id -> where it was asked, once sent.
    asked: HashMap<String, Asked>,
    /// Question id -> who answered by a press.
    answered_by: HashMap<String, String>,
    /// Button data of ended questions -> how they ended, oldest first.
    ended: VecDeque<(String, String)>,
}

impl<A> Default for State<A> {
    fn default() -> Self {
        State {
            waiting: HashMap::new(),
            also: HashMap::new(),
            asked: HashMap::new(),
            answered_by: HashMap::new(),
            ended: VecDeque::new(),
        }
    }
}

/// The buttons of the questions of one kind (answers of type `A`) waiting in chats.
#[derive(Debug)]
pub struct Buttons<A> {
    state: Mutex<State<A>>,
}

impl<A> Default for Buttons<A> {
    fn default() -> Self {
        Buttons {
            state: Mutex::new(State::default()),
        }
    }
}

impl<A: Copy> Buttons<A> {
    /// Buttons answering question `id` with each of `choices` (label, decision); their data
    /// are fresh random tokens.
    pub fn offer<L: AsRef<str>>(&self, id: &str, choices: &[(L, A)]) -> Vec<Button> {
        let mut state = self.lock();
        choices
            .iter()
            .map(|(label, decision)| {
                let data = uuid::Uuid::new_v4().simple().to_string();
                let answer = (*decision, label.as_ref().to_owned());
                state.waiting.insert(data.clone(), (id.to_owned(), answer));
                Button {
                    label: label.as_ref().to_owned(),
                    data,
                }
            })
            .collect()
    }

    /// [`Buttons::offer`], which `also` (`channel:sender_id`) may press besides the owners.
    pub fn offer_to<L: AsRef<str>>(&self, id: &str, choices: &[(L, A)], also: &str) -> Vec<Button> {
        self.lock().also.insert(id.to_owned(), also.to_owned());
        self.offer(id, choices)
    }

    /// Approval `id` was asked with buttons as `asked`.
    pub fn asked(&self, id: &str, asked: Asked) {
        self.lock().asked.insert(id.to_owned(), asked);
    }

    /// What a press on the button with `data` means; `None` when no button of this kind
    /// ever had it (here, since the start).
    pub fn pressed(&self, data: &str) -> Option<Pressed<A>> {
        let state = self.lock();
        if let Some((id, (decision, label))) = state.waiting.get(data) {
            return Some(Pressed::Waiting {
                id: id.clone(),
                decision: *decision,
                label: label.clone(),
                also: state.also.get(id).cloned(),
            });
        }
        let ended = state.ended.iter().find(|(d, _)| d == data)?;
        Some(Pressed::Ended(ended.1.clone()))
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

    /// Question `id` ended, as `describe` says given who pressed the answer (if a press
    /// did): its buttons now say so, and where it was asked is returned with the text the
    /// message should now show.
    pub fn end(
        &self,
        id: &str,
        describe: impl FnOnce(Option<&str>) -> String,
    ) -> Option<(Asked, String)> {
        let mut state = self.lock();
        let by = state.answered_by.remove(id);
        state.also.remove(id);
        let how = describe(by.as_deref());
        let State { waiting, ended, .. } = &mut *state;
        retire(waiting, ended, id, &how);
        let asked = state.asked.remove(id)?;
        let text = format!("{}\n{how}.", asked.text);
        Some((asked, text))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<A>> {
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
pub fn ending(outcome: Approval, by: Option<&str>) -> String {
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
        let buttons = Buttons::<Approval>::default();
        let offered = buttons.offer("ab12", &CHOICES);
        assert_eq!(offered.len(), 2);
        assert_ne!(offered[0].data, offered[1].data);
        assert!(!offered[0].data.contains("ab12"), "the data is opaque");
        assert_eq!(
            buttons.pressed(&offered[1].data),
            Some(Pressed::Waiting {
                id: "ab12".into(),
                decision: Approval::Deny,
                label: "Deny".into(),
                also: None,
            })
        );
        assert!(buttons.answer_by("ab12", "Ann", || true));
        assert!(
            !buttons.answer_by("ab12", "Bob", || false),
            "an answer that lost"
        );
        let denied = |by: Option<&str>| ending(Approval::Deny, by);
        assert!(buttons.end("ab12", denied).is_none(), "never sent");
        let Some(Pressed::Ended(late)) = buttons.pressed(&offered[0].data) else {
            panic!("still waiting");
        };
        assert_eq!(late, "Already ended: ⛔ denied by Ann.");
        assert_eq!(buttons.pressed("forged"), None);
        let also = buttons.offer_to("ef56", &CHOICES, "telegram:9");
        let Some(Pressed::Waiting { also, .. }) = buttons.pressed(&also[0].data) else {
            panic!("not waiting");
        };
        assert_eq!(also.as_deref(), Some("telegram:9"));
    }

    #[test]
    fn ending_gives_the_message_its_outcome() {
        let buttons = Buttons::<Approval>::default();
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
        let timed_out = |by: Option<&str>| ending(Approval::TimedOut, by);
        let (asked, text) = buttons.end("cd34", timed_out).unwrap();
        assert_eq!(asked.message.message_id, "7");
        assert_eq!(text, "🔐 Approval needed\n⌛ no answer in time: denied.");
    }
}
