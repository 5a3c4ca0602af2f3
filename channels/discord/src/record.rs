//! A value per channel kept durably as the cursors `<prefix><channel id>`, each entry marked
//! while it changed since it was written: the shape shared by the channel cursors (the last
//! message taken) and the channel guilds (where a channel sits).
//!
//! An entry stays marked until a write of its current value succeeded, so a save that fails,
//! or is dropped midway (its shard stopped), leaves what it did not write to the next one.
//! Saves run one at a time (the shards of a node share the record), so each change is
//! written once and a newer value is never overwritten by an older one. At most a set number
//! of entries are kept, in memory and after a load; at that cap a saved entry makes room, an
//! unsaved one only when none is saved.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use chela_channel::InboundSink;

/// A value kept as a cursor (an `i64`).
pub trait Stored: Copy + PartialEq {
    /// Its cursor value; `None` when it cannot be written as one.
    fn to_cursor(self) -> Option<i64>;
    /// The value of a saved cursor; `None` when it is not one.
    fn from_cursor(cursor: i64) -> Option<Self>;
    /// Only moves forward: written so that a late write of an older value (another node's)
    /// leaves a newer saved one as it is.
    const FORWARD_ONLY: bool = false;
}

/// One channel's value, and whether it changed since it was last written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry<V> {
    value: V,
    /// Not written yet.
    dirty: bool,
}

/// The values of the channels, by channel id, at most `cap` of them.
pub struct Record<V> {
    prefix: String,
    /// What a value is, for the warning when it cannot be written.
    what: &'static str,
    /// Entries kept at most.
    cap: usize,
    /// How much an entry is worth keeping: at the cap the lowest goes first.
    rank: fn(&V) -> u64,
    entries: Mutex<HashMap<u64, Entry<V>>>,
    /// Held by the save under way (and let go if it is dropped): the shards of a node share
    /// one record, and one at a time their saves write each change once, in order.
    saving: tokio::sync::Mutex<()>,
}

impl<V: Stored> Record<V> {
    /// The values saved under `prefix`, at most `cap` kept in memory (at the cap a saved one
    /// of the lowest `rank` makes room); `what` names one in logs.
    pub fn new(prefix: String, what: &'static str, cap: usize, rank: fn(&V) -> u64) -> Record<V> {
        Record {
            prefix,
            what,
            cap,
            rank,
            entries: Mutex::new(HashMap::new()),
            saving: tokio::sync::Mutex::new(()),
        }
    }

