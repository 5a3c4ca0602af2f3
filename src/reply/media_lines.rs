//! `MEDIA:<path>` lines (docs/media.md): a line of its own, outside code
//! fences, that names a file a reply sends. The outbox splits them off a final; previews and
//! early parts never show them ([`visible`]), so that what was shown stays a prefix of the
//! final without them.

/// The directive that starts a file line.
pub const DIRECTIVE: &str = "MEDIA:";

/// Splits `text` into the text without file lines and the paths those lines name, in order.
/// A file line is `MEDIA:<path>` alone on its line (leading spaces allowed), outside code
/// fences.
pub fn split(text: &str) -> (String, Vec<String>) {
    if !text.contains(DIRECTIVE) {
        return (text.to_owned(), Vec::new());
    }
    let mut fence = false;
    let mut kept = Vec::new();
    let mut paths = Vec::new();
    for line in text.split('\n') {
        match file_line(line, &mut fence) {
            Some(path) => paths.push(path.to_owned()),
            None => kept.push(line),
        }
    }
    (kept.join("\n").trim_end().to_owned(), paths)
}

/// `text` as a preview may show it: without its file lines, and without a last line that
/// could still become one (it has no line end yet and starts like `MEDIA:`).
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(DIRECTIVE) && !last_line_may_become_one(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut fence = false;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(end) = rest.find('\n') {
        let line = &rest[..end];
        if file_line(line, &mut fence).is_none() {
            out.push_str(line);
            out.push('\n');
        }
        rest = &rest[end + 1..];
    }
    if fence || !starts_like_directive(rest) {
        out.push_str(rest);
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `text` ends inside a code fence (an odd number of fence lines).
pub fn open_fence(text: &str) -> bool {
    text.split('\n')
        .filter(|line| line.trim_start().starts_with("```"))
        .count()
        % 2
        == 1
}

/// The path `line` names if it is a file line; `fence` tracks code fences line by line.
fn file_line<'a>(line: &'a str, fence: &mut bool) -> Option<&'a str> {
    let trimmed = line.trim_start();
    if trimmed.starts_with("```") {
        *fence = !*fence;
    }
    match trimmed.strip_prefix(DIRECTIVE).map(str::trim) {
        Some(path) if !*fence && !path.is_empty() => Some(path),
        _ => None,
    }
}

/// Whether the unfinished last line of `text` may still turn into a file line.
fn last_line_may_become_one(text: &str) -> bool {
    let last = text.rsplit('\n').next().unwrap_or(text);
    starts_like_directive(last)
}

/// Whether `line` is a (start of a) file line: `MEDIA:...`, or a non-empty prefix of it.
fn starts_like_directive(line: &str) -> bool {
    let trimmed = line.trim_start();
    if trimmed.is_empty() {
        return false;
    }
    trimmed.starts_with(DIRECTIVE)
        || (trimmed.len() < DIRECTIVE.len() && DIRECTIVE.starts_with(trimmed))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn file_lines_split_off_outside_code_fences() {
        let text = "Here it is\nMEDIA:out/a.png\n  MEDIA: out/b.pdf\n```\nMEDIA:kept.txt\n```";
        let (body, paths) = split(text);
        assert_eq!(paths, vec!["out/a.png", "out/b.pdf"]);
        assert_eq!(body, "Here it is\n```\nMEDIA:kept.txt\n```");
        assert_eq!(split("no files"), ("no files".to_owned(), vec![]));
    }

    #[test]
    fn previews_never_show_a_file_line_not_even_half_of_one() {
        assert_eq!(visible("Here\nMEDIA:out/a.png\nmore"), "Here\nmore");
        assert_eq!(visible("Here\nMEDIA:out/a.p"), "Here\n");
        assert_eq!(visible("Here\nMED"), "Here\n");
        assert_eq!(visible("Here\nM"), "Here\n");
        assert_eq!(visible("Here\nMore"), "Here\nMore");
        assert_eq!(visible("```\nMEDIA:x\n"), "```\nMEDIA:x\n", "code stays");
        // What a preview showed is a prefix of the final the outbox sends.
        let streamed = "Intro\nMEDIA:out/a.png\nThe rest of the answer";
        let (body, _) = split(streamed);
        assert!(body.starts_with(visible("Intro\nMEDIA:out/a.png\nThe").as_ref()));
    }

    #[test]
    fn an_open_fence_is_seen() {
        assert!(open_fence("text\n```rust\nfn main() {}"));
        assert!(!open_fence("text\n```rust\nfn main() {}\n```"));
        assert!(!open_fence("plain"));
    }
}
