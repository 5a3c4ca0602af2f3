//! `chela sandbox-exec [--ro DIR]... [--rw DIR]... [--dev DIR]... [--hide PATH]... -- PROGRAM
//! ARGS...`: a
//! hidden subcommand that applies the Landlock ruleset to itself and then becomes PROGRAM
//! (`exec`, same pid, so the caller's process group and signals still apply). It exists
//! because `pre_exec` needs `unsafe`, which the crate forbids.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use super::landlock::{self, Rules};

/// The subcommand's name (the first argument).
pub const SUBCOMMAND: &str = "sandbox-exec";

/// Exit code when the sandbox could not be applied (nothing ran).
const SANDBOX_FAILED: u8 = 126;
/// Exit code when the program could not be started.
const NOT_STARTED: u8 = 127;

/// Why the arguments make no sense.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    /// An option without its folder.
    #[error("{0} needs a folder")]
    MissingValue(String),
    /// Something that is no option before `--`.
    #[error("unexpected argument {0:?}; expected --ro, --rw, --dev, --hide or --")]
    Unexpected(String),
    /// No program after `--`.
    #[error("no program after --")]
    NoProgram,
}

/// The parsed arguments: the rules and the program with its arguments.
pub fn parse(args: &[OsString]) -> Result<(Rules, Vec<OsString>), UsageError> {
    let mut rules = Rules::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let list = match arg.to_str() {
            Some("--") => {
                let program: Vec<OsString> = rest.cloned().collect();
                if program.is_empty() {
                    return Err(UsageError::NoProgram);
                }
                return Ok((rules, program));
            }
            Some("--ro") => &mut rules.read,
            Some("--rw") => &mut rules.write,
            Some("--dev") => &mut rules.devices,
            Some("--hide") => &mut rules.hide,
            _ => return Err(UsageError::Unexpected(arg.to_string_lossy().into_owned())),
        };
        let value = rest
            .next()
            .ok_or_else(|| UsageError::MissingValue(arg.to_string_lossy().into_owned()))?;
        list.push(PathBuf::from(value));
    }
    Err(UsageError::NoProgram)
}

/// The arguments that make `chela sandbox-exec` run `program` under `rules`.
pub fn args_for(rules: &Rules, program: &[OsString]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![SUBCOMMAND.into()];
    let lists = [
        ("--ro", &rules.read),
        ("--rw", &rules.write),
        ("--dev", &rules.devices),
        ("--hide", &rules.hide),
    ];
    for (flag, paths) in lists {
        for path in paths {
            args.push(flag.into());
            args.push(path.into());
        }
    }
    args.push("--".into());
    args.extend(program.iter().cloned());
    args
}

/// Runs the subcommand with `args` (those after its name). Returns only on failure.
pub fn main(args: &[OsString]) -> ExitCode {
    let (rules, program) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("chela {SUBCOMMAND}: {e}");
            return ExitCode::from(2);
        }
    };
    // Before the ruleset: it reads /proc/self/status.
    super::signals::let_children_take_interrupts();
    if let Err(e) = landlock::restrict_self(&rules) {
        eprintln!("chela {SUBCOMMAND}: {e}; the command was not run");
        return ExitCode::from(SANDBOX_FAILED);
    }
    let (name, rest) = match program.split_first() {
        Some(split) => split,
        None => return ExitCode::from(2),
    };
    let error = std::process::Command::new(name).args(rest).exec();
    eprintln!(
        "chela {SUBCOMMAND}: cannot run {}: {error}",
        name.to_string_lossy()
    );
    ExitCode::from(NOT_STARTED)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip() {
        let rules = Rules {
            read: vec!["/usr".into(), "/ws".into()],
            write: vec!["/ws".into()],
            devices: vec!["/dev".into()],
            hide: vec!["/home/u/.chela/data".into()],
        };
        let program: Vec<OsString> = vec!["sh".into(), "-c".into(), "echo --ro".into()];
        let args = args_for(&rules, &program);
        assert_eq!(args[0], SUBCOMMAND);
        assert_eq!(parse(&args[1..]).unwrap(), (rules, program));
        let bad: Vec<OsString> = vec!["--rw".into()];
        assert_eq!(parse(&bad), Err(UsageError::MissingValue("--rw".into())));
        let none: Vec<OsString> = vec!["--ro".into(), "/".into(), "--".into()];
        assert_eq!(parse(&none), Err(UsageError::NoProgram));
    }
}
