//! Plain text out of a terminal's byte stream: escape sequences, carriage returns and other
//! control characters removed, so PTY output reads like a log for the model.

/// Where the filter is inside an escape sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Text,
    /// After ESC.
    Escape,
    /// After ESC and intermediate bytes (`ESC ( B`).
    Intermediate,
    /// Inside a control sequence (`ESC [ ... final`).
    Csi,
    /// Inside a string (`ESC ] ...`, `ESC P ...`) ended by BEL or `ESC \`.
    Str,
    /// After ESC inside a string.
    StrEscape,
}

/// Removes terminal control sequences from a stream fed in arbitrary chunks; a sequence split
/// across chunks is still removed whole. Newlines and tabs stay; UTF-8 passes through.
#[derive(Debug, Default)]
pub(crate) struct AnsiFilter {
    state: State,
}

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

impl AnsiFilter {
    /// Appends the text of `chunk` to `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        for &b in chunk {
            self.state = match self.state {
                State::Text => match b {
                    ESC => State::Escape,
                    b'\n' | b'\t' => {
                        out.push(b);
                        State::Text
                    }
                    0x00..=0x1f | 0x7f => State::Text,
                    _ => {
                        out.push(b);
                        State::Text
                    }
                },
                State::Escape => match b {
                    b'[' => State::Csi,
                    b']' | b'P' | b'X' | b'^' | b'_' => State::Str,
                    0x20..=0x2f => State::Intermediate,
                    _ => State::Text,
                },
                State::Intermediate => match b {
                    0x20..=0x2f => State::Intermediate,
                    _ => State::Text,
                },
                State::Csi => match b {
                    0x40..=0x7e => State::Text,
                    _ => State::Csi,
                },
                State::Str => match b {
                    BEL => State::Text,
                    ESC => State::StrEscape,
                    _ => State::Str,
                },
                State::StrEscape => match b {
                    b'\\' => State::Text,
                    _ => State::Str,
                },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(chunks: &[&[u8]]) -> String {
        let mut f = AnsiFilter::default();
        let mut out = Vec::new();
        for chunk in chunks {
            f.feed(chunk, &mut out);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn colours_titles_and_carriage_returns_are_removed() {
        let raw: &[u8] = b"\x1b[1;31mred\x1b[0m\r\n\x1b]0;title\x07ok\t\xc3\xa9\x1b(B\x1b=\r\n";
        assert_eq!(filter(&[raw]), "red\nok\té\n");
    }

    #[test]
    fn sequences_split_across_chunks_are_removed_whole() {
        assert_eq!(
            filter(&[b"a\x1b", b"[3", b"2mb\x1b]2;x\x1b", b"\\c"]),
            "abc"
        );
    }

    #[test]
    fn other_control_characters_are_dropped() {
        assert_eq!(filter(&[b">>> \x08\x08x\x7f\x00y"]), ">>> xy");
    }
}
