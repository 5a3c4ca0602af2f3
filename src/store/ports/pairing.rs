//! DM pairing: codes for unknown senders, approved senders, owners made by pairing.

use serde::{Deserialize, Serialize};

use super::StoreFuture;
use crate::store::StoreError;

/// How long a pairing code is valid.
pub const CODE_TTL_MS: u64 = 60 * 60 * 1000;
/// Most pending codes per channel account.
pub const MAX_PENDING: usize = 3;
/// Code alphabet: no 0, O, 1 or I.
pub(in crate::store) const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

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
    TooMany,
}

/// A fresh pairing code: 8 chars of [`ALPHABET`].
pub(in crate::store) fn new_code() -> String {
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
    /// Issues a code for an unknown sender, or repeats the valid one it has; `TooMany` when
    /// the account has [`MAX_PENDING`] valid codes. Buffered.
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
