//! The names the model sees: `SERVER__tool`, within what model APIs take as a tool name
//! (`[A-Za-z0-9_-]`, at most 64 characters).

/// The longest tool name the model APIs take.
const MAX_NAME: usize = 64;

/// The name tool `tool` of server `server` is offered as: `server__tool` with every other
/// character made `_`; a name past 64 characters is cut and ends with a short hash of the
/// whole, so two long names stay apart.
pub fn exposed(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    let name = format!("{server}__{clean}");
    if name.len() <= MAX_NAME && clean == tool {
        return name;
    }
    let hash = format!("{:08x}", fnv1a(tool.as_bytes()) as u32);
    let keep = MAX_NAME.saturating_sub(hash.len() + 1).min(name.len());
    format!("{}_{hash}", &name[..keep])
}

/// The server an exposed name belongs to (the part before the first `__`).
pub fn server_of(exposed: &str) -> Option<&str> {
    exposed.split_once("__").map(|(server, _)| server)
}

/// FNV-1a: a small stable hash (names only; nothing secret).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_joined_and_others_cleaned_and_kept_apart() {
        assert_eq!(exposed("files", "read_text_file"), "files__read_text_file");
        assert_eq!(server_of("files__read_text_file"), Some("files"));
        let dotted = exposed("files", "read.file");
        assert!(dotted.starts_with("files__read_file_"), "{dotted}");
        assert_ne!(dotted, exposed("files", "read:file"));
        let long = "x".repeat(80);
        let a = exposed("files", &long);
        assert_eq!(a.len(), 64);
        assert_ne!(a, exposed("files", &format!("{long}y")));
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }
}
