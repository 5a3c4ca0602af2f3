//! Markdown the model writes -> Telegram HTML. Only balanced constructs are converted
//! (fenced code, inline code, `**bold**`, `[text](url)`); everything else is escaped, so the
//! result is always valid HTML even for a half-streamed preview.

/// Converts model markdown to Telegram HTML (`parse_mode = HTML`).
pub fn to_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while !rest.is_empty() {
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
    fn half_streamed_markdown_stays_plain() {
        assert_eq!(to_html("**bol"), "**bol");
        assert_eq!(to_html("```rust\nfn ma"), "```rust\nfn ma");
        assert_eq!(to_html("a `b"), "a `b");
    }
}
