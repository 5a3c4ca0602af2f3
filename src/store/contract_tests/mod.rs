//! The store contract, as tests any backend must pass.
//!
//! Each `pub(crate) async fn` here checks one part of the traits' contract (`../ports/`)
//! through a [`Harness`], which makes empty stores of one backend and reopens them as a
//! restart would. [`store_contract_tests!`] turns every check into a `#[tokio::test]` for a
//! backend: the sled backend runs them in `sled/mod.rs`; a new backend adds one line:
//!
//! ```ignore
//! crate::store::contract_tests::store_contract_tests!(MyHarness::new());
//! ```
//!
//! The checks use only the public store API (the [`Store`] handle and the traits), never a
//! backend's own types.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cron;
mod delivery;
mod links;
mod questions;
mod queue;
mod sessions;

use chela_channel::{ChatKind, Conversation, Inbound, Sender};

pub(crate) use cron::*;
pub(crate) use delivery::*;
pub(crate) use links::*;
pub(crate) use questions::*;
pub(crate) use queue::*;
pub(crate) use sessions::*;

use super::{PendingTurn, Store};

/// Makes stores of one backend for the contract checks.
pub(crate) trait Harness {
    /// A store with nothing in it. Called once per check.
    fn fresh(&self) -> Store;
    /// Closes `store` (the caller holds no other handle on it) and opens the same data again,
    /// as a restart of the process would.
    fn reopen(&self, store: Store) -> Store;
}

/// Expands to one `#[tokio::test]` per contract check, each with its own harness made by
/// `$harness` (an expression evaluated per test).
macro_rules! store_contract_tests {
    ($harness:expr) => {
        $crate::store::contract_tests::store_contract_tests!(@each $harness;
            enqueue_unique_is_durable_and_drops_duplicates,
            buffered_enqueue_is_seen_at_once_and_kept_with_the_cursor,
            concurrent_enqueue_unique_admits_exactly_one,
            pending_turns_are_removed_and_cleared,
            settle_turn_records_the_final_and_clears_pending_together,
            settling_a_blank_final_records_nothing,
            finish_run_keeps_the_record_until_pruned,
            dedupe_marks_are_atomic_and_prune_only_old_ones,
            outbox_keeps_finals_in_order_until_delivered,
            dead_letters_leave_the_outbox,
            dead_letters_are_revived_or_dropped_once,
            reply_journal_notes_each_message_once,
            bindings_round_trip_durably,
            subagent_links_spawn_stop_and_finish_once,
            targets_are_remembered_per_session,
            pairing_codes_approve_once_and_make_one_owner,
            pairing_codes_expire_and_rejected_codes_do_not_approve,
            pairing_is_bounded_per_account_and_says_when_to_retry,
            cursors_are_durable_and_listed_by_suffix,
            raised_cursors_only_move_forward,
            group_history_is_replaced_and_cleared,
            group_lines_are_appended_capped_and_taken_once,
            sessions_are_created_once_and_listed_by_key,
            settings_round_trip_and_clear,
            transcript_appends_chain_and_refuse_unknown_sessions,
            window_follows_resets_and_compactions,
            export_import_round_trip_is_byte_identical,
            import_refuses_bad_input_and_existing_sessions,
            buffered_writes_are_durable_after_flush,
            cron_jobs_round_trip_durably,
            advance_cron_moves_a_job_past_a_run_once,
            add_cron_adds_an_id_once,
            open_questions_are_kept_per_node_across_a_restart,
            strangers_approved_offline_are_kept_across_a_restart,
        );
    };
    (@each $harness:expr; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                let harness = $harness;
                $crate::store::contract_tests::$check(&harness).await;
            }
        )*
    };
}
pub(crate) use store_contract_tests;

/// Runs `call(0)`, ..., `call(n - 1)` at once, each on a thread of its own released by one
/// barrier, and returns their results in order. The embedded engines answer without
/// yielding, so calls joined on one task would run one after the other and never race;
/// here they do, on every engine.
pub(crate) async fn race<T, F, Fut>(n: usize, call: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let runtime = tokio::runtime::Handle::current();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let (barrier, runtime, call) = (barrier.clone(), runtime.clone(), call(i));
            tokio::task::spawn_blocking(move || {
                barrier.wait();
                runtime.block_on(call)
            })
        })
        .collect();
    let mut results = Vec::with_capacity(n);
    for thread in threads {
        results.push(thread.await.unwrap());
    }
    results
}

/// A direct chat on `channel`.
pub(crate) fn chat(chat_id: &str) -> Conversation {
    Conversation {
        channel: "telegram".into(),
        account: "default".into(),
        kind: ChatKind::Direct,
        chat_id: chat_id.into(),
        thread_id: None,
    }
}

/// A pending turn of session `key` for message `message_id`.
pub(crate) fn turn(key: &str, message_id: &str) -> PendingTurn {
    PendingTurn {
        session_key: key.into(),
        inbound: Inbound {
            conversation: chat("42"),
            sender: Sender::default(),
            message_id: message_id.into(),
            text: format!("text of {message_id}"),
            reply_to: None,
            mentioned: true,
            timestamp_ms: crate::domain::message::now_ms(),
            interaction: None,
            attachments: Vec::new(),
        },
        queued_ms: 7,
    }
}
