//! A background process's output: the newest bytes up to a cap, the older ones counted.

use std::collections::VecDeque;

use crate::agent::tools::job::Sink;

/// Keeps the newest `cap` bytes of a stream and counts the bytes dropped before them, so
/// positions in the whole stream (as `poll` remembers them) stay meaningful.
#[derive(Debug)]
pub(crate) struct OutputRing {
    bytes: VecDeque<u8>,
    cap: usize,
    dropped: u64,
}

impl OutputRing {
    /// An empty buffer keeping at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        OutputRing {
            bytes: VecDeque::new(),
            cap: cap.max(1),
            dropped: 0,
        }
    }

    /// Bytes dropped from the front so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The kept bytes from stream position `from` on, and how many bytes between `from` and
    /// the first kept byte were dropped already.
    pub(crate) fn since(&self, from: u64) -> (u64, Vec<u8>) {
        let start = from.max(self.dropped);
        let skip = usize::try_from(start - self.dropped).unwrap_or(usize::MAX);
        let bytes = self.bytes.iter().skip(skip).copied().collect();
        (start - from, bytes)
    }

    /// Everything kept.
    pub(crate) fn kept(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }
}

impl Sink for OutputRing {
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend(data);
        if self.bytes.len() > self.cap {
            let cut = self.bytes.len() - self.cap;
            self.bytes.drain(..cut);
            self.dropped += cut as u64;
            // Do not start in the middle of a UTF-8 character.
            while self.bytes.front().is_some_and(|b| (b & 0xC0) == 0x80) {
                self.bytes.pop_front();
                self.dropped += 1;
            }
        }
    }
}

/// The length of `bytes` without a trailing incomplete UTF-8 sequence (whose rest is still to
/// come), so text handed out in pieces never splits a character.
pub(crate) fn complete_utf8_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for (back, &b) in bytes.iter().rev().take(4).enumerate() {
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = match b {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if back + 1 < need { n - back - 1 } else { n };
    }
    n
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn the_newest_bytes_are_kept_and_the_dropped_counted() {
        let mut ring = OutputRing::new(5);
        ring.push(b"abc");
        assert_eq!((ring.kept().len(), ring.dropped()), (3, 0));
        ring.push(b"defg");
        assert_eq!(ring.kept(), b"cdefg");
        assert_eq!(ring.dropped(), 2);
        assert_eq!(ring.since(0), (2, b"cdefg".to_vec()));
        assert_eq!(ring.since(4), (0, b"efg".to_vec()));
        assert_eq!(ring.since(7), (0, Vec::new()));
    }

    #[test]
    fn the_buffer_never_starts_inside_a_character() {
        let mut ring = OutputRing::new(4);
        ring.push("aé€".as_bytes()); // 1 + 2 + 3 bytes
        assert_eq!(String::from_utf8(ring.kept()).unwrap(), "€");
        assert_eq!(ring.dropped(), 3);
    }

    #[test]
    fn an_unfinished_trailing_character_is_held_back() {
        let euro = "€".as_bytes();
        assert_eq!(complete_utf8_len(b"ab"), 2);
        assert_eq!(complete_utf8_len(euro), 3);
        assert_eq!(complete_utf8_len(&euro[..2]), 0);
        let mut text = b"x".to_vec();
        text.extend_from_slice(&euro[..1]);
        assert_eq!(complete_utf8_len(&text), 1);
        assert_eq!(complete_utf8_len(b""), 0);
    }
}
