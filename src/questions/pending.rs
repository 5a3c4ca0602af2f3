//! One registry of questions waiting for an answer in the chat. It serves both kinds: ACP
//! permission questions (`ask`: answered `allow` / `deny` in the bound conversation,
//! oldest first) and exec approvals (`approvals`: answered by id with `/approve`).
//! Whoever opens a question awaits its answer with a timeout and forgets it afterwards, so the
//! registry holds only questions somebody is waiting on.

use std::sync::Mutex;

use tokio::sync::oneshot;

/// Characters of a question id (`/approve <id> ...`).
const ID_LEN: usize = 6;

/// A question somebody waits on.
struct Waiting<A> {
    id: String,
    session_key: String,
    summary: String,
    /// Where it was asked (a conversation's place (`approvals::place_of`)); empty
    /// when not said.
    place: String,
    answer: oneshot::Sender<A>,
}

/// Why an answer reached nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotWaiting {
    /// No question has that id (answered, timed out or stopped).
    #[error("no such question is waiting")]
    Unknown,
    /// The one asking stopped waiting in the meantime.
    #[error("the question is no longer waiting")]
    Gone,
}

/// Questions waiting for an answer of type `A`, oldest first.
pub struct PendingQuestions<A> {
    waiting: Mutex<Vec<Waiting<A>>>,
}

impl<A> Default for PendingQuestions<A> {
    fn default() -> Self {
        PendingQuestions {
            waiting: Mutex::new(Vec::new()),
        }
    }
}

impl<A> PendingQuestions<A> {
    /// Opens a question of session `session_key` about `summary`; its short id, and where
    /// its answer arrives.
    pub fn open(&self, session_key: &str, summary: &str) -> (String, oneshot::Receiver<A>) {
        self.open_tagged("", session_key, summary, "")
    }

    /// [`PendingQuestions::open`] with an id that starts with `tag` (a node's, so that ids
    /// of different nodes differ): `tag` and random hex, [`ID_LEN`] characters in all (at
    /// least four random), asked in `place`.
    pub fn open_tagged(
        &self,
        tag: &str,
        session_key: &str,
        summary: &str,
        place: &str,
    ) -> (String, oneshot::Receiver<A>) {
        let (tx, rx) = oneshot::channel();
        let Ok(mut waiting) = self.waiting.lock() else {
            return (String::new(), rx);
        };
        let random = ID_LEN.saturating_sub(tag.len()).max(4);
        let id = loop {
            let hex = uuid::Uuid::new_v4().simple().to_string();
            let candidate = format!("{tag}{}", &hex[..random]);
            if !waiting.iter().any(|w| w.id == candidate) {
                break candidate;
            }
        };
        waiting.push(Waiting {
            id: id.clone(),
            session_key: session_key.to_owned(),
            summary: summary.to_owned(),
            place: place.to_owned(),
            answer: tx,
        });
        (id, rx)
    }

    /// Opens a question with id `id` as given (tests: two nodes holding one id).
    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    pub fn open_as(&self, id: &str, session_key: &str, summary: &str) -> oneshot::Receiver<A> {
        self.open_as_in(id, session_key, summary, "")
    }

    /// [`PendingQuestions::open_as`] asked in `place` (tests).
    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    pub fn open_as_in(
        &self,
        id: &str,
        session_key: &str,
        summary: &str,
        place: &str,
    ) -> oneshot::Receiver<A> {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().push(Waiting {
            id: id.to_owned(),
            session_key: session_key.to_owned(),
            summary: summary.to_owned(),
            place: place.to_owned(),
            answer: tx,
        });
        rx
    }

