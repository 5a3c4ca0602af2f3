//! The guild of each channel chela keeps a cursor of (none for a DM), kept durably beside the
//! cursor as `discord:<account>:guild:<channel id>` (0: a DM), so that each shard's catch-up
//! keeps only its own channels before it caps how many it reads, without asking Discord
//! where each one sits (a DM, which only shard 0 reads, is never looked up by the others).
//! Channels whose cursor is older than this record are looked up once, then known.

use std::collections::HashMap;
use std::sync::Mutex;

use chela_channel::InboundSink;

/// Channels remembered at most (past that the memory starts again; look-ups fill it).
const MAX_CHANNELS: usize = 10_000;

/// Where a channel sits: its guild, or `None` for a DM.
pub type Guild = Option<u64>;

/// The guild of each channel, and whether it was saved.
pub struct Guilds {
    prefix: String,
    known: Mutex<HashMap<u64, (Guild, bool)>>,
}

impl Guilds {
    /// The guilds of `account`'s channels.
    pub fn new(account: &str) -> Guilds {
        Guilds {
            prefix: format!("discord:{account}:guild:"),
            known: Mutex::new(HashMap::new()),
        }
    }

    /// Notes that `channel` sits in `guild` (to be saved when new here).
    pub fn note(&self, channel: u64, guild: Guild) {
        let Ok(mut known) = self.known.lock() else {
            return;
        };
        if known.get(&channel).is_some_and(|(g, _)| *g == guild) {
            return;
        }
        if known.len() >= MAX_CHANNELS {
            known.clear();
        }
        known.insert(channel, (guild, true));
    }

    /// Where `channel` sits, if known (`Some(None)`: a DM).
    pub fn of(&self, channel: u64) -> Option<Guild> {
        self.known.lock().ok()?.get(&channel).map(|(g, _)| *g)
    }

    /// Reads the saved guilds into memory (what is known here already wins).
    pub async fn load(&self, sink: &dyn InboundSink) {
        let saved = sink.cursors(&self.prefix).await;
        let Ok(mut known) = self.known.lock() else {
            return;
        };
        for (name, value) in saved {
            let channel = name[self.prefix.len().min(name.len())..].parse::<u64>();
            if let (Ok(channel), Ok(guild)) = (channel, u64::try_from(value)) {
                let guild = (guild != 0).then_some(guild);
                known.entry(channel).or_insert((guild, false));
            }
        }
    }

    /// Writes the guilds noted since the last save.
    pub async fn save(&self, sink: &dyn InboundSink) {
        let new: Vec<(u64, Guild)> = match self.known.lock() {
            Ok(mut known) => known
                .iter_mut()
                .filter(|(_, (_, dirty))| *dirty)
                .map(|(channel, entry)| {
                    entry.1 = false;
                    (*channel, entry.0)
                })
                .collect(),
            Err(_) => return,
        };
        for (channel, guild) in new {
            let Ok(value) = i64::try_from(guild.unwrap_or(0)) else {
                continue;
            };
            let name = format!("{}{channel}", self.prefix);
            if let Err(e) = sink.save_cursor(&name, value).await {
                tracing::warn!(error = %e, channel, "discord: cannot save a channel's guild");
                if let Ok(mut known) = self.known.lock()
                    && let Some(entry) = known.get_mut(&channel)
                {
                    entry.1 = true;
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chela_channel::{BoxFuture, Inbound, SinkError};

    #[derive(Default)]
    struct Cursors(Mutex<HashMap<String, i64>>);

    impl InboundSink for Cursors {
        fn accept(&self, _: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
            Box::pin(async { Ok(()) })
        }
        fn cursors<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Vec<(String, i64)>> {
            let all = self.0.lock().unwrap().clone();
            Box::pin(async move {
                all.into_iter()
                    .filter(|(k, _)| k.starts_with(prefix))
                    .collect()
            })
        }
        fn save_cursor<'a>(
            &'a self,
            name: &'a str,
            value: i64,
        ) -> BoxFuture<'a, Result<(), SinkError>> {
            self.0.lock().unwrap().insert(name.to_owned(), value);
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn guilds_and_dms_are_saved_and_known_again_after_a_restart() {
        let sink = Cursors::default();
        let guilds = Guilds::new("default");
        guilds.note(10, Some(7 << 22));
        guilds.note(11, None);
        assert_eq!(guilds.of(10), Some(Some(7 << 22)));
        assert_eq!(guilds.of(11), Some(None), "a DM");
        assert_eq!(guilds.of(12), None, "unknown");
        guilds.save(&sink).await;
        assert_eq!(
            sink.0.lock().unwrap().get("discord:default:guild:11"),
            Some(&0)
        );
        let again = Guilds::new("default");
        again.load(&sink).await;
        assert_eq!(again.of(10), Some(Some(7 << 22)));
        assert_eq!(again.of(11), Some(None));
        let other = Guilds::new("other");
        other.load(&sink).await;
        assert_eq!(other.of(10), None);
        // Nothing new: nothing written again.
        sink.0.lock().unwrap().clear();
        again.note(10, Some(7 << 22));
        again.save(&sink).await;
        assert!(sink.0.lock().unwrap().is_empty());
    }
}
