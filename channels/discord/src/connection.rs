//! Whether the Discord gateway connection is up, from serenity's shard manager. READY and
//! RESUMED say when it comes up (`handler`), but when the connection breaks serenity may
//! restart the shard instead of reporting a stage change: the old runner is shut down and
//! the new one keeps failing to connect, with no event to the handler. So the shard
//! manager's runners are looked at every second: with no runner connected on two looks in a
//! row, the channel is not connected.

use std::sync::Arc;
use std::time::Duration;

use serenity::gateway::{ConnectionStage, ShardManager};
use tokio_util::sync::CancellationToken;

use crate::shard::Shard;

/// How often the runners are looked at.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Looks in a row without a connected runner before the channel counts as not connected
/// (a runner's stage lags its READY by a moment).
const DOWN_LOOKS: u32 = 2;

/// Marks `shard` not connected while no shard runner of `shards` (its client's manager) is
/// connected, until `stop`.
pub(crate) async fn watch(shards: Arc<ShardManager>, shard: Arc<Shard>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(LOOK_EVERY);
    let mut down = 0u32;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let up = shards
            .runners
            .lock()
            .await
            .values()
            .any(|runner| runner.stage == ConnectionStage::Connected);
        let was_down = down >= DOWN_LOOKS;
        down = next_down(down, up);
        if down >= DOWN_LOOKS {
            shard.set_connected(false);
        } else if up && was_down {
            // Marked down by these looks, connected again (READY or RESUMED may have come
            // before the runner's stage said so).
            shard.set_connected(true);
        }
    }
}

/// Looks in a row without a connected runner, after one more look that saw `up`.
fn next_down(down: u32, up: bool) -> u32 {
    match up {
        true => 0,
        false => down.saturating_add(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_look_without_a_runner_is_not_enough() {
        let one = next_down(0, false);
        assert!(one < DOWN_LOOKS);
        assert!(next_down(one, false) >= DOWN_LOOKS);
        assert_eq!(next_down(5, true), 0);
    }
}
