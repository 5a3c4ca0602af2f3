//! Text between Markdown and Slack's markup: what the model writes becomes `mrkdwn`
//! (`*bold*`, `_italic_`, `~strike~`, `<url|label>`, `&`/`<`/`>` escaped), and what people
//! write (`<@U1>`, `<#C1|general>`, `<https://x|x>`, escaped entities) becomes plain text.

/// Markdown as Slack shows it: bold, italics, strikethrough, links and headings rewritten,
/// code spans and blocks kept (their text only escaped).
pub fn to_mrkdwn(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut in_block = false;
    for (i, line) in markdown.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
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

/// One line outside code blocks: code spans kept, the rest rewritten.
fn inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (i, part) in line.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(&escape(part));
        } else {
            out.push_str(&emphasis(&links(&escape(part))));
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

/// `[label](url)` -> `<url|label>` (text already escaped; only http(s) targets).
fn links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let link = after.find("](").and_then(|close| {
            let target = &after[close + 2..];
            let end = target.find(')')?;
            let url = &target[..end];
            (url.starts_with("http://") || url.starts_with("https://"))
                .then(|| (close, url, close + 2 + end + 1))
        });
        match link {
            Some((close, url, consumed)) => {
                out.push_str(&rest[..open]);
                out.push_str(&format!("<{url}|{}>", &after[..close]));
                rest = &after[consumed..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
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

/// What a person wrote, as plain text: `<@U1>` -> `@name` (the bot's own mention removed),
/// `<#C1|general>` -> `#general`, `<https://x|label>` -> `label (https://x)`, `<https://x>` ->
/// `https://x`, entities unescaped.
pub fn to_plain(text: &str, bot_user: &str, name_of: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let (target, label) = inner.split_once('|').unwrap_or((inner, ""));
        if let Some(user) = target.strip_prefix('@') {
            if user != bot_user {
                let name = if label.is_empty() {
                    name_of(user).unwrap_or_else(|| user.to_string())
                } else {
                    label.to_string()
                };
                out.push('@');
                out.push_str(&name);
            }
        } else if let Some(channel) = target.strip_prefix('#') {
            out.push('#');
            out.push_str(if label.is_empty() { channel } else { label });
        } else if let Some(special) = target.strip_prefix('!') {
            out.push('@');
            out.push_str(special.split('^').next().unwrap_or(special));
        } else if label.is_empty() || label == target {
            out.push_str(target);
        } else {
            out.push_str(&format!("{label} ({target})"));
        }
    }
    out.push_str(rest);
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    out.trim().to_string()
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
    fn what_people_write_becomes_plain_text() {
        let names = |id: &str| (id == "U2").then(|| "bob".to_string());
        assert_eq!(
            to_plain(
                "<@UBOT> ask <@U2> in <#C1|general> about <https://x.y|this> &amp; <https://z>",
                "UBOT",
                names
            ),
            "ask @bob in #general about this (https://x.y) & https://z"
        );
        assert_eq!(to_plain("<@U9> hi <!here>", "UBOT", names), "@U9 hi @here");
        assert_eq!(to_plain("a < b", "UBOT", names), "a < b");
    }
}
