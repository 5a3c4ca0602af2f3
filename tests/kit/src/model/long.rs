//! The `long <n>` answer: exactly `n` characters of deterministic prose.

/// Words the lines are made of (none longer than nine characters).
const VOCAB: &[&str] = &[
    "the", "fake", "model", "writes", "a", "long", "answer", "so", "that", "chunkers", "and",
    "previews", "have", "real", "work", "to", "do", "across", "many", "lines", "of", "plain",
    "text",
];

/// One filler word for each length from one to nine characters.
const BY_LENGTH: &[&str] = &[
    "a",
    "an",
    "the",
    "fake",
    "model",
    "stream",
    "answers",
    "sentence",
    "carefully",
];

/// Regular line length; the last line takes whatever is left (up to `LAST_MAX`).
const LINE: usize = 70;
const LAST_MAX: usize = 100;

/// Exactly `n` ASCII characters: lines of 70 characters, each a sentence, a blank line after
/// every fifth line, ending in a full stop.
pub(crate) fn long_text(n: usize) -> String {
    let mut out = String::with_capacity(n);
    let mut line = 0usize;
    loop {
        let separator = match line {
            0 => "",
            l if l % 5 == 0 => "\n\n",
            _ => "\n",
        };
        let rest = n.saturating_sub(out.len() + separator.len());
        out.push_str(separator);
        if rest <= LAST_MAX {
            out.push_str(&sentence(line * 7, rest));
            return out;
        }
        out.push_str(&sentence(line * 7, LINE));
        line += 1;
    }
}

/// A capitalised sentence of exactly `len` characters ending in `.`.
fn sentence(seed: usize, len: usize) -> String {
    if len == 0 {
        return String::new();
    }
    let body = len - 1;
    let mut text = String::with_capacity(len);
    let mut index = seed;
    loop {
        let word = VOCAB[index % VOCAB.len()];
        let space = usize::from(!text.is_empty());
        if text.len() + space + word.len() > body {
            break;
        }
        if space == 1 {
            text.push(' ');
        }
        text.push_str(word);
        index += 1;
    }
    let gap = body - text.len();
    if gap > 0 {
        if text.is_empty() {
            text.push_str(&word_of_length(gap));
        } else if gap == 1 {
            text.push('s');
        } else {
            text.push(' ');
            text.push_str(&word_of_length(gap - 1));
        }
    }
    if let Some(first) = text.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    text.push('.');
    text
}

fn word_of_length(length: usize) -> String {
    match BY_LENGTH.get(length.wrapping_sub(1)) {
        Some(word) => (*word).to_owned(),
        None => "o".repeat(length),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_is_exact_and_ends_in_a_full_stop() {
        for n in (0..400).chain([1000, 4096, 12_345]) {
            let text = long_text(n);
            assert_eq!(text.chars().count(), n, "length {n}");
            if n > 0 {
                assert!(text.ends_with('.'), "length {n}: {text:?}");
            }
        }
    }

    #[test]
    fn long_text_has_paragraphs_of_five_lines() {
        let text = long_text(2000);
        let first = text.split("\n\n").next().unwrap_or_default();
        assert_eq!(first.lines().count(), 5);
        assert!(first.lines().all(|line| line.len() == LINE));
        assert!(!text.contains("  "));
    }
}
