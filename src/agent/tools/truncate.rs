//! Shortening tool output for the model: keep the head and the tail, say what was cut.

/// Shortens `text` to at most `max_chars` chars (Unicode scalar values) by keeping its head
/// and tail around a marker that states how much was omitted and the total size, e.g.
/// `"\n[... 12345 chars omitted of 40000 total ...]\n"`. Text that fits is returned unchanged.
/// The marker counts against `max_chars`; when even the marker does not fit, only it is returned.
pub fn head_tail(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    // The marker is at its longest when every char is omitted; budget for that.
    let budget = max_chars.saturating_sub(marker(total, total).chars().count());
    let head = budget / 2;
    let tail = budget - head;
    let omitted = total - head - tail;
    join(
        take_head(text, head),
        &marker(omitted, total),
        take_tail(text, tail),
    )
}

/// Joins a head and a tail around `marker`, keeping at most `max_chars` chars in all.
pub(crate) fn head_tail_parts(head: &str, tail: &str, marker: &str, max_chars: usize) -> String {
    let budget = max_chars.saturating_sub(marker.chars().count());
    let head_n = budget / 2;
    join(
        take_head(head, head_n),
        marker,
        take_tail(tail, budget - head_n),
    )
}

fn join(head: &str, marker: &str, tail: &str) -> String {
    let mut out = String::with_capacity(head.len() + marker.len() + tail.len());
    out.push_str(head);
    out.push_str(marker);
    out.push_str(tail);
    out
}

fn marker(omitted: usize, total: usize) -> String {
    format!("\n[... {omitted} chars omitted of {total} total ...]\n")
}

/// The first `n` chars of `s`.
pub(crate) fn take_head(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The last `n` chars of `s`.
pub(crate) fn take_tail(s: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    match s.char_indices().nth_back(n - 1) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(head_tail("hello", 5), "hello");
        assert_eq!(head_tail("", 0), "");
    }

    #[test]
    fn long_text_keeps_head_and_tail_and_states_total() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let out = head_tail(&text, 200);
        assert!(out.chars().count() <= 200, "{}", out.chars().count());
        assert!(out.starts_with("abcdefghij"));
        assert!(out.ends_with(&text[990..]));
        assert!(out.contains("chars omitted of 1000 total ...]"), "{out}");
        let kept = out.chars().count() - marker_len(&out);
        let omitted: usize = out
            .split("[... ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert_eq!(kept + omitted, 1000);
    }

    fn marker_len(out: &str) -> usize {
        let start = out.find("\n[... ").unwrap_or(0);
        let end = out
            .find(" total ...]\n")
            .map(|i| i + " total ...]\n".len())
            .unwrap_or(0);
        out[start..end].chars().count()
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é🦀ü".repeat(500);
        let out = head_tail(&text, 100);
        assert!(out.chars().count() <= 100);
        assert!(out.starts_with("é🦀ü"));
        assert!(out.contains("of 1500 total"));
    }

    #[test]
    fn tiny_budget_returns_only_the_marker() {
        let out = head_tail(&"x".repeat(100), 3);
        assert_eq!(out, "\n[... 100 chars omitted of 100 total ...]\n");
    }

    #[test]
    fn take_head_and_tail_count_chars() {
        assert_eq!(take_head("a🦀b", 2), "a🦀");
        assert_eq!(take_tail("a🦀b", 2), "🦀b");
        assert_eq!(take_tail("ab", 5), "ab");
        assert_eq!(take_head("ab", 0), "");
    }
}
