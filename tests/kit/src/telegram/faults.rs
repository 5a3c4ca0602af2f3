//! Fault injection on the reply path: `sendMessage`, `editMessageText`, `deleteMessage` and
//! the uploads (`sendPhoto`, `sendDocument`, `sendVoice`)
//! fail at configured rates, each call drawing from a generator seeded by the test, the way a
//! flaky Bot API (or the proxy in front of it) does. A faulty call is not executed, except
//! one whose answer is lost: it is carried out, then the connection drops before the answer.

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::reply::ApiError;

/// Rates (0.0 to 1.0, summing to at most 1.0) of the faults injected into the bot's sends,
/// edits and deletes; see [`FakeTelegram::inject_faults`](super::FakeTelegram::inject_faults).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Seed of the generator: the same seed gives the same sequence of faults.
    pub seed: u64,
    /// 429 `Too Many Requests: retry after N` with `parameters.retry_after` = `retry_after_s`.
    pub too_many_requests: f64,
    /// The `retry_after` of injected 429s, in seconds (at least 1).
    pub retry_after_s: u64,
    /// 500 with a Bot API JSON body (`Internal Server Error`).
    pub internal_error: f64,
    /// 502 with an HTML body, as a proxy in front of the Bot API answers.
    pub bad_gateway_html: f64,
    /// The connection is closed without an answer (the call never reached the API).
    pub dropped: f64,
    /// The call is carried out, then the connection is closed before its answer: the bot
    /// cannot tell this from `dropped`.
    pub answer_lost: f64,
}

/// How many faults of each kind were injected so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FaultCounts {
    /// 429s.
    pub too_many_requests: usize,
    /// JSON 500s.
    pub internal_error: usize,
    /// HTML 502s.
    pub bad_gateway_html: usize,
    /// Dropped connections.
    pub dropped: usize,
    /// Calls carried out whose answer was lost, by method (`sendmessage`, `editmessagetext`,
    /// ...).
    pub answer_lost: std::collections::BTreeMap<String, usize>,
}

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    TooMany(u64),
    Internal,
    BadGateway,
    Dropped,
    AnswerLost,
}

/// The injector's state.
#[derive(Debug, Default)]
pub(crate) struct Injector {
    faults: Option<Faults>,
    state: u64,
    /// Methods whose next call loses its answer, whatever the rates say (one entry, one call).
    lose_next: Vec<String>,
    pub(crate) counts: FaultCounts,
}

impl Injector {
    /// Starts injecting `faults` (all rates 0 stops).
    pub(crate) fn set(&mut self, faults: Faults) {
        self.state = faults.seed;
        self.faults = Some(faults);
    }

    /// The next call of `method` (lower case, e.g. `sendmessage`) is carried out and loses
    /// its answer.
    pub(crate) fn lose_next_answer(&mut self, method: &str) {
        self.lose_next.push(method.to_ascii_lowercase());
    }

    /// The fault for the next call of `method`, if it gets one.
    pub(crate) fn draw(&mut self, method: &str) -> Option<Fault> {
        if let Some(at) = self.lose_next.iter().position(|m| m == method) {
            self.lose_next.remove(at);
            *self
                .counts
                .answer_lost
                .entry(method.to_owned())
                .or_default() += 1;
            return Some(Fault::AnswerLost);
        }
        let faults = self.faults?;
        if !matches!(
            method,
            "sendmessage"
                | "editmessagetext"
                | "deletemessage"
                | "sendphoto"
                | "senddocument"
                | "sendvoice"
        ) {
            return None;
        }
        let roll = self.next_unit();
        let mut edge = faults.too_many_requests;
        let counts = &mut self.counts;
        if roll < edge {
            counts.too_many_requests += 1;
            return Some(Fault::TooMany(faults.retry_after_s.max(1)));
        }
        edge += faults.internal_error;
        if roll < edge {
            counts.internal_error += 1;
            return Some(Fault::Internal);
        }
        edge += faults.bad_gateway_html;
        if roll < edge {
            counts.bad_gateway_html += 1;
            return Some(Fault::BadGateway);
        }
        edge += faults.dropped;
        if roll < edge {
            counts.dropped += 1;
            return Some(Fault::Dropped);
        }
        edge += faults.answer_lost;
        if roll < edge {
            *counts.answer_lost.entry(method.to_owned()).or_default() += 1;
            return Some(Fault::AnswerLost);
        }
        None
    }

    /// A uniform draw in [0, 1) (splitmix64).
    fn next_unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.state;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        // 53 random bits as a fraction.
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Fault {
    /// The answer the fault gives.
    pub(crate) fn response(self) -> Response {
        match self {
            Fault::TooMany(seconds) => ApiError::too_many_requests(seconds).into_response(),
            Fault::Internal => ApiError::new(500, "Internal Server Error").into_response(),
            Fault::BadGateway => (
                StatusCode::BAD_GATEWAY,
                [(header::CONTENT_TYPE, "text/html")],
                "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
            )
                .into_response(),
            // A body that fails at once: the server aborts the connection mid-answer.
            Fault::Dropped | Fault::AnswerLost => Response::new(Body::from_stream(futures_util::stream::once(
                async { Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped")) },
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_come_at_their_rates_from_the_seed() {
        let faults = Faults {
            seed: 7,
            too_many_requests: 0.3,
            retry_after_s: 1,
            internal_error: 0.04,
            bad_gateway_html: 0.03,
            dropped: 0.02,
            answer_lost: 0.01,
        };
        let mut a = Injector::default();
        a.set(faults);
        let drawn: Vec<_> = (0..10_000).map(|_| a.draw("sendmessage")).collect();
        let mut b = Injector::default();
        b.set(faults);
        let again: Vec<_> = (0..10_000).map(|_| b.draw("sendmessage")).collect();
        assert_eq!(drawn, again);
        let c = &a.counts;
        assert!((2_700..3_300).contains(&c.too_many_requests), "{c:?}");
        assert!((300..500).contains(&c.internal_error), "{c:?}");
        assert!((200..400).contains(&c.bad_gateway_html), "{c:?}");
        assert!((100..300).contains(&c.dropped), "{c:?}");
        let lost = c.answer_lost.get("sendmessage").copied().unwrap_or(0);
        assert!((40..160).contains(&lost), "{c:?}");
        assert_eq!(a.draw("getupdates"), None);
    }

    #[test]
    fn a_lost_answer_asked_for_comes_once_on_its_method() {
        let mut once = Injector::default();
        once.lose_next_answer("sendMessage");
        assert_eq!(once.draw("editmessagetext"), None);
        assert_eq!(once.draw("sendmessage"), Some(Fault::AnswerLost));
        assert_eq!(once.draw("sendmessage"), None);
        assert_eq!(once.counts.answer_lost.get("sendmessage"), Some(&1));
    }
}