    /// Forgets question `id` (answered, timed out or given up).
    pub fn forget(&self, id: &str) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.retain(|w| w.id != id);
        }
    }

    /// True when session `session_key` has a question waiting.
    pub fn is_waiting(&self, session_key: &str) -> bool {
        self.waiting
            .lock()
            .is_ok_and(|w| w.iter().any(|q| q.session_key == session_key))
    }

    /// Answers question `id`; its summary when the answer reached the one asking.
    pub fn answer(&self, id: &str, answer: A) -> Result<String, NotWaiting> {
        self.answer_placed(id, answer).map(|(summary, _)| summary)
    }

    /// [`PendingQuestions::answer`]: its summary and where it was asked.
    pub fn answer_placed(&self, id: &str, answer: A) -> Result<(String, String), NotWaiting> {
        let question = self.take(|w| w.id == id).ok_or(NotWaiting::Unknown)?;
        question
            .answer
            .send(answer)
            .map(|()| (question.summary, question.place))
            .map_err(|_| NotWaiting::Gone)
    }

    /// Answers the oldest question of session `session_key` whose asker still waits; false
    /// when there was none.
    pub fn answer_oldest(&self, session_key: &str, mut answer: A) -> bool {
        while let Some(question) = self.take(|w| w.session_key == session_key) {
            match question.answer.send(answer) {
                Ok(()) => return true,
                Err(unsent) => answer = unsent,
            }
        }
        false
    }

    /// The waiting questions: id, session and summary, in the order they were asked.
    pub fn list(&self) -> Vec<(String, String, String)> {
        self.list_in(None)
    }

    /// [`PendingQuestions::list`], of the questions asked in `place` only when given.
    pub fn list_in(&self, place: Option<&str>) -> Vec<(String, String, String)> {
        self.waiting
            .lock()
            .map(|w| {
                w.iter()
                    .filter(|q| place.is_none_or(|p| p == q.place))
                    .map(|q| (q.id.clone(), q.session_key.clone(), q.summary.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Removes and returns the oldest question that `matches`.
    fn take(&self, matches: impl Fn(&Waiting<A>) -> bool) -> Option<Waiting<A>> {
        let mut waiting = self.waiting.lock().ok()?;
        let at = waiting.iter().position(matches)?;
        Some(waiting.remove(at))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_question_of_a_session_is_answered_first() {
        let q = PendingQuestions::<u8>::default();
        assert!(!q.answer_oldest("k", 1));
        let (_, first) = q.open("k", "a");
        let (second_id, second) = q.open("k", "b");
        let (_, _other) = q.open("j", "c");
        assert!(q.is_waiting("k"));
        assert!(q.answer_oldest("k", 2));
        assert_eq!(first.await.unwrap(), 2);
        q.forget(&second_id);
        assert!(!q.is_waiting("k"));
        drop(second);
        assert!(!q.answer_oldest("k", 3));
        assert!(q.is_waiting("j"));
    }

    #[tokio::test]
    async fn an_answer_by_id_reaches_its_question_once() {
        let q = PendingQuestions::<u8>::default();
        let (id, answer) = q.open("k", "ls -la");
        assert_eq!(id.len(), ID_LEN);
        assert_eq!(q.list(), [(id.clone(), "k".into(), "ls -la".into())]);
        assert_eq!(q.answer(&id, 7).unwrap(), "ls -la");
        assert_eq!(answer.await.unwrap(), 7);
        assert_eq!(q.answer(&id, 8), Err(NotWaiting::Unknown));
        assert!(q.list().is_empty());
    }

    #[test]
    fn tagged_ids_start_with_the_tag_and_keep_their_length() {
        let q = PendingQuestions::<u8>::default();
        let (id, _answer) = q.open_tagged("zq", "k", "ls", "");
        assert!(id.starts_with("zq"), "{id}");
        assert_eq!(id.len(), ID_LEN);
        let (id, _answer) = q.open_tagged("longer", "k", "ls", "");
        assert_eq!(id.len(), "longer".len() + 4, "{id}");
    }

    #[tokio::test]
    async fn an_asker_that_gave_up_skips_to_the_next_question() {
        let q = PendingQuestions::<u8>::default();
        let (gone_id, gone) = q.open("k", "a");
        let (_, waiting) = q.open("k", "b");
        drop(gone);
        assert!(q.answer_oldest("k", 4));
        assert_eq!(waiting.await.unwrap(), 4);
        let (id, dropped) = q.open("k", "c");
        drop(dropped);
        assert_eq!(q.answer(&id, 5), Err(NotWaiting::Gone));
        assert_eq!(q.answer(&gone_id, 5), Err(NotWaiting::Unknown));
    }
}