    /// The entries (`None`: the lock is poisoned).
    fn entries(&self) -> Option<MutexGuard<'_, HashMap<u64, Entry<V>>>> {
        self.entries.lock().ok()
    }

    /// The value of `channel`, if known.
    pub fn get(&self, channel: u64) -> Option<V> {
        self.entries()?.get(&channel).map(|e| e.value)
    }

    /// Every known channel with its value.
    pub fn all(&self) -> Vec<(u64, V)> {
        self.entries()
            .map(|entries| entries.iter().map(|(c, e)| (*c, e.value)).collect())
            .unwrap_or_default()
    }

    /// Entries kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries().map_or(0, |entries| entries.len())
    }

    /// Sets `channel` to `value`, to be written: when it is new here (true; at the cap
    /// another makes room), or when `replaces(value here)`.
    pub fn note(&self, channel: u64, value: V, replaces: impl FnOnce(&V) -> bool) -> bool {
        let Some(mut entries) = self.entries() else {
            return false;
        };
        if let Some(entry) = entries.get_mut(&channel) {
            if replaces(&entry.value) {
                *entry = Entry { value, dirty: true };
            }
            return false;
        }
        self.make_room(&mut entries);
        entries.insert(channel, Entry { value, dirty: true });
        true
    }

    /// At the cap, forgets the saved entry of the lowest rank (the store has it); one not
    /// saved yet only when none is saved (the store is failing), so memory stays bounded.
    fn make_room(&self, entries: &mut HashMap<u64, Entry<V>>) {
        if entries.len() < self.cap {
            return;
        }
        let lowest = |saved: bool| {
            entries
                .iter()
                .filter(|(_, e)| !saved || !e.dirty)
                .min_by_key(|(_, e)| (self.rank)(&e.value))
                .map(|(c, _)| *c)
        };
        if let Some(channel) = lowest(true).or_else(|| lowest(false)) {
            entries.remove(&channel);
        }
    }

    /// Reads the saved values into memory: a known channel gets its saved value only when
    /// `wins(here, saved)`; the others are added while there is room, the highest rank first.
    pub async fn load(&self, sink: &dyn InboundSink, wins: impl Fn(&V, &V) -> bool) {
        let saved = sink.cursors(&self.prefix).await;
        let Some(mut entries) = self.entries() else {
            return;
        };
        let mut new = Vec::new();
        for (name, cursor) in saved {
            let channel = name.strip_prefix(self.prefix.as_str()).map(str::parse);
            let (Some(Ok(channel)), Some(value)) = (channel, V::from_cursor(cursor)) else {
                continue;
            };
            let saved = Entry {
                value,
                dirty: false,
            };
            match entries.get_mut(&channel) {
                Some(entry) if wins(&entry.value, &value) => *entry = saved,
                Some(_) => {}
                None => new.push((channel, saved)),
            }
        }
        new.sort_by_key(|(_, e)| std::cmp::Reverse((self.rank)(&e.value)));
        let room = self.cap.saturating_sub(entries.len());
        entries.extend(new.into_iter().take(room));
    }

    /// Writes the values changed since they were last written, after any save under way.
    pub async fn save(&self, sink: &dyn InboundSink) {
        let _one_at_a_time = self.saving.lock().await;
        let changed: Vec<(u64, V)> = match self.entries() {
            Some(entries) => entries
                .iter()
                .filter(|(_, e)| e.dirty)
                .map(|(channel, e)| (*channel, e.value))
                .collect(),
            None => return,
        };
        for (channel, value) in changed {
            self.write(sink, channel, value).await;
        }
    }

    /// Writes `channel`'s value now if it is not written yet, beside a save under way rather
    /// than after it (a new channel's first cursor, which the catch-up after a restart needs
    /// to know the channel). Only for values whose writes cannot undo each other in any
    /// order: forward-only ones, and those written once (a channel's guild).
    pub async fn save_one(&self, sink: &dyn InboundSink, channel: u64) {
        let value = self
            .entries()
            .and_then(|entries| entries.get(&channel).filter(|e| e.dirty).map(|e| e.value));
        if let Some(value) = value {
            self.write(sink, channel, value).await;
        }
    }

    /// Writes `value` of `channel`; marks it written once the write succeeded.
    async fn write(&self, sink: &dyn InboundSink, channel: u64, value: V) {
        let Some(cursor) = value.to_cursor() else {
            // Never writable: not tried again.
            self.written(channel, value);
            return;
        };
        let name = format!("{}{channel}", self.prefix);
        let write = if V::FORWARD_ONLY {
            sink.raise_cursor(&name, cursor)
        } else {
            sink.save_cursor(&name, cursor)
        };
        match write.await {
            Ok(()) => self.written(channel, value),
            Err(e) => {
                let what = self.what;
                tracing::warn!(error = %e, channel, "discord: cannot save {what}");
            }
        }
    }

    /// `value` of `channel` was written: unmarked, unless it changed meanwhile.
    fn written(&self, channel: u64, value: V) {
        if let Some(mut entries) = self.entries()
            && let Some(entry) = entries.get_mut(&channel)
            && entry.value == value
        {
            entry.dirty = false;
        }
    }
}

