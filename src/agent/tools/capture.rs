//! Bounded capture of a byte stream: the first and last bytes kept, the total counted.

use std::collections::VecDeque;

use super::truncate::{head_tail, head_tail_parts};

/// Keeps at most `cap` bytes from the start and `cap` from the end of what is pushed, so a
/// chatty process or a huge file never grows memory without bound.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    cap: usize,
    total: u64,
}

impl Capture {
    /// A capture sized for output that will be cut to `max_chars` chars (4 bytes per char).
    pub(crate) fn for_chars(max_chars: usize) -> Self {
        let cap = max_chars.saturating_mul(4).clamp(4096, 8 << 20);
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            cap,
            total: 0,
        }
    }

    /// Appends bytes.
    pub(crate) fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.head.len() < self.cap {
            let n = (self.cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.len() >= self.cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.cap..]);
        } else {
            let overflow = (self.tail.len() + data.len()).saturating_sub(self.cap);
            self.tail.drain(..overflow);
            self.tail.extend(data);
        }
    }

    /// True when nothing was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The captured text (lossy UTF-8), cut to `max_chars` with head and tail kept and the
    /// total size stated (in chars when everything was kept, in bytes otherwise).
    pub(crate) fn into_text(mut self, max_chars: usize) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head;
            all.extend(self.tail);
            return head_tail(&String::from_utf8_lossy(&all), max_chars);
        }
        let head = String::from_utf8_lossy(&self.head).into_owned();
        let tail = String::from_utf8_lossy(self.tail.make_contiguous()).into_owned();
        let marker = format!(
            "\n[... {} bytes omitted of {} bytes total ...]\n",
            self.total - kept,
            self.total
        );
        head_tail_parts(&head, &tail, &marker, max_chars)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn small_input_is_kept_whole() {
        let mut c = Capture::for_chars(100);
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.into_text(100), "hello world");
    }

    #[test]
    fn huge_input_keeps_head_and_tail_with_total_bytes() {
        let mut c = Capture::for_chars(1000);
        c.push(b"START");
        for _ in 0..1000 {
            c.push(&[b'x'; 1000]);
        }
        c.push(b"END");
        assert!(c.head.len() <= c.cap && c.tail.len() <= c.cap);
        let text = c.into_text(1000);
        assert!(text.starts_with("START"));
        assert!(text.ends_with("END"));
        assert!(text.contains("of 1000008 bytes total"), "{text}");
        assert!(text.chars().count() <= 1000);
    }
}
