//! Splitting reply text into platform-sized parts: breaks at a paragraph, then a newline,
//! then whitespace, and never inside a code fence unless forced (then the fence is closed
//! and reopened in the next part).

/// Where to cut a text that does not fit one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The first part, within the limits (a fence cut open is closed).
    pub head: String,
    /// Byte offset in the input where the rest begins.
    pub rest_at: usize,
    /// A fence line to reopen at the start of the next part, when the cut was inside one.
    pub reopen: Option<String>,
}

/// Finds the longest head of `text` that fits `max_chars` (and `max_lines`, if any).
/// Returns `None` when all of `text` fits.
pub fn split_head(text: &str, max_chars: usize, max_lines: Option<usize>) -> Option<Split> {
    let max_chars = max_chars.max(16);
    let limit = limit_byte(text, max_chars, max_lines)?;
    let cut = best_break(&text[..limit]).unwrap_or(limit);
    let head = text[..cut].trim_end_matches(' ');
    let skipped = text[cut..].len() - text[cut..].trim_start_matches([' ', '\n']).len();
    let rest_at = cut + skipped;
    match open_fence(head) {
        Some(fence) if head.chars().count() + 4 <= max_chars => Some(Split {
            head: format!("{head}\n```"),
            rest_at,
            reopen: Some(fence),
        }),
        _ => Some(Split {
            head: head.to_string(),
            rest_at,
            reopen: None,
        }),
    }
}

/// Splits `text` into parts that each fit, reopening fences across cuts.
pub fn split_all(text: &str, max_chars: usize, max_lines: Option<usize>) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text.to_string();
    while let Some(split) = split_head(&rest, max_chars, max_lines) {
        parts.push(split.head);
        let tail = &rest[split.rest_at..];
        rest = match split.reopen {
            Some(fence) => format!("{fence}\n{tail}"),
            None => tail.to_string(),
        };
    }
    if !rest.trim().is_empty() {
        parts.push(rest);
    }
    parts
}

/// The byte offsets of one kind of break (paragraph, line, sentence, space) in a window.
type BreakFinder = fn(&str) -> Vec<usize>;

/// Block streaming (SPEC 5): the next finished block of `text` of at least `min_chars` and at
/// most `max_chars` (and `max_lines`), cut at a paragraph, then a newline, then a sentence end,
/// then whitespace, and never inside a code fence; `None` while no block is finished yet.
/// Only when a fence runs past `max_chars` is it cut, closed and reopened (as [`split_head`]).
pub fn block_head(
    text: &str,
    min_chars: usize,
    max_chars: usize,
    max_lines: Option<usize>,
) -> Option<Split> {
    let min_byte = text.char_indices().nth(min_chars).map(|(i, _)| i)?;
    let limit = limit_byte(text, max_chars, max_lines).unwrap_or(text.len());
    if limit <= min_byte {
        // Lines fill up before the minimum: the platform's own cut decides.
        return split_head(text, max_chars, max_lines);
    }
    let window = &text[..limit];
    let kinds: [BreakFinder; 4] = [
        |w| w.match_indices("\n\n").map(|(i, _)| i + 1).collect(),
        |w| w.match_indices('\n').map(|(i, _)| i).collect(),
        |w| {
            w.match_indices(['.', '!', '?'])
                .filter(|(i, _)| w[i + 1..].starts_with([' ', '\n']))
                .map(|(i, _)| i + 1)
                .collect()
        },
        |w| w.match_indices(' ').map(|(i, _)| i).collect(),
    ];
    for breaks in kinds {
        let cut = breaks(window)
            .into_iter()
            .rev()
            .find(|&i| i >= min_byte && open_fence(&text[..i]).is_none());
        if let Some(cut) = cut {
            let head = text[..cut].trim_end_matches(' ');
            let skipped = text[cut..].len() - text[cut..].trim_start_matches([' ', '\n']).len();
            return Some(Split {
                head: head.to_string(),
                rest_at: cut + skipped,
                reopen: None,
            });
        }
    }
    if limit < text.len() {
        // Nothing to cut at outside a fence and the block is full: cut as a final would.
        return split_head(text, max_chars, max_lines);
    }
    None
}

/// Byte index where `text` stops fitting, or `None` if it fits whole. Four chars are kept
/// in reserve so that a fence cut open can be closed within the limit.
fn limit_byte(text: &str, max_chars: usize, max_lines: Option<usize>) -> Option<usize> {
    let fits_chars = text.chars().count() <= max_chars;
    let line_cut = max_lines
        .filter(|m| *m > 0)
        .and_then(|m| text.match_indices('\n').nth(m - 1).map(|(i, _)| i))
        .filter(|&i| i + 1 < text.len());
    if fits_chars && line_cut.is_none() {
        return None;
    }
    let char_cut = if fits_chars {
        text.len()
    } else {
        text.char_indices()
            .nth(max_chars - 4)
            .map_or(text.len(), |(i, _)| i)
    };
    Some(line_cut.map_or(char_cut, |l| l.min(char_cut)))
}

