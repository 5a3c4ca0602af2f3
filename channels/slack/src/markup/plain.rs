//! What people write, as plain text: Slack's `<…>` references and entities read as a person
//! sees them.

/// What a person wrote, as plain text: `<@U1>` -> `@name` (the bot's own mention removed),
/// `<#C1|general>` -> `#general`, `<https://x|label>` -> `label (https://x)`, `<https://x>` ->
/// `https://x`, `<!here>` -> `@here`, `<!subteam^S1|@team>` and `<!date^…|fallback>` -> their
/// label, entities unescaped.
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
            // `<!subteam^S1|@team>`, `<!date^1700000000^{date}|Nov 14>`: the label is what
            // Slack shows; `<!here>` and the like have none.
            if label.is_empty() {
                out.push('@');
                out.push_str(special.split('^').next().unwrap_or(special));
            } else {
                out.push_str(label);
            }
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
    fn user_groups_and_dates_read_as_their_label() {
        let names = |_: &str| None;
        assert_eq!(
            to_plain(
                "<!subteam^S1|@team> meet <!date^1700000000^{date_short}|Nov 14, 2023>",
                "UBOT",
                names
            ),
            "@team meet Nov 14, 2023"
        );
        assert_eq!(
            to_plain("<!here|@here> <!channel>", "UBOT", names),
            "@here @channel"
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
