//! The guild of each channel chela keeps a cursor of (none for a DM), kept durably beside the
//! cursor as `discord:<account>:guild:<channel id>` (0: a DM), so that each shard's catch-up
//! keeps only its own channels before it caps how many it reads, without asking Discord
//! where each one sits (a DM, which only shard 0 reads, is never looked up by the others).
//! Channels whose cursor is older than this record are looked up once, then known.

use chela_channel::InboundSink;

use crate::record::{Record, Stored};

/// Channels remembered at most (past that a saved one is forgotten, an unsaved one only when
/// none is saved; a load or a look-up fills it again).
const MAX_CHANNELS: usize = 10_000;

/// Where a channel sits: its guild, or `None` for a DM.
pub type Guild = Option<u64>;

/// A guild id, or 0 for a DM.
impl Stored for Guild {
    fn to_cursor(self) -> Option<i64> {
        i64::try_from(self.unwrap_or(0)).ok()
    }
    fn from_cursor(cursor: i64) -> Option<Guild> {
        u64::try_from(cursor)
            .ok()
            .map(|guild| (guild != 0).then_some(guild))
    }
}

/// The guild of each channel, and whether it was saved.
pub struct Guilds {
    known: Record<Guild>,
}

impl Guilds {
    /// The guilds of `account`'s channels.
    pub fn new(account: &str) -> Guilds {
        Guilds {
            known: Record::new(
                format!("discord:{account}:guild:"),
                "a channel's guild",
                MAX_CHANNELS,
                |_| 0,
            ),
        }
    }

    /// Notes that `channel` sits in `guild` (to be saved when new here or moved). At the cap
    /// a saved entry goes (the store has it); an unsaved one stays until written.
    pub fn note(&self, channel: u64, guild: Guild) {
        self.known.note(channel, guild, |here| *here != guild);
    }

    /// Where `channel` sits, if known (`Some(None)`: a DM).
    pub fn of(&self, channel: u64) -> Option<Guild> {
        self.known.get(channel)
    }

    /// Reads the saved guilds into memory (what is known here already wins).
    pub async fn load(&self, sink: &dyn InboundSink) {
        self.known.load(sink, |_, _| false).await;
    }

    /// Writes the guilds noted since they were last written.
    pub async fn save(&self, sink: &dyn InboundSink) {
        self.known.save(sink).await;
    }

    /// Writes `channel`'s guild now if it is not written yet, beside a save under way (a
    /// channel's guild never changes, so two writes of it cannot undo each other).
    pub async fn save_one(&self, sink: &dyn InboundSink, channel: u64) {
        self.known.save_one(sink, channel).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::record::test_sink::{Broken, Cursors};

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

    #[tokio::test]
    async fn at_the_cap_saved_guilds_go_and_unsaved_ones_stay() {
        let sink = Cursors::default();
        let guilds = Guilds::new("default");
        let full = MAX_CHANNELS as u64 - 1;
        for channel in 0..full {
            guilds.note(channel, Some(1 << 22));
        }
        guilds.save(&sink).await;
        // Not saved yet (the record is full with it); then one past the cap.
        guilds.note(1_000_000, Some(2 << 22));
        guilds.note(1_000_001, Some(3 << 22));
        assert_eq!(guilds.known.len(), MAX_CHANNELS, "bounded");
        let saved_kept = (0..full).filter(|c| guilds.of(*c).is_some()).count();
        assert_eq!(saved_kept, MAX_CHANNELS - 2, "a saved one was forgotten");
        assert_eq!(guilds.of(1_000_000), Some(Some(2 << 22)), "unsaved: kept");
        assert_eq!(guilds.of(1_000_001), Some(Some(3 << 22)));
        sink.0.lock().unwrap().clear();
        guilds.save(&sink).await;
        let saved = sink.0.lock().unwrap();
        assert_eq!(saved.get("discord:default:guild:1000000"), Some(&(2 << 22)));
        assert_eq!(saved.get("discord:default:guild:1000001"), Some(&(3 << 22)));
    }

    #[tokio::test]
    async fn while_saves_fail_the_record_stays_bounded() {
        let guilds = Guilds::new("default");
        for channel in 0..MAX_CHANNELS as u64 + 50 {
            guilds.note(channel, Some(1 << 22));
            if channel % 1_000 == 0 {
                guilds.save(&Broken::Fails).await;
            }
        }
        assert_eq!(
            guilds.known.len(),
            MAX_CHANNELS,
            "all unsaved, bounded all the same"
        );
        assert_eq!(
            guilds.of(MAX_CHANNELS as u64 + 49),
            Some(Some(1 << 22)),
            "the newest noted is known"
        );
    }
}
