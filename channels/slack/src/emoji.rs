//! Reactions by name: Slack's `reactions.add` takes an emoji's name (`thumbsup`), not the
//! character; the agent may give either a name (`:tada:` or `tada`) or one of the common
//! emoji below.

/// Common emoji and their Slack names.
const NAMES: [(&str, &str); 24] = [
    ("👍", "+1"),
    ("👎", "-1"),
    ("❤️", "heart"),
    ("❤", "heart"),
    ("😂", "joy"),
    ("🎉", "tada"),
    ("✅", "white_check_mark"),
    ("👀", "eyes"),
    ("🔥", "fire"),
    ("🙏", "pray"),
    ("😄", "smile"),
    ("😢", "cry"),
    ("🚀", "rocket"),
    ("👋", "wave"),
    ("❌", "x"),
    ("⚠️", "warning"),
    ("🤔", "thinking_face"),
    ("💯", "100"),
    ("👏", "clap"),
    ("😮", "open_mouth"),
    ("✨", "sparkles"),
    ("🙂", "slightly_smiling_face"),
    ("😊", "blush"),
    ("👌", "ok_hand"),
];

/// The Slack name of `emoji`, or why there is none.
pub fn name(emoji: &str) -> Result<String, String> {
    let trimmed = emoji.trim();
    if let Some((_, name)) = NAMES.iter().find(|(e, _)| *e == trimmed) {
        return Ok((*name).to_string());
    }
    let bare = trimmed.trim_matches(':');
    let valid = !bare.is_empty()
        && bare.len() <= 100
        && bare
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-+'".contains(&b));
    if valid {
        Ok(bare.to_string())
    } else {
        Err(format!(
            "Slack reacts with an emoji's name: give one like \"thumbsup\" or \":tada:\" instead of {trimmed:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emoji_become_slack_names() {
        assert_eq!(name("👍").unwrap(), "+1");
        assert_eq!(name(":tada:").unwrap(), "tada");
        assert_eq!(name("white_check_mark").unwrap(), "white_check_mark");
        assert!(name("🦀").unwrap_err().contains("thumbsup"));
        assert!(name("Bad Name").is_err());
        assert!(name("").is_err());
    }
}
