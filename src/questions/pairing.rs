//! Pairing requests asked in the chat: when a stranger gets a new pairing code, each owner
//! configured for that channel gets a DM naming them (their name is theirs: untrusted) with
//! Approve and Reject buttons. A press answers like `chela pairing approve|reject`, by the
//! same rule as `/approve` (owners only); every owner's message is then edited to say who
//! answered what. The stranger's messages sent before approval are held here (at most
//! [`HELD_MAX`], in memory) and handed back with the approval, to be answered.
//!
//! Kept in memory like the approvals' buttons: after a restart a press says the request
//! ended, the typed `chela pairing approve` keeps working, and the approved stranger is asked
//! to send their message again.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use chela_channel::{Button, Inbound};
use tokio::time::Instant;

use super::Desk;
use super::buttons::Asked;
use crate::delivery::Notices;
use crate::intake::Router;
use crate::store::{CODE_TTL_MS, PairingRequest};

/// What an approved stranger is told when their earlier messages are answered now.
const IN_AND_ANSWERED: &str =
    "You're in: the bot's owner approved you. Your messages from before are answered now.";
/// What an approved stranger is told when none of their earlier messages is known here.
const IN_SEND_AGAIN: &str = "You're in: the bot's owner approved you. Send your message again.";

/// Messages of one stranger held until the approval.
pub const HELD_MAX: usize = 5;
/// Requests asked at once, at most (the store allows 20 per channel account).
const OPEN_MAX: usize = 256;
/// New requests asked in the owners' DMs per channel and hour, at most: past it a request
/// waits in `chela pairing list` alone, so a crowd of strangers cannot flood the owners.
pub const ASKED_PER_HOUR: usize = 10;
/// The window of [`ASKED_PER_HOUR`].
const HOUR: Duration = Duration::from_secs(3600);

/// An approved stranger, and what they sent while waiting (oldest first).
#[derive(Debug, Clone)]
pub struct Paired {
    /// The request that was approved.
    pub request: PairingRequest,
    /// Their messages from before the approval, to answer now; empty when none is known
    /// (the request was asked before a restart, or they sent nothing but the first).
    pub held: Vec<Inbound>,
}

/// What a press on a pairing button means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingPressed {
    /// It answers request `key` (`channel:code`): approve when true, else reject.
    Waiting {
        /// The request's key.
        key: String,
        /// Approve (true) or reject.
        approve: bool,
    },
    /// The request ended; the text says how.
    Ended(String),
}

/// How a request ended: each owner's message with the text it should now show, and the
/// stranger's held messages.
type Ending = (Vec<(Asked, String)>, Vec<Inbound>);

/// One request asked in the owners' DMs.
#[derive(Debug)]
struct Open {
    request: PairingRequest,
    asked: Vec<Asked>,
    held: Vec<Inbound>,
    since: Instant,
    /// A press is answering it (in the store): a second press waits its turn.
    answering: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Button data -> (request key, approve).
    waiting: HashMap<String, (String, bool)>,
    /// Request key -> the request, where it was asked, what the stranger sent meanwhile.
    open: HashMap<String, Open>,
    /// Button data of ended requests -> how they ended, oldest first.
    ended: VecDeque<(String, String)>,
    /// When requests were asked, per channel, within the last hour.
    asked_at: HashMap<String, VecDeque<Instant>>,
}

/// The pairing requests waiting in owners' DMs.
#[derive(Debug, Default)]
pub struct PairingQuestions {
    state: Mutex<State>,
}

/// The key of the request with `code` on `channel`.
fn key_of(channel: &str, code: &str) -> String {
    format!("{channel}:{code}")
}

