//! The page cache of an embedded store opened without a config (`Store::open`, a temporary
//! store); `[store] cache_mb` sets it otherwise.

/// The most memory sled's page cache may use, in bytes (sled's default is 1 GiB), unless
/// `[store] cache_mb` says otherwise: small, since per-session memory must not grow with
/// transcripts.
pub const CACHE_CAPACITY: u64 = 8 * 1024 * 1024;
