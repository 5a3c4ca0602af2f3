//! What an unknown sender under `dm_policy = "pairing"` is told (SPEC 1.3): their pairing code
//! (the same one while it is valid), or, when the channel account already has
//! [`MAX_PENDING`](crate::store::MAX_PENDING) codes waiting, to try again when the oldest
//! expires. That "try later" is said to one sender at most once per [`NOTICE_EVERY`], and to at
//! most [`MAX_NOTED`] senders per [`NOTICE_EVERY`], so strangers cannot make the bot spam.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chela_channel::Inbound;
use tokio::time::Instant;

use super::{Intake, IntakePort};
use crate::store::PairingOutcome;

/// How often one sender is told to try later.
pub const NOTICE_EVERY: Duration = Duration::from_secs(10 * 60);
/// Most senders told to try later within [`NOTICE_EVERY`]; past it the others hear nothing.
pub const MAX_NOTED: usize = 256;

/// Who was told to try later, and when: the pace of those notices.
#[derive(Debug, Default)]
pub struct Notices {
    told: Mutex<HashMap<String, Instant>>,
}

impl Notices {
    /// Whether `who` may be told to try later now; notes it when so.
    pub fn may_tell(&self, who: &str) -> bool {
        let now = Instant::now();
        let Ok(mut told) = self.told.lock() else {
            return false;
        };
        let recent = |at: &Instant| now.duration_since(*at) < NOTICE_EVERY;
        if told.get(who).is_some_and(recent) {
            return false;
        }
        if told.len() >= MAX_NOTED {
            told.retain(|_, at| recent(at));
        }
        if told.len() >= MAX_NOTED {
            return false;
        }
        told.insert(who.to_owned(), now);
        true
    }
}

/// Answers an unknown DM sender under `pairing`: a code, or "try later" when too many wait.
pub(super) async fn answer_stranger(intake: &Intake, port: &dyn IntakePort, inbound: &Inbound) {
    let (conv, sender) = (&inbound.conversation, &inbound.sender);
    let outcome = intake.store.request_pairing(
        &conv.channel,
        &conv.account,
        &sender.id,
        &sender.name,
        crate::domain::message::now_ms(),
    );
    match outcome {
        Ok(PairingOutcome::New(code)) => issued(intake, port, inbound, code, true).await,
        Ok(PairingOutcome::Existing(code)) => issued(intake, port, inbound, code, false).await,
        Ok(PairingOutcome::TooMany { retry_after_ms }) => {
            let who = format!("{}:{}:{}", conv.channel, conv.account, sender.id);
            // A native command must be answered; a typed message is, now and then.
            let tell = inbound.interaction.is_some() || intake.pairing_notices.may_tell(&who);
            tracing::info!(channel = %conv.channel, sender = %sender.id, told = tell, "pairing refused: too many pending codes");
            if tell {
                port.answer(inbound, &try_later_text(retry_after_ms)).await;
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot issue a pairing code"),
    }
}

/// Tells the stranger of `inbound` their pairing code (`new`: just issued); the message is
/// held, and a new request asked in the owners' DMs (`IntakePort::pairing_asked`).
async fn issued(
    intake: &Intake,
    port: &dyn IntakePort,
    inbound: &Inbound,
    code: String,
    new: bool,
) {
    let (conv, sender) = (&inbound.conversation, &inbound.sender);
    tracing::info!(channel = %conv.channel, sender = %sender.id, new, "pairing code issued");
    port.answer(inbound, &code_text(&conv.channel, &code)).await;
    if let Ok(port) = intake.port() {
        port.pairing_asked(inbound.clone(), code, new).await;
    }
}

/// The pairing prompt with `code`.
fn code_text(channel: &str, code: &str) -> String {
    format!(
        "This bot is private. Ask its owner to approve you with:\n\n    chela pairing approve {channel} {code}\n\nThe code is valid for one hour."
    )
}

/// The answer to a stranger while too many codes wait: when to try again.
fn try_later_text(retry_after_ms: u64) -> String {
    let minutes = retry_after_ms.div_ceil(60_000).max(1);
    let unit = if minutes == 1 { "minute" } else { "minutes" };
    format!(
        "This bot is private, and too many requests are waiting for its owner's approval. Try again in about {minutes} {unit}."
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_sender_is_told_to_try_later_once_per_window() {
        let notices = Notices::default();
        assert!(notices.may_tell("telegram:default:9"));
        assert!(!notices.may_tell("telegram:default:9"));
        assert!(notices.may_tell("telegram:default:8"), "others are told");
        tokio::time::advance(NOTICE_EVERY - Duration::from_millis(1)).await;
        assert!(!notices.may_tell("telegram:default:9"));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(notices.may_tell("telegram:default:9"));
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_max_noted_senders_are_told_per_window() {
        let notices = Notices::default();
        for i in 0..MAX_NOTED {
            assert!(notices.may_tell(&format!("s{i}")));
        }
        assert!(!notices.may_tell("one more"), "the bot stays quiet");
        tokio::time::advance(NOTICE_EVERY).await;
        assert!(notices.may_tell("one more"), "room once the window passed");
    }

    #[test]
    fn try_later_says_when_in_whole_minutes() {
        assert!(try_later_text(1).ends_with("in about 1 minute."));
        assert!(try_later_text(60_001).ends_with("in about 2 minutes."));
        assert!(try_later_text(3_600_001).ends_with("in about 61 minutes."));
    }
}
