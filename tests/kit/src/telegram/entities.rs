//! Entity detection for simulated user messages, as a real client would attach them.

use serde_json::{Value, json};

/// Entities a real client would attach to a user's `text`: `bot_command` for a leading
/// `/command` (with an optional `@bot` suffix) and `mention` for every `@username` (5-32 word
/// characters). Offsets in UTF-16 code units.
pub(crate) fn detect_entities(text: &str) -> Vec<Value> {
    let mut entities = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let utf16_at = |i: usize| chars[..i].iter().map(|c| c.len_utf16()).sum::<usize>();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if chars.first() == Some(&'/') {
        let mut end = 1 + chars[1..].iter().take_while(|&&c| word(c)).count();
        if end > 1 && chars.get(end) == Some(&'@') {
            let bot = chars[end + 1..].iter().take_while(|&&c| word(c)).count();
            if bot > 0 {
                end += 1 + bot;
            }
        }
        if end > 1 {
            entities.push(json!({ "type": "bot_command", "offset": 0, "length": utf16_at(end) }));
        }
    }
    let mut i = 0;
    while i < chars.len() {
        let preceded_ok = i == 0 || !(word(chars[i - 1]) || chars[i - 1] == '/');
        if chars[i] == '@' && preceded_ok {
            let len = chars[i + 1..].iter().take_while(|&&c| word(c)).count();
            if (5..=32).contains(&len) {
                let offset = utf16_at(i);
                entities.push(json!({ "type": "mention", "offset": offset, "length": utf16_at(i + 1 + len) - offset }));
                i += 1 + len;
                continue;
            }
        }
        i += 1;
    }
    entities
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn detects_commands_and_mentions() {
        let e = detect_entities("/start@chela_test_bot hi @chela_test_bot");
        assert_eq!(
            e[0],
            json!({ "type": "bot_command", "offset": 0, "length": 21 })
        );
        assert_eq!(
            e[1],
            json!({ "type": "mention", "offset": 25, "length": 15 })
        );
        let e = detect_entities("😀 @chela_test_bot");
        assert_eq!(
            e,
            vec![json!({ "type": "mention", "offset": 3, "length": 15 })]
        );
        assert!(detect_entities("mail a@b.c /notcmd").is_empty());
    }
}
