//! Sharding as Discord does it: a bot's gateway connection IDENTIFYs with `shard: [id,
//! num_shards]`, and receives the events of the guilds with `(guild_id >> 22) % num_shards ==
//! id`; direct messages (no guild) go to shard 0 only.

use serde_json::Value;

/// The shard of `guild` among `total` (DMs, `None`: shard 0).
pub fn shard_of(guild: Option<u64>, total: u32) -> u32 {
    match guild {
        Some(guild) => u32::try_from((guild >> 22) % u64::from(total.max(1))).unwrap_or(0),
        None => 0,
    }
}

/// Whether the session of `shard` (`[id, total]`) receives the events of `guild`.
pub(crate) fn serves(shard: [u32; 2], guild: Option<u64>) -> bool {
    shard_of(guild, shard[1]) == shard[0]
}

/// The `[id, total]` of IDENTIFY's `shard` field (`[0, 1]` when absent or malformed).
pub(crate) fn pair_of(shard: Option<&Value>) -> [u32; 2] {
    let at = |i: usize| {
        shard
            .and_then(|s| s.get(i))
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    match (at(0), at(1)) {
        (Some(id), Some(total)) if id < total => [id, total],
        _ => [0, 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn guilds_spread_by_their_id_and_dms_go_to_shard_zero() {
        // Discord's formula: (guild_id >> 22) % num_shards.
        assert_eq!(shard_of(Some(41_771_983_423_143_937), 4), 2);
        assert_eq!(shard_of(Some(5 << 22), 2), 1);
        assert_eq!(shard_of(Some(4 << 22), 2), 0);
        assert_eq!(shard_of(None, 3), 0);
        assert!(serves([0, 1], Some(5 << 22)));
        assert!(!serves([1, 2], None));
        assert_eq!(pair_of(Some(&json!([1, 2]))), [1, 2]);
        assert_eq!(pair_of(Some(&json!([2, 2]))), [0, 1]);
        assert_eq!(pair_of(None), [0, 1]);
    }
}
