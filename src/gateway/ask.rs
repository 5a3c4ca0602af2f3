//! Permission questions asked in the chat (`[acp] permissions = "ask"`, SPEC 4): the request
//! is shown in the bound conversation and its owner answers `allow` or `deny` there; no answer
//! within the timeout denies.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use agent_client_protocol::v1::schema::RequestPermissionRequest;
use tokio::sync::oneshot;

use super::Core;
use crate::acp::client::Asker;
use crate::acp::manager::AskerFor;
use crate::acp::permission::Decision;
use crate::agent::provider::BoxFuture;
use crate::store::Binding;

/// One open question: its id and where its answer goes.
type Open = (u64, oneshot::Sender<Decision>);

/// Open questions per session key, oldest first.
#[derive(Default)]
pub struct Questions {
    pending: Mutex<HashMap<String, VecDeque<Open>>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Questions {
    fn open(&self, key: &str) -> (u64, oneshot::Receiver<Decision>) {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending
                .entry(key.to_owned())
                .or_default()
                .push_back((id, tx));
        }
        (id, rx)
    }

    fn forget(&self, key: &str, id: u64) {
        if let Ok(mut pending) = self.pending.lock()
            && let Some(queue) = pending.get_mut(key)
        {
            queue.retain(|(i, _)| *i != id);
            if queue.is_empty() {
                pending.remove(key);
            }
        }
    }

    /// True when session `key` has a question waiting.
    pub fn is_waiting(&self, key: &str) -> bool {
        self.pending
            .lock()
            .is_ok_and(|p| p.get(key).is_some_and(|q| !q.is_empty()))
    }

    /// Answers the oldest open question of `key`; false when there was none.
    pub fn answer(&self, key: &str, decision: Decision) -> bool {
        let Ok(mut pending) = self.pending.lock() else {
            return false;
        };
        let Some(queue) = pending.get_mut(key) else {
            return false;
        };
        while let Some((_, tx)) = queue.pop_front() {
            if tx.send(decision).is_ok() {
                if queue.is_empty() {
                    pending.remove(key);
                }
                return true;
            }
        }
        pending.remove(key);
        false
    }
}

/// Makes askers that ask in each binding's conversation.
pub struct ChatAskers {
    /// The gateway core (weak: the core owns the ACP manager that holds this).
    pub core: Weak<Core>,
}

impl AskerFor for ChatAskers {
    fn asker_for(&self, binding: &Binding) -> Arc<dyn Asker> {
        Arc::new(ChatAsker {
            core: self.core.clone(),
            binding: binding.clone(),
        })
    }
}

struct ChatAsker {
    core: Weak<Core>,
    binding: Binding,
}

impl Asker for ChatAsker {
    fn ask(&self, request: RequestPermissionRequest) -> BoxFuture<'static, Option<Decision>> {
        let core = self.core.clone();
        let binding = self.binding.clone();
        Box::pin(async move {
            let core = core.upgrade()?;
            let timeout = Duration::from_secs(core.acp.config().ask_timeout_s);
            let title = request
                .tool_call
                .fields
                .title
                .clone()
                .unwrap_or_else(|| "a tool call".to_owned());
            let options: Vec<&str> = request.options.iter().map(|o| o.name.as_str()).collect();
            let key = binding.session_key.clone();
            let (id, answer) = core.questions.open(&key);
            let text = format!(
                "🔐 {} asks permission: {title}\nOptions: {}\nReply allow or deny (no answer in {} denies).",
                binding.harness,
                options.join(" / "),
                humantime::format_duration(timeout)
            );
            core.say(&binding.conversation, &text).await;
            match tokio::time::timeout(timeout, answer).await {
                Ok(Ok(decision)) => Some(decision),
                _ => {
                    core.questions.forget(&key, id);
                    core.say(&binding.conversation, "No answer in time: denied.")
                        .await;
                    None
                }
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::inbound::route::parse_answer;

    #[test]
    fn answers_are_read_loosely() {
        assert_eq!(parse_answer(" Allow! "), Some(Decision::Allow));
        assert_eq!(parse_answer("y"), Some(Decision::Allow));
        assert_eq!(parse_answer("DENY"), Some(Decision::Deny));
        assert_eq!(parse_answer("allow it please"), None);
    }

    #[tokio::test]
    async fn questions_are_answered_oldest_first() {
        let q = Questions::default();
        assert!(!q.answer("k", Decision::Allow));
        let (_, first) = q.open("k");
        let (second_id, second) = q.open("k");
        assert!(q.is_waiting("k"));
        assert!(q.answer("k", Decision::Deny));
        assert_eq!(first.await.unwrap(), Decision::Deny);
        q.forget("k", second_id);
        assert!(!q.is_waiting("k"));
        drop(second);
        assert!(!q.answer("k", Decision::Allow));
    }
}
