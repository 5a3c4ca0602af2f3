//! Text between Markdown and Slack's markup: what the model writes becomes `mrkdwn`
//! (`*bold*`, `_italic_`, `~strike~`, `<url|label>`, `&`/`<`/`>` escaped), and what people
//! write (`<@U1>`, `<#C1|general>`, `<https://x|x>`, escaped entities) becomes plain text
//! ([`to_plain`], in its own file).

mod plain;

pub use plain::to_plain;

/// Markdown as Slack shows it: bold, italics, strikethrough, links and headings rewritten,
/// code spans and blocks kept (their text only escaped).
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut in_block = false;
    for (i, line) in markdown.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            // A block opened and closed on one line (```x```) leaves the mode as it was.
            if !fence.contains("```") {
                in_block = !in_block;
            }
            out.push_str(&escape(line));
            continue;
        }
        if in_block {
            out.push_str(&escape(line));
            continue;
        }
        let trimmed = line.trim_start();
        let heading = trimmed.trim_start_matches('#');
        if heading.len() < trimmed.len()
            && heading.starts_with(' ')
            && trimmed.len() - heading.len() <= 6
        {
            out.push('*');
            out.push_str(&inline(heading.trim()));
            out.push('*');
        } else {
            out.push_str(&inline(line));
        }
    }
    if markdown.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// One line outside code blocks: code spans kept, links made, the rest rewritten (never a
/// link's URL).
fn inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (i, part) in line.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(&escape(part));
            continue;
        }
        for piece in links(&escape(part)) {
            match piece {
                Piece::Text(text) => out.push_str(&emphasis(text)),
                Piece::Link { url, label } => {
                    out.push('<');
                    out.push_str(url);
                    out.push('|');
                    out.push_str(&emphasis(label));
                    out.push('>');
                }
            }
        }
    }
    out
}

/// `&`, `<` and `>` as Slack wants them in text.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A piece of a line: text, or a Markdown link to write as `<url|label>`.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Link { url: &'a str, label: &'a str },
}

/// `[label](url)` links found in `text` (already escaped; only http(s) targets; a URL may
/// hold balanced parentheses, as Wikipedia's do).
fn links(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let mut plain = 0;
    while let Some(open) = rest[plain..].find('[').map(|i| plain + i) {
        let after = &rest[open + 1..];
        let link = after.find("](").and_then(|close| {
            let target = &after[close + 2..];
            let end = closing_paren(target)?;
            let url = &target[..end];
            (url.starts_with("http://") || url.starts_with("https://"))
                .then(|| (close, url, close + 2 + end + 1))
        });
        match link {
            Some((close, url, consumed)) => {
                if open > 0 {
                    pieces.push(Piece::Text(&rest[..open]));
                }
                pieces.push(Piece::Link {
                    url,
                    label: &after[..close],
                });
                rest = &after[consumed..];
                plain = 0;
            }
            None => plain = open + 1,
        }
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    pieces
}

/// Where the `)` closing a link target starts `target` ends: the first one that closes no
/// `(` of the target's own.
fn closing_paren(target: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in target.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(i),
            ')' => depth -= 1,
            c if c.is_whitespace() => return None,
            _ => {}
        }
    }
    None
}

/// `**bold**`/`__bold__` -> `*bold*`, `*italic*` -> `_italic_`, `~~strike~~` -> `~strike~`.
fn emphasis(text: &str) -> String {
    let text = text.replace("~~", "~");
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let double =
            i + 1 < chars.len() && chars[i] == chars[i + 1] && matches!(chars[i], '*' | '_');
        if double {
            out.push('*');
            i += 2;
        } else if chars[i] == '*' && single_star_emphasis(&chars, i) {
            out.push('_');
            i += 1;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Whether the lone `*` at `i` opens or closes emphasis (not a list bullet or `2 * 3`).
fn single_star_emphasis(chars: &[char], i: usize) -> bool {
    let before = i.checked_sub(1).map(|j| chars[j]);
    let after = chars.get(i + 1).copied();
    let opens = after.is_some_and(|c| !c.is_whitespace())
        && before.is_none_or(|c| c.is_whitespace() || c == '(');
    let closes =
        before.is_some_and(|c| !c.is_whitespace()) && after.is_none_or(|c| !c.is_alphanumeric());
    opens || closes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn() {
        assert_eq!(
            to_mrkdwn("**bold** and *it* ~~no~~"),
            "*bold* and _it_ ~no~"
        );
        assert_eq!(
            to_mrkdwn("# Title\nsee [docs](https://x.y/a?b=1) <now> & then"),
            "*Title*\nsee <https://x.y/a?b=1|docs> &lt;now&gt; &amp; then"
        );
        assert_eq!(
            to_mrkdwn("```\na < b **c**\n```"),
            "```\na &lt; b **c**\n```"
        );
        assert_eq!(to_mrkdwn("`**x**` * item\n2 * 3"), "`**x**` * item\n2 * 3");
        assert_eq!(
            to_mrkdwn("[not a link](javascript:x)"),
            "[not a link](javascript:x)"
        );
    }

    #[test]
    fn a_links_url_is_never_rewritten() {
        assert_eq!(
            to_mrkdwn("see [the __init__ file](https://x.y/__init__.py) and __this__"),
            "see <https://x.y/__init__.py|the *init* file> and *this*"
        );
        assert_eq!(
            to_mrkdwn("[*b*](https://x.y/a*b*c) ~~gone~~"),
            "<https://x.y/a*b*c|_b_> ~gone~"
        );
    }

    #[test]
    fn a_url_may_hold_balanced_parentheses() {
        assert_eq!(
            to_mrkdwn("[Rust](https://en.wikipedia.org/wiki/Rust_(programming_language)) (yes)"),
            "<https://en.wikipedia.org/wiki/Rust_(programming_language)|Rust> (yes)"
        );
        assert_eq!(
            to_mrkdwn("([x](https://x.y/a))"),
            "(<https://x.y/a|x>)",
            "the link's own paren closes first"
        );
        assert_eq!(to_mrkdwn("[x](https://x.y/(a"), "[x](https://x.y/(a");
    }

    #[test]
    fn a_one_line_code_block_leaves_the_mode_as_it_was() {
        assert_eq!(
            to_mrkdwn("```let a = 1;```\n**bold**"),
            "```let a = 1;```\n*bold*"
        );
        assert_eq!(
            to_mrkdwn("```\n```x```\n**kept**\n```\n**bold**"),
            "```\n```x```\n**kept**\n```\n*bold*"
        );
    }
}
