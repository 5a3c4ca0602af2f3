//! `getUpdates` long polling: `offset` confirms (drops) older updates, `limit` caps the batch,
//! `timeout` (seconds) waits for the first update, `allowed_updates` filters by kind and is
//! remembered; one poller at a time.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::body::{self, Params};
use super::reply::{ApiError, ApiResult, CONFLICT_POLLER};
use super::state::{Shared, State};

/// Marks a poll in flight; dropping it (also when the client goes away) ends the poll.
struct PollGuard(Arc<Shared>);

impl PollGuard {
    /// Starts a poll, or `None` if another one is in flight (counted as a conflict).
    fn begin(shared: &Arc<Shared>) -> Option<PollGuard> {
        let mut state = shared.lock();
        let pollers = &mut state.pollers;
        pollers.total += 1;
        pollers.max_concurrent = pollers.max_concurrent.max(pollers.in_flight + 1);
        let guard = if pollers.in_flight == 0 {
            pollers.in_flight = 1;
            Some(PollGuard(Arc::clone(shared)))
        } else {
            pollers.conflicts += 1;
            None
        };
        drop(state);
        shared.touch();
        guard
    }
}

impl Drop for PollGuard {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.pollers.in_flight = state.pollers.in_flight.saturating_sub(1);
        drop(state);
        self.0.touch();
    }
}

/// `getUpdates`.
pub(crate) async fn get_updates(shared: &Arc<Shared>, params: &Params) -> ApiResult {
    let offset = body::int(params, "offset")?.unwrap_or(0);
    let limit = body::int(params, "limit")?.unwrap_or(100).clamp(1, 100);
    let limit = usize::try_from(limit).unwrap_or(100);
    let timeout = body::int(params, "timeout")?.unwrap_or(0).max(0);
    let allowed = body::json(params, "allowed_updates");
    {
        let mut state = shared.lock();
        if state.webhook.is_some() {
            return Err(ApiError::conflict(
                "can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            ));
        }
        if let Some(Value::Array(kinds)) = allowed {
            state.allowed_updates = kinds
                .iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect();
        }
        confirm(&mut state, offset);
    }
    let Some(_guard) = PollGuard::begin(shared) else {
        return Err(ApiError::new(409, CONFLICT_POLLER));
    };
    let deadline = Instant::now() + Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
    let mut shutdown = shared.shutdown.clone();
    loop {
        let notified = shared.new_update.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let batch = take(&mut shared.lock(), limit);
        if !batch.is_empty() || Instant::now() >= deadline || *shutdown.borrow() {
            return Ok(Value::Array(batch));
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => return Ok(Value::Array(Vec::new())),
        }
    }
}

/// Applies `offset`: positive drops updates below it; negative keeps only the last `-offset`.
fn confirm(state: &mut State, offset: i64) {
    if offset > 0 {
        while state
            .updates
            .front()
            .is_some_and(|u| u["update_id"].as_i64().unwrap_or(0) < offset)
        {
            state.updates.pop_front();
        }
    } else if offset < 0 {
        let keep = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
        while state.updates.len() > keep {
            state.updates.pop_front();
        }
    }
}

/// The first `limit` pending updates of allowed kinds (those of other kinds are dropped);
/// they stay pending until a later `offset` confirms them.
fn take(state: &mut State, limit: usize) -> Vec<Value> {
    if !state.allowed_updates.is_empty() {
        let allowed = state.allowed_updates.clone();
        state.updates.retain(|u| {
            u.as_object()
                .is_some_and(|m| m.keys().any(|k| allowed.iter().any(|a| a == k)))
        });
    }
    state.updates.iter().take(limit).cloned().collect()
}
