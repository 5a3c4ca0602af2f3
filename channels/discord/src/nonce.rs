//! Nonces of keyed sends: derived from the caller's idempotency key, so that the same part of
//! the same final sent again (after a restart) carries the same nonce and Discord, asked to
//! `enforce_nonce`, answers with the message the first send made. Discord checks a nonce
//! against the author's messages of the past few minutes; a nonce is at most 25 characters.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nonces tried for one key before a random one: each next round is for a first message that
/// recovery took back (deleted), which a repeated nonce would still answer with.
pub const KEYED_ROUNDS: u32 = 3;

/// The nonce of `key` in round `round`: `k`, then 24 hex digits of two FNV-1a hashes.
pub fn derive(key: &str, round: u32) -> String {
    let text = format!("{key}#{round}");
    let first = fnv1a(text.as_bytes(), 0xcbf2_9ce4_8422_2325);
    let second = fnv1a(text.as_bytes(), first ^ 0x9E37_79B9_7F4A_7C15);
    let mut nonce = format!("k{first:016x}{second:016x}");
    nonce.truncate(25);
    nonce
}

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(seed, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The smallest snowflake of this instant: a message made by a request sent now has an id at
/// least this (a message answered from an earlier send has a smaller one).
pub fn snowflake_now() -> u64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    crate::catch_up::snowflake_at(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gives_the_same_short_nonce_every_time_and_rounds_differ() {
        let a = derive("7.1700000000000.0", 0);
        assert_eq!(a, derive("7.1700000000000.0", 0));
        assert_eq!(a.len(), 25);
        assert_ne!(a, derive("7.1700000000000.0", 1));
        assert_ne!(a, derive("7.1700000000000.1", 0));
        assert_ne!(a, derive("8.1700000000000.0", 0));
    }
}