impl PairingQuestions {
    /// Opens `request`, holding `first` (the message that asked): the Approve and Reject
    /// buttons, with fresh random tokens; `None` when it is open already, or its channel
    /// had [`ASKED_PER_HOUR`] requests asked within the hour.
    pub fn open(&self, request: &PairingRequest, first: Inbound) -> Option<Vec<Button>> {
        let mut state = self.lock();
        let ttl = Duration::from_millis(CODE_TTL_MS);
        let expired: Vec<String> = state
            .open
            .iter()
            .filter(|(_, o)| o.since.elapsed() >= ttl)
            .map(|(key, _)| key.clone())
            .collect();
        for key in expired {
            state.open.remove(&key);
            let State { waiting, ended, .. } = &mut *state;
            super::buttons::retire(waiting, ended, &key, "⌛ expired");
        }
        let key = key_of(&request.channel, &request.code);
        if state.open.contains_key(&key) || state.open.len() >= OPEN_MAX {
            return None;
        }
        let asked_at = state.asked_at.entry(request.channel.clone()).or_default();
        while asked_at.front().is_some_and(|at| at.elapsed() >= HOUR) {
            asked_at.pop_front();
        }
        if asked_at.len() >= ASKED_PER_HOUR {
            tracing::info!(channel = %request.channel, "pairing request not asked in the owners' DMs: {ASKED_PER_HOUR} were this hour (see chela pairing list)");
            return None;
        }
        asked_at.push_back(Instant::now());
        state.open.insert(
            key.clone(),
            Open {
                request: request.clone(),
                asked: Vec::new(),
                held: vec![first],
                since: Instant::now(),
                answering: false,
            },
        );
        let buttons = [("Approve", true), ("Reject", false)].map(|(label, approve)| {
            let data = uuid::Uuid::new_v4().simple().to_string();
            state.waiting.insert(data.clone(), (key.clone(), approve));
            Button {
                label: label.to_owned(),
                data,
            }
        });
        Some(buttons.to_vec())
    }

    /// Holds another message of the stranger of request `code` on `channel` (the oldest
    /// ones are kept, at most [`HELD_MAX`]); false when that request is not open here.
    pub fn hold(&self, channel: &str, code: &str, inbound: Inbound) -> bool {
        let mut state = self.lock();
        let Some(open) = state.open.get_mut(&key_of(channel, code)) else {
            return false;
        };
        if open.held.len() < HELD_MAX {
            open.held.push(inbound);
        }
        true
    }

    /// What a press on the button with `data` means; `None` when it is no pairing button.
    pub fn pressed(&self, data: &str) -> Option<PairingPressed> {
        let state = self.lock();
        if let Some((key, approve)) = state.waiting.get(data) {
            return Some(PairingPressed::Waiting {
                key: key.clone(),
                approve: *approve,
            });
        }
        let ended = state.ended.iter().find(|(d, _)| d == data)?;
        Some(PairingPressed::Ended(ended.1.clone()))
    }

