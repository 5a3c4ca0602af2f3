//! What rests after failing: a key of a provider (rate limited, refused) or a model of a
//! provider (down, overloaded, slow), until when, and how many times in a row it failed.
//! One [`Health`] is shared by every agent of a gateway, so a key that hit its limit for one
//! agent rests for all. Times are `tokio::time::Instant`s, so tests pause the clock.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::super::ProviderError;
use super::failure::{Failure, describe};

/// What can rest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// Key number `index` of provider `provider`.
    Key {
        /// The provider's name.
        provider: String,
        /// The key's place in the provider's list.
        index: usize,
    },
    /// Model `model` of provider `provider`.
    Model {
        /// The provider's name.
        provider: String,
        /// The model.
        model: String,
    },
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Key { provider, index } => write!(f, "{provider} key {}", index + 1),
            Subject::Model { provider, model } => write!(f, "{provider}/{model}"),
        }
    }
}

#[derive(Debug, Clone)]
struct Rest {
    until: Instant,
    streak: u32,
    why: String,
}

/// Entries kept before the ones rested out longest ago are forgotten.
const MAX_ENTRIES: usize = 256;

/// The rests of every key and model that failed lately.
#[derive(Debug, Default)]
pub struct Health {
    rests: Mutex<HashMap<Subject, Rest>>,
}

impl Health {
    /// How much longer `subject` rests at `now`, if it does.
    pub fn resting(&self, subject: &Subject, now: Instant) -> Option<Duration> {
        let rests = self.rests.lock().unwrap_or_else(PoisonError::into_inner);
        rests
            .get(subject)
            .filter(|rest| rest.until > now)
            .map(|rest| rest.until - now)
    }

    /// Notes that `subject` failed with `error` at `now`; returns how long it rests.
    pub fn failed(
        &self,
        subject: Subject,
        failure: Failure,
        error: &ProviderError,
        now: Instant,
    ) -> Duration {
        let mut rests = self.rests.lock().unwrap_or_else(PoisonError::into_inner);
        if rests.len() >= MAX_ENTRIES && !rests.contains_key(&subject) {
            forget_oldest(&mut rests);
        }
        let streak = rests.get(&subject).map_or(0, |r| r.streak) + 1;
        let rest = failure.cooldown(streak, error);
        let why = describe(failure, error);
        rests.insert(
            subject,
            Rest {
                until: now + rest,
                streak,
                why,
            },
        );
        rest
    }

    /// Notes that `subject` answered: it no longer rests and its streak starts again.
    pub fn answered(&self, subject: &Subject) {
        let mut rests = self.rests.lock().unwrap_or_else(PoisonError::into_inner);
        rests.remove(subject);
    }

    /// Which of `subjects` rest at `now`, a line each (`openai/gpt-4.1 rests 25 s more:
    /// rate limited (429)`), sorted.
    pub fn lines(&self, subjects: &[Subject], now: Instant) -> Vec<String> {
        let rests = self.rests.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lines: Vec<String> = rests
            .iter()
            .filter(|(subject, rest)| rest.until > now && subjects.contains(subject))
            .map(|(subject, rest)| {
                let left = (rest.until - now).as_secs().max(1);
                format!("{subject} rests {left} s more: {}", rest.why)
            })
            .collect();
        lines.sort();
        lines
    }
}

/// Drops the model entry whose rest ended longest ago (or ends soonest); keys (as many as
/// configured) are kept unless nothing else is left.
fn forget_oldest(rests: &mut HashMap<Subject, Rest>) {
    let is_model = |subject: &Subject| matches!(subject, Subject::Model { .. });
    let oldest = rests
        .iter()
        .filter(|(subject, _)| is_model(subject))
        .min_by_key(|(_, rest)| rest.until)
        .or_else(|| rests.iter().min_by_key(|(_, rest)| rest.until))
        .map(|(subject, _)| subject.clone());
    if let Some(subject) = oldest {
        rests.remove(&subject);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> Subject {
        Subject::Model {
            provider: "p".into(),
            model: name.into(),
        }
    }

    fn server_error() -> ProviderError {
        ProviderError::Status {
            status: 502,
            message: "x".into(),
            retry_after: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_rests_longer_each_time_until_an_answer() {
        let health = Health::default();
        let now = Instant::now();
        let fail = |at| health.failed(model("m"), Failure::ServerError, &server_error(), at);
        assert_eq!(fail(now), Duration::from_secs(30));
        assert_eq!(
            health.resting(&model("m"), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(health.resting(&model("other"), now), None);
        let later = now + Duration::from_secs(31);
        assert_eq!(health.resting(&model("m"), later), None);
        assert_eq!(fail(later), Duration::from_secs(60));
        assert_eq!(
            health.lines(&[model("m")], later),
            ["p/m rests 60 s more: server error (502)"]
        );
        assert!(health.lines(&[model("other")], later).is_empty());
        health.answered(&model("m"));
        assert_eq!(fail(later), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn the_map_stays_bounded() {
        let health = Health::default();
        let now = Instant::now();
        for i in 0..MAX_ENTRIES + 10 {
            health.failed(
                model(&i.to_string()),
                Failure::NotFound,
                &server_error(),
                now + Duration::from_millis(i as u64),
            );
        }
        let kept = health
            .rests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert_eq!(kept, MAX_ENTRIES);
        assert_eq!(health.resting(&model("0"), now), None);
        let last = model(&(MAX_ENTRIES + 9).to_string());
        assert!(health.resting(&last, now).is_some());
        // A key is kept while model entries can go.
        let key = Subject::Key {
            provider: "p".into(),
            index: 0,
        };
        health.failed(key.clone(), Failure::RateLimited, &server_error(), now);
        for i in 0..MAX_ENTRIES {
            let later = now + Duration::from_secs(100);
            let more = model(&format!("more {i}"));
            health.failed(more, Failure::NotFound, &server_error(), later);
        }
        assert!(health.resting(&key, now).is_some(), "keys are kept");
    }
}
