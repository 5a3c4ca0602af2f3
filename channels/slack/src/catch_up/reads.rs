//! A catch-up pass's reads of the Web API: `conversations.history` and
//! `conversations.replies` paged through `response_metadata.next_cursor` (at most
//! [`MAX_PAGES`] pages) and given oldest first; each channel's type asked of
//! `conversations.info` once per pass; a rate limit waited out (`Retry-After`) and the call
//! made again, [`MAX_RETRIES`] times at most.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use chela_channel::ChannelError;
use serde_json::Value;

use super::{MAX_PAGES, PER_PAGE};
use crate::api::Api;
use crate::ts;

/// How many times one call is made again after a rate limit.
const MAX_RETRIES: u32 = 3;

/// A chat's messages after its cursor, oldest first.
#[derive(Debug, Default)]
pub struct Read {
    /// The messages, oldest first, each once.
    pub messages: Vec<Value>,
    /// Whether there were more than [`MAX_PAGES`] pages (the rest was not read).
    pub capped: bool,
}

/// The Web API reads of one pass.
pub struct Reads<'a> {
    api: &'a Api,
    /// Each channel's type as events name it, `None` when it could not be learnt.
    types: HashMap<String, Option<&'static str>>,
}

impl<'a> Reads<'a> {
    /// Reads through `api`.
    pub fn new(api: &'a Api) -> Reads<'a> {
        Reads {
            api,
            types: HashMap::new(),
        }
    }

    /// A channel's type as events name it (`im` for `D…`, else asked once per pass:
    /// `im`, `mpim`, `group`, `channel`); `None` when it cannot be learnt.
    pub async fn channel_type(&mut self, channel: &str) -> Option<&'static str> {
        if channel.starts_with('D') {
            return Some("im");
        }
        if let Some(known) = self.types.get(channel) {
            return *known;
        }
        let params = [("channel", channel.to_string())];
        let learnt = match self.call("conversations.info", &params).await {
            Ok(info) => type_of(&info["channel"]),
            Err(e) => {
                tracing::warn!(error = %e, channel, "slack: cannot learn a channel's type");
                None
            }
        };
        self.types.insert(channel.to_string(), learnt);
        learnt
    }

    /// A channel's top-level messages (and broadcast replies) after `oldest` (µs). Slack
    /// lists them newest first: when capped, the newest were read.
    pub async fn history(&self, channel: &str, oldest: i64) -> Result<Read, ChannelError> {
        let params = vec![
            ("channel", channel.to_string()),
            ("oldest", ts::from_micros(oldest)),
        ];
        let (messages, capped) = self.pages("conversations.history", params).await?;
        Ok(Read {
            messages: in_order(messages, oldest, None),
            capped,
        })
    }

    /// A thread's replies after `oldest` (µs), without its parent (Slack lists it on every
    /// page). Slack lists them oldest first: when capped, the oldest were read.
    pub async fn replies(
        &self,
        channel: &str,
        thread: &str,
        oldest: i64,
    ) -> Result<Read, ChannelError> {
        let params = vec![
            ("channel", channel.to_string()),
            ("ts", thread.to_string()),
            ("oldest", ts::from_micros(oldest)),
        ];
        let (messages, capped) = self.pages("conversations.replies", params).await?;
        Ok(Read {
            messages: in_order(messages, oldest, Some(thread)),
            capped,
        })
    }

    /// Every page of `method` (at most [`MAX_PAGES`]): the messages, and whether more were
    /// left. A page that cannot be read fails the whole read (a cursor moved past the
    /// pages read could skip the others).
    async fn pages(
        &self,
        method: &str,
        params: Vec<(&'static str, String)>,
    ) -> Result<(Vec<Value>, bool), ChannelError> {
        let mut messages = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut page = params.clone();
            page.push(("limit", PER_PAGE.to_string()));
            if let Some(cursor) = cursor.take() {
                page.push(("cursor", cursor));
            }
            let answer = self.call(method, &page).await?;
            if let Some(listed) = answer["messages"].as_array() {
                messages.extend(listed.iter().cloned());
            }
            match next_cursor(&answer) {
                Some(next) => cursor = Some(next),
                None => return Ok((messages, false)),
            }
        }
        Ok((messages, true))
    }

    /// One GET, rate limits waited out.
    async fn call(&self, method: &str, params: &[(&str, String)]) -> Result<Value, ChannelError> {
        retrying(|| self.api.get(method, params)).await
    }
}