    /// Claims request `key` for one press's answer: the request, or what to tell the
    /// presser (it ended, or another press is answering it).
    fn claim(&self, key: &str) -> Result<PairingRequest, &'static str> {
        let mut state = self.lock();
        let open = state.open.get_mut(key).ok_or(super::buttons::UNKNOWN)?;
        if open.answering {
            return Err("This request is being answered.");
        }
        open.answering = true;
        Ok(open.request.clone())
    }

    /// Gives back the claim on request `key` (its answer failed).
    fn unclaim(&self, key: &str) {
        if let Some(open) = self.lock().open.get_mut(key) {
            open.answering = false;
        }
    }

    /// Ends request `key` with `how` ("✅ approved by Ann"): its buttons now say so; returns
    /// where it was asked, the text each message should now show, and the held messages.
    fn end(&self, key: &str, how: &str) -> Option<Ending> {
        let mut state = self.lock();
        let State { waiting, ended, .. } = &mut *state;
        super::buttons::retire(waiting, ended, key, how);
        let open = state.open.remove(key)?;
        let edits = open
            .asked
            .into_iter()
            .map(|asked| {
                let text = format!("{}\n{how}.", asked.text);
                (asked, text)
            })
            .collect();
        Some((edits, open.held))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What an owner is asked about `request`.
fn question_text(request: &PairingRequest) -> String {
    format!(
        "🔑 Pairing request on {channel}: {name} (unverified; user id {id}) asks to talk to \
         the bot.\nApprove or reject below, or type: chela pairing approve {channel} {code}",
        channel = request.channel,
        name = as_code(&crate::domain::text::quoted(&request.sender_name)),
        id = request.sender_id,
        code = request.code,
    )
}

/// `text` as inline code, so that no markup in it (a link, bold) is rendered: a stranger's
/// name cannot dress up as the bot's own link. Its backticks become `'`.
fn as_code(text: &str) -> String {
    format!("`{}`", text.replace('`', "'"))
}

impl Desk {
    /// Asks each of `owners` (user ids on the request's channel) in a DM whether to let the
    /// stranger of `request` in, with `buttons` (from [`PairingQuestions::open`]).
    pub async fn ask_owners(
        &self,
        request: &PairingRequest,
        buttons: &[Button],
        owners: &[String],
    ) {
        let Some(channel) = self.notices.channel(&request.channel) else {
            return;
        };
        let text = question_text(request);
        let key = key_of(&request.channel, &request.code);
        for owner in owners {
            let to = match channel.direct(owner).await {
                Ok(to) => to,
                Err(e) => {
                    tracing::warn!(error = %e, channel = %request.channel, "cannot reach an owner about a pairing request");
                    continue;
                }
            };
            if let Some(message) = self.notices.ask(&to, &text, buttons).await {
                let asked = Asked {
                    to,
                    message,
                    text: text.clone(),
                };
                // Kept (and in the store) only while the request is open: one answered
                // meanwhile leaves this late message as it is.
                let kept = match self.pairing.lock().open.get_mut(&key) {
                    Some(open) => {
                        open.asked.push(asked.clone());
                        true
                    }
                    None => false,
                };
                if kept {
                    self.ledger.add(&format!("pairing:{key}"), &asked).await;
                }
            }
        }
    }

    /// The pairing requests asked here (to hold a waiting stranger's later messages).
    pub fn pairing(&self) -> &PairingQuestions {
        &self.pairing
    }

    /// `request` was approved (`approved`) or rejected by a typed answer (`chela pairing`,
    /// the RPC, the panel): its buttons end, every owner's message says so; an approved
    /// stranger is given back with what they sent meanwhile (nothing when the request was
    /// not asked here, as after a restart).
    pub async fn answered_pairing(
        &self,
        request: PairingRequest,
        approved: bool,
    ) -> Option<Paired> {
        let how = match approved {
            true => "✅ approved with chela pairing",
            false => "⛔ rejected with chela pairing",
        };
        let key = key_of(&request.channel, &request.code);
        let (edits, held) = self.pairing.end(&key, how).unwrap_or_default();
        for (asked, text) in edits {
            self.notices.edit(&asked.to, &asked.message, &text).await;
        }
        self.ledger.remove(&format!("pairing:{key}")).await;
        approved.then_some(Paired { request, held })
    }

    /// Answers pairing request `key` by a press of `who`: approves or rejects it in the
    /// store, edits every owner's message to say so; the presser's note, and the approved
    /// stranger with what they sent meanwhile. One press answers at a time.
    pub(super) async fn answer_pairing(
        &self,
        key: &str,
        approve: bool,
        who: &str,
    ) -> (String, Option<Paired>) {
        let request = match self.pairing.claim(key) {
            Ok(request) => request,
            Err(why) => return (why.to_owned(), None),
        };
        let (channel, code) = (&request.channel, &request.code);
        let now = crate::domain::message::now_ms();
        let answered = match approve {
            true => self
                .store
                .approve_pairing(channel, code, now, false)
                .await
                .map(|r| r.map(|(request, _)| request)),
            false => self.store.reject_pairing(channel, code, now).await,
        };
        let (note, how) = match (&answered, approve) {
            (Ok(Some(_)), true) => ("Approved.", format!("✅ approved by {who}")),
            (Ok(Some(_)), false) => ("Rejected.", format!("⛔ rejected by {who}")),
            // Answered meanwhile another way (typed, the panel), or expired.
            (Ok(None), _) => {
                match self
                    .store
                    .is_paired(channel, &request.account, &request.sender_id)
                {
                    Ok(true) => ("Already approved.", "✅ approved".to_owned()),
                    _ => ("This request has expired.", "⌛ expired".to_owned()),
                }
            }
            (Err(e), _) => {
                tracing::error!(error = %e, "cannot answer a pairing request");
                self.pairing.unclaim(key);
                return ("Could not answer; try again.".to_owned(), None);
            }
        };
        let Some((edits, held)) = self.pairing.end(key, &how) else {
            return (note.to_owned(), None);
        };
        for (asked, text) in edits {
            self.notices.edit(&asked.to, &asked.message, &text).await;
        }
        self.ledger.remove(&format!("pairing:{key}")).await;
        let paired = match answered {
            Ok(Some(request)) if approve => Some(Paired { request, held }),
            _ => None,
        };
        (note.to_owned(), paired)
    }
}

/// Tells the approved stranger of `paired` they are in (through `notices`), then takes
/// their held messages in again through `router`, in order, now as an approved sender's.
pub async fn welcome(notices: &Notices, router: &Router, paired: Paired) {
    let request = &paired.request;
    let to = match paired.held.first() {
        Some(first) => Ok(first.conversation.clone()),
        None => match notices.channel(&request.channel) {
            Some(channel) => channel.direct(&request.sender_id).await,
            None => return,
        },
    };
    let text = match paired.held.is_empty() {
        true => IN_SEND_AGAIN,
        false => IN_AND_ANSWERED,
    };
    match to {
        Ok(to) => notices.say(&to, text).await,
        Err(e) => tracing::warn!(error = %e, "cannot tell an approved stranger they are in"),
    }
    for inbound in paired.held {
        if let Err(e) = chela_channel::InboundSink::accept_in_order(router, inbound).await {
            tracing::error!(error = %e, "cannot take in a message held until a pairing approval");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn request() -> PairingRequest {
        PairingRequest {
            code: "ABCD2345".into(),
            channel: "telegram".into(),
            account: "default".into(),
            sender_id: "9".into(),
            sender_name: "Mallory\napproved: yes".into(),
            created_ms: 0,
        }
    }

    fn inbound(text: &str) -> Inbound {
        Inbound {
            conversation: chela_channel::Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind: chela_channel::ChatKind::Direct,
                chat_id: "9".into(),
                thread_id: None,
            },
            sender: Default::default(),
            message_id: text.into(),
            text: text.into(),
            reply_to: None,
            mentioned: false,
            timestamp_ms: 0,
            interaction: None,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn a_request_is_opened_once_holds_a_few_messages_and_ends_with_its_buttons() {
        let questions = PairingQuestions::default();
        let buttons = questions.open(&request(), inbound("hi")).unwrap();
        assert!(questions.open(&request(), inbound("again")).is_none());
        assert_eq!(buttons.len(), 2);
        assert!(!buttons[0].data.contains("ABCD"), "opaque");
        for n in 0..10 {
            assert!(questions.hold("telegram", "ABCD2345", inbound(&format!("m{n}"))));
        }
        assert!(!questions.hold("telegram", "OTHER", inbound("x")));
        let key = key_of("telegram", "ABCD2345");
        assert_eq!(
            questions.pressed(&buttons[1].data),
            Some(PairingPressed::Waiting {
                key: key.clone(),
                approve: false
            })
        );
        assert_eq!(questions.pressed("not ours"), None);
        let (edits, held) = questions.end(&key, "✅ approved by Ann").unwrap();
        assert!(edits.is_empty());
        let texts: Vec<&str> = held.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["hi", "m0", "m1", "m2", "m3"]);
        assert_eq!(
            questions.pressed(&buttons[0].data),
            Some(PairingPressed::Ended(
                "Already ended: ✅ approved by Ann.".into()
            ))
        );
        assert!(questions.end(&key, "again").is_none());
    }

    #[test]
    fn the_question_names_the_stranger_as_untrusted_and_gives_the_typed_form() {
        let text = question_text(&request());
        assert!(
            text.contains("`\"Mallory\\napproved: yes\"` (unverified"),
            "{text}"
        );
        assert!(text.ends_with("chela pairing approve telegram ABCD2345"));
        // A link or markup in a name stays text: inline code, its backticks made quotes.
        let link = PairingRequest {
            sender_name: "[✅ Verified](https://evil.example) `x".into(),
            ..request()
        };
        let text = question_text(&link);
        assert!(
            text.contains("`\"[✅ Verified](https://evil.example) 'x\"`"),
            "{text}"
        );
    }

    #[test]
    fn one_press_answers_at_a_time() {
        let questions = PairingQuestions::default();
        questions.open(&request(), inbound("hi")).unwrap();
        let key = key_of("telegram", "ABCD2345");
        assert_eq!(questions.claim(&key).unwrap().code, "ABCD2345");
        assert_eq!(
            questions.claim(&key),
            Err("This request is being answered.")
        );
        questions.unclaim(&key);
        assert!(
            questions.claim(&key).is_ok(),
            "free again after a failed answer"
        );
        assert!(questions.claim("telegram:NONE").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_a_few_requests_an_hour_reach_the_owners_of_a_channel() {
        let questions = PairingQuestions::default();
        let nth = |n: usize| PairingRequest {
            code: format!("CODE{n}"),
            ..request()
        };
        for n in 0..ASKED_PER_HOUR {
            assert!(questions.open(&nth(n), inbound("hi")).is_some(), "{n}");
        }
        assert!(
            questions.open(&nth(99), inbound("hi")).is_none(),
            "over the cap"
        );
        let discord = PairingRequest {
            channel: "discord".into(),
            ..nth(100)
        };
        assert!(
            questions.open(&discord, inbound("hi")).is_some(),
            "per channel"
        );
        tokio::time::advance(HOUR).await;
        assert!(
            questions.open(&nth(101), inbound("hi")).is_some(),
            "an hour later"
        );
    }
}