/// The best break inside `window`: paragraph, newline, sentence end, whitespace; a break in
/// the first third of the window is not worth it.
fn best_break(window: &str) -> Option<usize> {
    let floor = window.len() / 3;
    let candidates = [
        window.rfind("\n\n").map(|i| i + 1),
        window.rfind('\n'),
        window.rfind(". ").map(|i| i + 1),
        window.rfind(' '),
    ];
    candidates.into_iter().flatten().find(|&i| i > floor)
}

/// The opening line of the fence left open at the end of `text`, if any.
fn open_fence(text: &str) -> Option<String> {
    let mut open: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            open = match open {
                Some(_) => None,
                None => Some(trimmed.to_string()),
            };
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_not_split() {
        assert_eq!(split_head("hello", 100, None), None);
    }

    #[test]
    fn prefers_paragraph_breaks() {
        let text = format!("{}\n\n{}", "a".repeat(60), "b".repeat(60));
        assert_eq!(
            split_all(&text, 100, None),
            vec![format!("{}\n", "a".repeat(60)), "b".repeat(60)]
        );
    }

    #[test]
    fn a_cut_inside_a_fence_closes_and_reopens_it() {
        let code: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("```rust\n{code}```\n");
        let parts = split_all(&text, 200, None);
        assert!(parts.len() > 1);
        for part in &parts {
            assert!(part.chars().count() <= 200);
            assert_eq!(
                part.matches("```").count() % 2,
                0,
                "unbalanced fence in {part:?}"
            );
        }
        assert!(parts[1].starts_with("```rust\n"));
    }

    #[test]
    fn respects_max_lines() {
        let text = "l\n".repeat(30);
        let parts = split_all(&text, 2000, Some(17));
        assert!(parts.iter().all(|p| p.lines().count() <= 17));
        assert_eq!(parts.iter().map(|p| p.lines().count()).sum::<usize>(), 30);
    }

    #[test]
    fn blocks_wait_for_the_minimum_then_cut_at_the_best_break() {
        let short = "word ".repeat(100);
        assert_eq!(block_head(&short, 800, 1200, None), None);
        // Paragraphs at 600 and 1000 chars: the one past the minimum wins.
        let text = format!(
            "{}\n\n{}\n\n{}",
            "a".repeat(599),
            "b. ".repeat(133),
            "c".repeat(400)
        );
        let split = block_head(&text, 800, 1200, None).unwrap();
        assert_eq!(
            split.head,
            format!("{}\n\n{}\n", "a".repeat(599), "b. ".repeat(133))
        );
        assert!(text[split.rest_at..].starts_with('c'));
        // No paragraph or newline past the minimum: a sentence end.
        let text = format!("{}. {}", "x".repeat(900), "y".repeat(400));
        let split = block_head(&text, 800, 1200, None).unwrap();
        assert_eq!(split.head, format!("{}.", "x".repeat(900)));
    }

    #[test]
    fn blocks_do_not_cut_inside_a_fence_unless_forced() {
        let code: String = (0..20).map(|i| format!("let x{i} = {i};\n")).collect();
        // The fence closes after the minimum: the block ends after the fence.
        let text = format!(
            "{}\n```rust\n{code}```\nafter {}",
            "p".repeat(600),
            "z ".repeat(200)
        );
        let split = block_head(&text, 800, 1200, None).unwrap();
        assert!(split.head.ends_with("```"), "{:?}", split.head);
        assert_eq!(split.reopen, None);
        // A fence longer than the block: cut, closed and reopened.
        let long: String = (0..200).map(|i| format!("let y{i} = {i};\n")).collect();
        let text = format!("```rust\n{long}```\n");
        let split = block_head(&text, 800, 1200, None).unwrap();
        assert!(split.head.ends_with("\n```"));
        assert_eq!(split.reopen.as_deref(), Some("```rust"));
        // A fence still open and short of the maximum: wait for it to close.
        let open = format!("{}\n```\n{}", "q".repeat(700), "w\n".repeat(200));
        assert_eq!(block_head(&open, 800, 1200, None), None);
    }

    proptest! {
        #[test]
        fn parts_fit_and_lose_no_words(words in proptest::collection::vec("[a-z]{1,12}|\n|\n\n", 1..400)) {
            let text = words.join(" ");
            let parts = split_all(&text, 120, None);
            for part in &parts {
                prop_assert!(part.chars().count() <= 120);
            }
            let joined: Vec<&str> = parts.iter().flat_map(|p| p.split_whitespace()).collect();
            let original: Vec<&str> = text.split_whitespace().collect();
            prop_assert_eq!(joined, original);
        }
    }
}
