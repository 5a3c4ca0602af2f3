//! Why a model call failed, as the fallbacks see it: whether waiting and trying again may
//! help, whether another key or another model may, and how the failure is named in the log,
//! `/status` and the `reason` label of `chela_model_skips_total`.

use std::time::Duration;

use super::super::ProviderError;
use super::super::retry::retry_delay;

/// A failed call, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// 429: too many requests for this key (or its quota).
    RateLimited,
    /// 401: the key was refused.
    Auth,
    /// 402, or a 429 about a quota, credit or spend limit: the key's money ran out, and
    /// waiting a few seconds will not bring it back.
    Quota,
    /// 404, or 403: the provider does not serve the model (to this key).
    NotFound,
    /// 529 or 503: the provider is overloaded.
    Overloaded,
    /// Another 5xx.
    ServerError,
    /// No answer within the idle timeout.
    Timeout,
    /// The server could not be reached.
    Unreachable,
    /// The stream broke before its first event.
    Broken,
    /// Anything another model would fail the same way (a 400, a setup error).
    Final,
}

impl Failure {
    /// The class of `error`.
    pub fn of(error: &ProviderError) -> Failure {
        match error {
            ProviderError::Status {
                status, message, ..
            } => match status {
                429 if about_money(message) => Failure::Quota,
                429 => Failure::RateLimited,
                401 => Failure::Auth,
                402 => Failure::Quota,
                // 403: this key may not use this model (another model may be fine).
                403 | 404 => Failure::NotFound,
                503 | 529 => Failure::Overloaded,
                500..=599 => Failure::ServerError,
                _ => Failure::Final,
            },
            ProviderError::IdleTimeout(_) => Failure::Timeout,
            ProviderError::Connect { .. } => Failure::Unreachable,
            ProviderError::Stream(_) => Failure::Broken,
            ProviderError::NotConfigured(_) => Failure::Final,
        }
    }

    /// Whether the same model may answer if asked again after a wait (the retries).
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Failure::RateLimited
                | Failure::Overloaded
                | Failure::ServerError
                | Failure::Unreachable
        )
    }

    /// Whether another model (or another key) may answer where this one failed.
    pub fn falls_back(self) -> bool {
        self != Failure::Final
    }

    /// Whether the failure belongs to the key rather than the model: another key of the
    /// same provider is tried first.
    pub fn of_key(self) -> bool {
        matches!(self, Failure::RateLimited | Failure::Auth | Failure::Quota)
    }

    /// The `reason` label of the skip metric.
    pub fn label(self) -> &'static str {
        match self {
            Failure::RateLimited => "rate_limited",
            Failure::Auth => "auth",
            Failure::Quota => "quota",
            Failure::NotFound => "not_found",
            Failure::Overloaded => "overloaded",
            Failure::ServerError => "server_error",
            Failure::Timeout => "timeout",
            Failure::Unreachable => "unreachable",
            Failure::Broken => "broken",
            Failure::Final => "error",
        }
    }

    /// How long what failed rests before it is tried again, its `streak`th failure in a row
    /// (1 for the first): 10 minutes for a refused key or a used-up quota, else 30 s doubling
    /// up to 10 minutes, or the server's longer `retry-after` for a rate limit. (A rest ends
    /// early when the key or model answers: a retry that works clears it.)
    pub fn cooldown(self, streak: u32, error: &ProviderError) -> Duration {
        const MAX: Duration = Duration::from_secs(600);
        if matches!(self, Failure::Auth | Failure::Quota) {
            return MAX;
        }
        let doubling = Duration::from_secs(30)
            .saturating_mul(1u32 << streak.saturating_sub(1).min(5))
            .min(MAX);
        match error {
            ProviderError::Status {
                retry_after: Some(_),
                ..
            } if self == Failure::RateLimited => retry_delay(0, error).max(doubling),
            _ => doubling,
        }
    }
}

