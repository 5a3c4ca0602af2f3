//! The environment a child of chela starts from: an allowlist of harmless variables taken
//! from chela's own environment, plus what the config passes explicitly for that process. No
//! provider key, platform token or `CHELA_*` setting reaches a child unless configured.

use std::ffi::OsString;

/// Variables every child gets from chela's environment when they are set (and `LC_*`).
pub const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
];

/// Whether `name` is on the allowlist.
pub fn is_allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || name.starts_with("LC_")
}

/// The allowed variables of `source`, then those named in `pass` (configured explicitly).
pub fn scrubbed_from(
    source: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
) -> Vec<(OsString, OsString)> {
    source
        .into_iter()
        .filter(|(name, _)| {
            name.to_str()
                .is_some_and(|n| is_allowed(n) || pass.iter().any(|p| p == n))
        })
        .collect()
}

/// [`scrubbed_from`] this process's environment.
pub fn scrubbed(pass: &[String]) -> Vec<(OsString, OsString)> {
    scrubbed_from(std::env::vars_os(), pass)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn only_the_allowlist_and_passed_names_survive() {
        let source = vars(&[
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("CHELA_RPC_TOKEN", "t"),
            ("LC_ALL", "C"),
            ("GITHUB_TOKEN", "gh"),
            // web_search's key stays in the gateway: the web tools run there, not in a child.
            ("BRAVE_API_KEY", "BSA-x"),
        ]);
        let kept = scrubbed_from(source.clone(), &[]);
        assert_eq!(kept, vars(&[("PATH", "/bin"), ("LC_ALL", "C")]));
        let kept = scrubbed_from(source, &["GITHUB_TOKEN".to_owned()]);
        assert_eq!(
            kept,
            vars(&[("PATH", "/bin"), ("LC_ALL", "C"), ("GITHUB_TOKEN", "gh")])
        );
    }
}
