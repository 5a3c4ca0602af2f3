//! DM pairing: codes for unknown senders, approved senders, owners made by pairing.

use serde::{Deserialize, Serialize};

use super::StoreFuture;
use crate::store::error::StoreError;

/// How long a pairing code is valid.
pub const CODE_TTL_MS: u64 = 60 * 60 * 1000;
/// Most pending codes per channel account (one per sender). Past it a new stranger is told to
/// try again when the oldest code expires: a full account never takes back a code it gave
/// (eviction would let a flood of new senders flush a real one's code), and one platform's
/// flood leaves the others' pairing open.
pub const MAX_PENDING: usize = 20;
/// Code alphabet: no 0, O, 1 or I.
pub(crate) const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// A sender waiting for the owner's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingRequest {
    /// The code the sender was given.
    pub code: String,
    /// Channel name.
    pub channel: String,
    /// Channel account.
    pub account: String,
    /// Platform sender id.
    pub sender_id: String,
    /// Display name, for `chela pairing list`.
    pub sender_name: String,
    /// When the code was issued (ms since the epoch).
    pub created_ms: u64,
}

/// What asking for a pairing code gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingOutcome {
    /// A new code was issued.
    New(String),
    /// The sender already has a valid code.
    Existing(String),
    /// Too many codes are pending for this account; the sender must wait.
    TooMany {
        /// How long until the account's oldest code expires and makes room (ms, at least 1).
        retry_after_ms: u64,
    },
}

/// What a request of `sender_id` on `channel`/`account` meets among the valid requests
/// `pending` (of every account): the sender's own code again, a full account, or `None`
/// when a new code may be issued.
pub(crate) fn pending_outcome(
    pending: &[PairingRequest],
    channel: &str,
    account: &str,
    sender_id: &str,
    now_ms: u64,
) -> Option<PairingOutcome> {
    let here = pending
        .iter()
        .filter(|r| r.channel == channel && r.account == account);
    if let Some(existing) = here.clone().find(|r| r.sender_id == sender_id) {
        return Some(PairingOutcome::Existing(existing.code.clone()));
    }
    if here.clone().count() < MAX_PENDING {
        return None;
    }
    let oldest = here.map(|r| r.created_ms).min().unwrap_or(now_ms);
    let expires = oldest.saturating_add(CODE_TTL_MS).saturating_add(1);
    Some(PairingOutcome::TooMany {
        retry_after_ms: expires.saturating_sub(now_ms).max(1),
    })
}

/// A fresh pairing code: 8 chars of [`ALPHABET`].
pub(crate) fn new_code() -> String {
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(8)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

/// DM pairing (SPEC 1.3): 8-character codes for unknown senders (valid [`CODE_TTL_MS`], at
/// most [`MAX_PENDING`] pending per channel account), senders approved per channel account,
/// and the owner pairing made per channel. Pairing grants DM access only. Times are passed
/// in (`now_ms`) so expiry is the caller's clock.
pub trait PairingStore {
    /// Issues a code for an unknown sender, or repeats the valid one it has; `TooMany` (with
    /// the wait until the oldest code expires) when the account has [`MAX_PENDING`] valid
    /// codes. Buffered.
    fn request_pairing(
        &self,
        channel: &str,
        account: &str,
        sender_id: &str,
        sender_name: &str,
        now_ms: u64,
    ) -> Result<PairingOutcome, StoreError>;

    /// Valid pairing requests at `now_ms` (expired ones may be removed on the way).
    fn pairing_requests(&self, now_ms: u64) -> Result<Vec<PairingRequest>, StoreError>;

    /// Approves `code` on `channel` (case and surrounding blanks ignored; a code works once):
    /// the sender may DM the bot from now on. When `may_make_owner` (no owner is configured),
    /// the first approval on a channel with no owner makes that sender the owner. Returns the
    /// request and whether the sender became owner, or `None` for an unknown or expired code.
    /// Durable.
    fn approve_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
        may_make_owner: bool,
    ) -> StoreFuture<'a, Option<(PairingRequest, bool)>>;

    /// Rejects `code` (it cannot be approved after); returns the request it was, if any.
    /// Durable.
    fn reject_pairing<'a>(
        &'a self,
        channel: &'a str,
        code: &'a str,
        now_ms: u64,
    ) -> StoreFuture<'a, Option<PairingRequest>>;

    /// Whether `sender_id` was approved by pairing on this channel account.
    fn is_paired(&self, channel: &str, account: &str, sender_id: &str) -> Result<bool, StoreError>;

    /// Whether `sender_id` became owner of `channel` through pairing.
    fn is_paired_owner(&self, channel: &str, sender_id: &str) -> Result<bool, StoreError>;
}
