//! The command line of `fake-mcp-server`.

use std::path::PathBuf;

/// The usage line.
pub const USAGE: &str = "usage: fake-mcp-server [--log FILE] [--slow-start-ms N] \
                         [--crash-after N] [--fail-starts FILE]";

/// The flags, each taking a value.
const FLAGS: [&str; 4] = ["--log", "--slow-start-ms", "--crash-after", "--fail-starts"];

/// The parsed options of `fake-mcp-server`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerArgs {
    /// `--log FILE`: append one line per event.
    pub log: Option<PathBuf>,
    /// `--slow-start-ms N`: wait N ms before answering `initialize`.
    pub slow_start_ms: u64,
    /// `--crash-after N`: exit with status 3 after answering N `tools/call` requests.
    pub crash_after: Option<u64>,
    /// `--fail-starts FILE`: while FILE holds a number above 0, count it down and exit 1.
    pub fail_starts: Option<PathBuf>,
}

/// Parses the arguments after the program name (`--flag value` or `--flag=value`); the
/// error is the message to print, with [`USAGE`].
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<ServerArgs, String> {
    let mut parsed = ServerArgs::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Err(USAGE.to_owned());
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        if !FLAGS.contains(&flag.as_str()) {
            return Err(format!("unknown argument {flag:?}\n{USAGE}"));
        }
        let value = match inline.or_else(|| args.next()) {
            Some(value) => value,
            None => return Err(format!("{flag} needs a value\n{USAGE}")),
        };
        match flag.as_str() {
            "--log" => parsed.log = Some(value.into()),
            "--fail-starts" => parsed.fail_starts = Some(value.into()),
            "--slow-start-ms" => parsed.slow_start_ms = number(&flag, &value)?,
            _ => parsed.crash_after = Some(number(&flag, &value)?),
        }
    }
    Ok(parsed)
}

fn number(flag: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: bad number {value:?}\n{USAGE}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_every_flag_in_both_spellings() {
        assert_eq!(parse(args(&[])), Ok(ServerArgs::default()));
        let all = parse(args(&[
            "--log",
            "/tmp/l",
            "--slow-start-ms=250",
            "--crash-after",
            "2",
            "--fail-starts=/tmp/f",
        ]));
        let want = ServerArgs {
            log: Some("/tmp/l".into()),
            slow_start_ms: 250,
            crash_after: Some(2),
            fail_starts: Some("/tmp/f".into()),
        };
        assert_eq!(all, Ok(want));
        assert!(parse(args(&["--log"])).is_err());
        assert!(parse(args(&["--crash-after", "x"])).is_err());
        assert!(parse(args(&["--bogus", "1"])).is_err());
        assert!(parse(args(&["--help"])).is_err());
    }
}
