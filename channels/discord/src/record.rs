//! A value per channel kept durably as the cursors `<prefix><channel id>`, each entry marked
//! while it changed since it was written: the shape shared by the channel cursors (the last
//! message taken) and the channel guilds (where a channel sits).
//!
//! An entry stays marked until a write of its current value succeeded, so a save that fails,
//! or is dropped midway (its shard stopped), leaves what it did not write to the next one.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use chela_channel::InboundSink;

/// A value kept as a cursor (an `i64`).
pub trait Stored: Copy + PartialEq {
    /// Its cursor value; `None` when it cannot be written as one.
    fn to_cursor(self) -> Option<i64>;
    /// The value of a saved cursor; `None` when it is not one.
    fn from_cursor(cursor: i64) -> Option<Self>;
}

/// One channel's value, and whether it changed since it was last written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<V> {
    /// The value.
    pub value: V,
    /// Not written yet.
    pub dirty: bool,
}

impl<V> Entry<V> {
    /// A value to write.
    pub fn changed(value: V) -> Entry<V> {
        Entry { value, dirty: true }
    }
}

/// The values of the channels, by channel id.
pub struct Record<V> {
    prefix: String,
    /// What a value is, for the warning when it cannot be written.
    what: &'static str,
    entries: Mutex<HashMap<u64, Entry<V>>>,
}

impl<V: Stored> Record<V> {
    /// The values saved under `prefix`; `what` names one in logs.
    pub fn new(prefix: String, what: &'static str) -> Record<V> {
        Record {
            prefix,
            what,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The entries, to read or change (`None`: the lock is poisoned).
    pub fn entries(&self) -> Option<MutexGuard<'_, HashMap<u64, Entry<V>>>> {
        self.entries.lock().ok()
    }

    /// The value of `channel`, if known.
    pub fn get(&self, channel: u64) -> Option<V> {
        self.entries()?.get(&channel).map(|e| e.value)
    }

    /// Reads the saved values into memory: a channel not known here gets its saved value;
    /// a known one gets it only when `wins(here, saved)`.
    pub async fn load(&self, sink: &dyn InboundSink, wins: impl Fn(&V, &V) -> bool) {
        let saved = sink.cursors(&self.prefix).await;
        let Some(mut entries) = self.entries() else {
            return;
        };
        for (name, cursor) in saved {
            let channel = name.strip_prefix(self.prefix.as_str()).map(str::parse);
            let (Some(Ok(channel)), Some(value)) = (channel, V::from_cursor(cursor)) else {
                continue;
            };
            let saved = Entry {
                value,
                dirty: false,
            };
            let entry = entries.entry(channel).or_insert(saved);
            if wins(&entry.value, &value) {
                *entry = saved;
            }
        }
    }

    /// Writes the values changed since they were last written.
    pub async fn save(&self, sink: &dyn InboundSink) {
        let changed: Vec<(u64, V)> = match self.entries() {
            Some(entries) => entries
                .iter()
                .filter(|(_, e)| e.dirty)
                .map(|(channel, e)| (*channel, e.value))
                .collect(),
            None => return,
        };
        for (channel, value) in changed {
            let Some(cursor) = value.to_cursor() else {
                // Never writable: not tried again.
                self.written(channel, value);
                continue;
            };
            let name = format!("{}{channel}", self.prefix);
            match sink.save_cursor(&name, cursor).await {
                Ok(()) => self.written(channel, value),
                Err(e) => {
                    let what = self.what;
                    tracing::warn!(error = %e, channel, "discord: cannot save {what}");
                }
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

    use chela_channel::{BoxFuture, Inbound, InboundSink, SinkError};

    /// Saved cursors, by name.
    #[derive(Default)]
    pub struct Cursors(pub Mutex<HashMap<String, i64>>);

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

    #[tokio::test]
    async fn a_failed_write_is_tried_again_and_a_written_one_is_not() {
        let record: Record<Id> = Record::new("p:".into(), "a test value");
        record.entries().unwrap().insert(1, Entry::changed(Id(5)));
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
            self.0.entries().unwrap().insert(1, Entry::changed(Id(6)));
            self.1.save_cursor(name, value)
        }
    }

    #[tokio::test]
    async fn a_value_that_moved_during_its_write_is_written_again() {
        let record: Record<Id> = Record::new("p:".into(), "a test value");
        record.entries().unwrap().insert(1, Entry::changed(Id(5)));
        let moving = Moving(&record, Cursors::default());
        record.save(&moving).await;
        assert_eq!(moving.1.0.lock().unwrap().get("p:1"), Some(&5));
        let sink = Cursors::default();
        record.save(&sink).await;
        assert_eq!(sink.0.lock().unwrap().get("p:1"), Some(&6), "still unsaved");
    }
}