/// `call`'s answer; after a rate limit, the same call again once Slack's `Retry-After` has
/// passed, at most [`MAX_RETRIES`] times.
pub async fn retrying<F, Fut>(mut call: F) -> Result<Value, ChannelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Value, ChannelError>>,
{
    let mut retries = 0;
    loop {
        match call().await {
            Err(ChannelError::RateLimited { retry_after_ms }) if retries < MAX_RETRIES => {
                retries += 1;
                tracing::debug!(retry_after_ms, "slack: rate limited; the catch-up waits");
                tokio::time::sleep(Duration::from_millis(retry_after_ms)).await;
            }
            answer => return answer,
        }
    }
}

/// The cursor of the next page, while Slack says there is one.
fn next_cursor(answer: &Value) -> Option<String> {
    if answer["has_more"] != true {
        return None;
    }
    answer["response_metadata"]["next_cursor"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// `messages` after `oldest` (µs), oldest first, each once, without `parent`.
fn in_order(messages: Vec<Value>, oldest: i64, parent: Option<&str>) -> Vec<Value> {
    let mut keyed: Vec<(i64, Value)> = messages
        .into_iter()
        .filter(|m| parent.is_none_or(|p| m["ts"] != p))
        .filter_map(|m| Some((m["ts"].as_str().and_then(ts::to_micros)?, m)))
        .filter(|(at, _)| *at > oldest)
        .collect();
    keyed.sort_by_key(|(at, _)| *at);
    keyed.dedup_by_key(|(at, _)| *at);
    keyed.into_iter().map(|(_, m)| m).collect()
}

/// The type events give a `conversations.info` channel: `im`, `mpim`, `group` (private),
/// `channel`; `None` when it says none of these.
fn type_of(channel: &Value) -> Option<&'static str> {
    if channel["is_im"] == true {
        Some("im")
    } else if channel["is_mpim"] == true {
        Some("mpim")
    } else if channel["is_private"] == true || channel["is_group"] == true {
        Some("group")
    } else if channel["is_channel"] == true {
        Some("channel")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn pages_go_on_while_slack_says_there_are_more() {
        let more = json!({"has_more": true, "response_metadata": {"next_cursor": "bmV4dA=="}});
        assert_eq!(next_cursor(&more).as_deref(), Some("bmV4dA=="));
        let last = json!({"has_more": false, "response_metadata": {"next_cursor": ""}});
        assert_eq!(next_cursor(&last), None);
        assert_eq!(
            next_cursor(&json!({"has_more": true})),
            None,
            "nothing to go on with"
        );
    }

    #[test]
    fn messages_come_oldest_first_once_without_the_parent() {
        let m = |ts: &str| json!({ "ts": ts, "text": ts });
        let pages = vec![
            m("1.000300"),
            m("1.000200"),
            m("1.000100"),
            m("1.000300"),
            m("0.000900"),
            json!({"text": "no ts"}),
        ];
        let texts = |v: Vec<Value>| -> Vec<String> {
            v.iter()
                .map(|m| m["ts"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            texts(in_order(pages.clone(), 1_000_000, None)),
            ["1.000100", "1.000200", "1.000300"]
        );
        assert_eq!(
            texts(in_order(pages, 1_000_000, Some("1.000100"))),
            ["1.000200", "1.000300"]
        );
    }

    #[test]
    fn a_channels_type_is_what_conversations_info_says_or_unknown() {
        assert_eq!(type_of(&json!({"is_im": true})), Some("im"));
        assert_eq!(
            type_of(&json!({"is_mpim": true, "is_private": true})),
            Some("mpim")
        );
        assert_eq!(
            type_of(&json!({"is_channel": true, "is_private": true})),
            Some("group")
        );
        assert_eq!(type_of(&json!({"is_channel": true})), Some("channel"));
        assert_eq!(type_of(&json!({})), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_is_waited_out_a_few_times() {
        let calls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let answer = retrying(|| {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move {
                if n < 2 {
                    Err(ChannelError::RateLimited {
                        retry_after_ms: 3_000,
                    })
                } else {
                    Ok(json!({"ok": true}))
                }
            }
        })
        .await;
        assert_eq!(answer.unwrap()["ok"], true);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(6),
            "Retry-After each time"
        );

        let calls = AtomicU32::new(0);
        let answer = retrying(|| {
            calls.fetch_add(1, Ordering::Relaxed);
            async {
                Err(ChannelError::RateLimited {
                    retry_after_ms: 1_000,
                })
            }
        })
        .await;
        assert!(matches!(answer, Err(ChannelError::RateLimited { .. })));
        assert_eq!(calls.load(Ordering::Relaxed), MAX_RETRIES + 1, "bounded");
    }
}
