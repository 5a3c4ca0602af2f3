//! `send-keys`: named keys and literal text turned into what to send a process.

use crate::agent::tools::args::ArgError;

/// One step of a `send-keys` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyAction {
    /// Bytes for the process's input.
    Bytes(Vec<u8>),
    /// SIGINT to the group (C-c on pipes, where no terminal turns the byte into a signal).
    Interrupt,
    /// Close the piped input (C-d on pipes: end-of-file).
    CloseInput,
}

/// The key names `send-keys` knows, for messages and the tool description.
pub(crate) const KEY_NAMES: &str =
    "Enter, Tab, Escape, Backspace, Space, Up, Down, Left, Right, Home, End, Delete, C-a .. C-z";

/// Translates `keys` for a process on a PTY (`pty`) or on pipes. A name from [`KEY_NAMES`]
/// (case-insensitive; `Ctrl-c` and `^C` also work) is that key; anything else is typed as is.
pub(crate) fn translate(keys: &[String], pty: bool) -> Result<Vec<KeyAction>, ArgError> {
    if keys.is_empty() {
        return Err(ArgError::invalid(
            "argument `keys` must list at least one key or text",
        ));
    }
    let mut actions: Vec<KeyAction> = Vec::new();
    for key in keys {
        let action = match named(key) {
            Some(Key::Bytes(bytes)) => KeyAction::Bytes(bytes.to_vec()),
            Some(Key::Enter) => KeyAction::Bytes(if pty { b"\r" } else { b"\n" }.to_vec()),
            Some(Key::Ctrl(letter)) => ctrl(letter, pty)?,
            None => KeyAction::Bytes(key.as_bytes().to_vec()),
        };
        // Consecutive bytes go out in one write.
        match (actions.last_mut(), action) {
            (Some(KeyAction::Bytes(prev)), KeyAction::Bytes(next)) => prev.extend(next),
            (_, action) => actions.push(action),
        }
    }
    Ok(actions)
}

enum Key {
    Bytes(&'static [u8]),
    Enter,
    Ctrl(u8),
}

fn named(key: &str) -> Option<Key> {
    let lower = key.to_ascii_lowercase();
    let bytes: &'static [u8] = match lower.as_str() {
        "enter" | "return" => return Some(Key::Enter),
        "tab" => b"\t",
        "escape" | "esc" => b"\x1b",
        "backspace" | "bspace" => b"\x7f",
        "space" => b" ",
        "up" => b"\x1b[A",
        "down" => b"\x1b[B",
        "right" => b"\x1b[C",
        "left" => b"\x1b[D",
        "home" => b"\x1b[H",
        "end" => b"\x1b[F",
        "delete" | "del" => b"\x1b[3~",
        _ => {
            let letter = lower
                .strip_prefix("c-")
                .or_else(|| lower.strip_prefix("ctrl-"))
                .or_else(|| lower.strip_prefix("ctrl+"))
                .or_else(|| lower.strip_prefix('^'))?;
            return match letter.as_bytes() {
                [l @ b'a'..=b'z'] => Some(Key::Ctrl(*l)),
                _ => None,
            };
        }
    };
    Some(Key::Bytes(bytes))
}

fn ctrl(letter: u8, pty: bool) -> Result<KeyAction, ArgError> {
    Ok(match (letter, pty) {
        (b'c', false) => KeyAction::Interrupt,
        (b'd', false) => KeyAction::CloseInput,
        (b'z', false) => {
            return Err(ArgError::invalid(
                "C-z (suspend) works only on a PTY; start the command with pty: true",
            ));
        }
        _ => KeyAction::Bytes(vec![letter - b'a' + 1]),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_and_text_become_bytes_on_a_pty() {
        let out = translate(
            &keys(&["1+1", "Enter", "Up", "tab", "C-c", "^D", "Ctrl-z"]),
            true,
        );
        assert_eq!(
            out.unwrap(),
            [KeyAction::Bytes(b"1+1\r\x1b[A\t\x03\x04\x1a".to_vec())]
        );
        let out = translate(
            &keys(&["Escape", "Backspace", "Left", "Right", "Down"]),
            true,
        );
        assert_eq!(
            out.unwrap(),
            [KeyAction::Bytes(b"\x1b\x7f\x1b[D\x1b[C\x1b[B".to_vec())]
        );
    }

    #[test]
    fn on_pipes_enter_is_newline_and_c_c_c_d_act() {
        let out = translate(&keys(&["hi", "Enter", "C-c", "C-d"]), false).unwrap();
        assert_eq!(
            out,
            [
                KeyAction::Bytes(b"hi\n".to_vec()),
                KeyAction::Interrupt,
                KeyAction::CloseInput
            ]
        );
        let err = translate(&keys(&["C-z"]), false).unwrap_err().to_string();
        assert!(err.contains("pty: true"), "{err}");
    }

    #[test]
    fn unknown_names_are_literal_and_an_empty_list_is_refused() {
        let out = translate(&keys(&["C-1", "Enterprise"]), true).unwrap();
        assert_eq!(out, [KeyAction::Bytes(b"C-1Enterprise".to_vec())]);
        assert!(translate(&[], true).is_err());
    }
}