/// Whether a 429's message says the money ran out rather than the pace was too high
/// (OpenAI's `insufficient_quota`, Anthropic's spend limit, a credit balance): such a 429 is
/// not worth retrying. Only these phrases: ordinary rate-limit messages mention billing pages
/// and quotas too.
fn about_money(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "insufficient_quota",
        "exceeded your current quota",
        "credit balance",
        "spend limit",
        "spend_limit",
    ]
    .iter()
    .any(|phrase| message.contains(phrase))
}

/// What a skipped model's failure reads as: `rate limited (429)`, `timed out`, ...
pub fn describe(failure: Failure, error: &ProviderError) -> String {
    let status = match error {
        ProviderError::Status { status, .. } => format!(" ({status})"),
        _ => String::new(),
    };
    let what = match failure {
        Failure::RateLimited => "rate limited",
        Failure::Auth => "key refused",
        Failure::Quota => "quota used up",
        Failure::NotFound => "model not found",
        Failure::Overloaded => "overloaded",
        Failure::ServerError => "server error",
        Failure::Timeout => "timed out",
        Failure::Unreachable => "unreachable",
        Failure::Broken => "stream broke",
        Failure::Final => "failed",
    };
    format!("{what}{status}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, retry_after: Option<u64>) -> ProviderError {
        ProviderError::Status {
            status: code,
            message: "x".into(),
            retry_after,
        }
    }

    #[test]
    fn statuses_are_classified() {
        let class = |code| Failure::of(&status(code, None));
        assert_eq!(class(429), Failure::RateLimited);
        assert_eq!(class(401), Failure::Auth);
        assert_eq!(class(403), Failure::NotFound);
        assert_eq!(class(529), Failure::Overloaded);
        assert_eq!(class(502), Failure::ServerError);
        assert_eq!(class(400), Failure::Final);
        assert!(!class(400).falls_back());
        assert!(class(404).falls_back() && !class(404).retryable());
        assert!(Failure::of(&ProviderError::IdleTimeout(5)).falls_back());
        assert!(!Failure::of(&ProviderError::IdleTimeout(5)).retryable());
        assert!(class(429).of_key() && class(401).of_key() && !class(500).of_key());
        let quota = ProviderError::Status {
            status: 429,
            message: "You exceeded your current quota, please check your plan and billing".into(),
            retry_after: None,
        };
        assert_eq!(Failure::of(&quota), Failure::Quota);
        assert!(!Failure::Quota.retryable() && Failure::Quota.of_key());
        // Rate-limit messages that mention billing or quotas are still rate limits.
        for message in [
            "Rate limit reached for gpt-4.1 on tokens per min. Add a payment method: https://platform.openai.com/account/billing",
            "Resource has been exhausted (e.g. check quota).",
        ] {
            let limited = ProviderError::Status {
                status: 429,
                message: message.into(),
                retry_after: None,
            };
            assert_eq!(Failure::of(&limited), Failure::RateLimited, "{message}");
        }
    }

    #[test]
    fn cooldowns_double_and_honour_retry_after() {
        let e = status(500, None);
        let fail = Failure::ServerError;
        assert_eq!(fail.cooldown(1, &e), Duration::from_secs(30));
        assert_eq!(fail.cooldown(2, &e), Duration::from_secs(60));
        assert_eq!(fail.cooldown(9, &e), Duration::from_secs(600));
        let limited = status(429, Some(7));
        assert_eq!(
            Failure::RateLimited.cooldown(1, &limited),
            Duration::from_secs(30)
        );
        assert_eq!(
            Failure::RateLimited.cooldown(1, &status(429, Some(45))),
            Duration::from_secs(45)
        );
        assert_eq!(
            Failure::Auth.cooldown(1, &status(401, None)),
            Duration::from_secs(600)
        );
        assert_eq!(
            describe(Failure::RateLimited, &limited),
            "rate limited (429)"
        );
        assert_eq!(
            describe(Failure::Timeout, &ProviderError::IdleTimeout(3)),
            "timed out"
        );
    }
}