/// A store of cursors in memory, for the tests of the records.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub mod test_sink {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chela_channel::{BoxFuture, Inbound, InboundSink, SinkError};

    /// Saved cursors, by name, and how many writes were made; each write waits a turn
    /// before it is done (as a store's does), and a raised cursor keeps the larger value (as
    /// the stores do).
    #[derive(Default)]
    pub struct Cursors(pub Mutex<HashMap<String, i64>>, pub AtomicUsize);

    impl Cursors {
        /// Writes cursor `name` after a turn, the larger of both values when `raise`.
        fn write(
            &self,
            name: &str,
            value: i64,
            raise: bool,
        ) -> BoxFuture<'_, Result<(), SinkError>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            let name = name.to_owned();
            Box::pin(async move {
                tokio::task::yield_now().await;
                let mut saved = self.0.lock().unwrap();
                let cursor = saved.entry(name).or_insert(value);
                *cursor = if raise { (*cursor).max(value) } else { value };
                Ok(())
            })
        }
    }

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
            self.write(name, value, false)
        }
        fn raise_cursor<'a>(
            &'a self,
            name: &'a str,
            value: i64,
        ) -> BoxFuture<'a, Result<(), SinkError>> {
            self.write(name, value, true)
        }
    }

    /// A store whose cursor writes fail, or never end (a shard dropped in the middle of a
    /// save).
    pub enum Broken {
        /// Each write fails.
        Fails,
        /// Each write hangs.
        Hangs,
    }

    impl InboundSink for Broken {
        fn accept(&self, _: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
            Box::pin(async { Ok(()) })
        }
        fn save_cursor<'a>(&'a self, _: &'a str, _: i64) -> BoxFuture<'a, Result<(), SinkError>> {
            match self {
                Broken::Fails => Box::pin(async { Err(SinkError("down".into())) }),
                Broken::Hangs => Box::pin(std::future::pending()),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use chela_channel::{BoxFuture, Inbound, SinkError};

    use super::test_sink::{Broken, Cursors};
    use super::*;

    /// A value of the test's own.
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Id(u64);

    impl Stored for Id {
        fn to_cursor(self) -> Option<i64> {
            i64::try_from(self.0).ok()
        }
        fn from_cursor(cursor: i64) -> Option<Id> {
            u64::try_from(cursor).ok().map(Id)
        }
    }

    /// A record of at most `cap` values, the higher the worthier.
    fn record(cap: usize) -> Record<Id> {
        Record::new("p:".into(), "a test value", cap, |id| id.0)
    }

    #[tokio::test(start_paused = true)]
    async fn one_channels_value_is_written_beside_a_save_under_way_and_only_it() {
        let record = record(10);
        record.note(1, Id(5), |_| true);
        record.note(2, Id(7), |_| true);
        let sink = Cursors::default();
        let under_way = record.saving.lock().await;
        let one = tokio::time::timeout(Duration::from_secs(60), record.save_one(&sink, 2));
        assert!(one.await.is_ok(), "waited for the save under way");
        drop(under_way);
        assert_eq!(
            *sink.0.lock().unwrap(),
            HashMap::from([("p:2".to_string(), 7)])
        );
        record.save(&sink).await;
        assert_eq!(sink.0.lock().unwrap().get("p:1"), Some(&5));
        assert_eq!(sink.1.load(Ordering::SeqCst), 2, "channel 2 written once");
    }

    #[tokio::test]
    async fn a_failed_write_is_tried_again_and_a_written_one_is_not() {
        let record = record(10);
        record.note(1, Id(5), |_| true);
        record.save(&Broken::Fails).await;
        let sink = Cursors::default();
        record.save(&sink).await;
        assert_eq!(sink.0.lock().unwrap().get("p:1"), Some(&5));
        sink.0.lock().unwrap().clear();
        record.save(&sink).await;
        assert!(sink.0.lock().unwrap().is_empty(), "written once");
    }

    /// Saves, and moves the value of channel 1 while its write is under way.
    struct Moving<'r>(&'r Record<Id>, Cursors);

    impl InboundSink for Moving<'_> {
        fn accept(&self, _: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
            Box::pin(async { Ok(()) })
        }
        fn save_cursor<'a>(
            &'a self,
            name: &'a str,
            value: i64,
        ) -> BoxFuture<'a, Result<(), SinkError>> {
            self.0.note(1, Id(6), |_| true);
            self.1.save_cursor(name, value)
        }
    }

    #[tokio::test]
    async fn a_value_that_moved_during_its_write_is_written_again() {
        let record = record(10);
        record.note(1, Id(5), |_| true);
        let moving = Moving(&record, Cursors::default());
        record.save(&moving).await;
        assert_eq!(moving.1.0.lock().unwrap().get("p:1"), Some(&5));
        let sink = Cursors::default();
        record.save(&sink).await;
        assert_eq!(sink.0.lock().unwrap().get("p:1"), Some(&6), "still unsaved");
    }

    #[tokio::test]
    async fn saves_run_one_at_a_time_so_each_change_is_written_once() {
        let record = record(10);
        record.note(1, Id(5), |_| true);
        record.note(2, Id(6), |_| true);
        let sink = Cursors::default();
        // The shards of a node saving the one record at the same time.
        tokio::join!(record.save(&sink), record.save(&sink), record.save(&sink));
        assert_eq!(sink.1.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(sink.0.lock().unwrap().get("p:2"), Some(&6));
    }

    #[tokio::test]
    async fn at_the_cap_a_saved_entry_makes_room_and_an_unsaved_one_only_when_all_are() {
        let record = record(2);
        assert!(record.note(1, Id(9), |_| true));
        record.save(&Cursors::default()).await;
        record.note(2, Id(1), |_| true);
        assert!(record.note(3, Id(5), |_| true), "new");
        assert_eq!(record.len(), 2);
        assert_eq!(
            record.get(1),
            None,
            "saved: forgotten, though the worthiest"
        );
        assert_eq!(record.get(2), Some(Id(1)), "unsaved: kept");
        record.note(4, Id(7), |_| true);
        assert_eq!(record.len(), 2, "all unsaved: bounded all the same");
        assert_eq!(record.get(2), None, "the lowest went");
    }

    #[tokio::test]
    async fn a_load_stops_at_the_cap_keeping_the_worthiest() {
        let sink = Cursors::default();
        for (channel, value) in [(1, 1), (2, 5), (3, 9), (4, 3)] {
            sink.0.lock().unwrap().insert(format!("p:{channel}"), value);
        }
        let record = record(2);
        record.load(&sink, |_, _| false).await;
        let mut all = record.all();
        all.sort_by_key(|(c, _)| *c);
        assert_eq!(all, [(2, Id(5)), (3, Id(9))]);
        let record = self::record(2);
        record.note(7, Id(0), |_| true);
        record.load(&sink, |_, _| false).await;
        assert_eq!(record.len(), 2);
        assert_eq!(record.get(3), Some(Id(9)));
    }
}
