//! Markdown the model writes -> Telegram HTML. Only balanced constructs are converted
//! (fenced code, inline code, `**bold**`, `[text](url)`, and lines quoted with `> ` as an
//! expandable quote, which Telegram shows collapsed when long); everything else is escaped,
//! so the result is always valid HTML even for a half-streamed preview.

/// Converts model markdown to Telegram HTML (`parse_mode = HTML`).
pub fn to_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while !rest.is_empty() {
        let line_start =
            rest.len() == text.len() || text[..text.len() - rest.len()].ends_with('\n');
        if line_start && let Some((quote, after)) = quoted_lines(rest) {
            out.push_str(&format!(
                "<blockquote expandable>{}</blockquote>",
                to_html(&quote)
            ));
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("```")
            && let Some(end) = after.find("```")
        {
            let block = &after[..end];
            let (lang, code) = match block.split_once('\n') {
                Some((lang, code)) if !lang.contains(char::is_whitespace) => (lang, code),
                _ => ("", block),
            };
            if lang.is_empty() {
                out.push_str(&format!("<pre>{}</pre>", escape(code)));
            } else {
                out.push_str(&format!(
                    "<pre><code class=\"language-{}\">{}</code></pre>",
                    escape(lang),
                    escape(code)
                ));
            }
            rest = &after[end + 3..];
            continue;
        }
        if let Some(after) = rest.strip_prefix('`')
            && let Some(end) = after.find(['`', '\n'])
            && after[end..].starts_with('`')
            && end > 0
        {
            out.push_str(&format!("<code>{}</code>", escape(&after[..end])));
            rest = &after[end + 1..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("**")
            && let Some(end) = after.find("**")
            && end > 0
            && !after[..end].contains("```")
        {
            out.push_str(&format!("<b>{}</b>", escape(&after[..end])));
            rest = &after[end + 2..];
            continue;
        }
        if let Some(after) = rest.strip_prefix('[')
            && let Some(close) = after.find("](")
            && let Some(end) = after[close + 2..].find(')')
            && !after[..close].contains(['\n', '['])
        {
            let url = &after[close + 2..close + 2 + end];
            if url.starts_with("http://") || url.starts_with("https://") {
                out.push_str(&format!(
                    "<a href=\"{}\">{}</a>",
                    escape(url),
                    escape(&after[..close])
                ));
                rest = &after[close + 3 + end..];
                continue;
            }
        }
        let Some(c) = rest.chars().next() else { break };
        push_escaped(&mut out, c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The `> ` lines at the start of `text`, without their marks, and what follows them (after
/// the last quoted line's line break); `None` when `text` does not start with one.
fn quoted_lines(text: &str) -> Option<(String, &str)> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (line, after) = match rest.find('\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let body = match line.strip_prefix("> ") {
            Some(body) => body,
            None if line == ">" => "",
            None => break,
        };
        lines.push(body);
        rest = after;
    }
    (!lines.is_empty()).then(|| (lines.join("\n"), rest))
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        _ => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_balanced_markdown_and_escapes_the_rest() {
        assert_eq!(to_html("a < b & **c**"), "a &lt; b &amp; <b>c</b>");
        assert_eq!(to_html("run `ls -l`"), "run <code>ls -l</code>");
        assert_eq!(
            to_html("```rust\nfn main() {}\n```"),
            "<pre><code class=\"language-rust\">fn main() {}\n</code></pre>"
        );
        assert_eq!(
            to_html("[docs](https://x.dev/a)"),
            "<a href=\"https://x.dev/a\">docs</a>"
        );
    }

    #[test]
    fn quoted_lines_become_an_expandable_quote() {
        assert_eq!(
            to_html("💭 Reasoning\n> a < b\n> **c**\nafter"),
            "💭 Reasoning\n<blockquote expandable>a &lt; b\n<b>c</b></blockquote>after"
        );
        assert_eq!(to_html("> x"), "<blockquote expandable>x</blockquote>");
        // A `>` inside a line is text.
        assert_eq!(to_html("a > b"), "a &gt; b");
        assert_eq!(to_html(">no space"), "&gt;no space");
    }

    #[test]
    fn half_streamed_markdown_stays_plain() {
        assert_eq!(to_html("**bol"), "**bol");
        assert_eq!(to_html("```rust\nfn ma"), "```rust\nfn ma");
        assert_eq!(to_html("a `b"), "a `b");
    }
}
