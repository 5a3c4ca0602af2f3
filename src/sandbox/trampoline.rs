//! `chela sandbox-exec [--ro DIR]... [--rw DIR]... [--dev DIR]... [--hide PATH]... [--tcp
//! [--connect PORT]...] -- PROGRAM ARGS...`: a hidden subcommand that gives up every
//! capability and sets `no_new_privs` ([`super::privs`]), applies the Landlock ruleset to
//! itself (with `--tcp`: TCP connect only to the `--connect` ports, no bind, and no listen,
//! [`super::netguard`], unless `--listen`) and then becomes PROGRAM (`exec`, same pid, so the caller's process
//! group and signals still apply). `chela sandbox-exec --privileges-only -- PROGRAM ARGS...`
//! only gives up the privileges: what every process chela starts goes through when the
//! sandbox is off or the kernel has no Landlock. It exists because `pre_exec` needs
//! `unsafe`, which the crate forbids.

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
    /// An option without its folder (or port).
    #[error("{0} needs a value")]
    MissingValue(String),
    /// Something that is no option before `--`.
    #[error(
        "unexpected argument {0:?}; expected --ro, --rw, --dev, --hide, --tcp, --connect, --listen or --"
    )]
    Unexpected(String),
    /// A `--connect` value that is no TCP port.
    #[error("{0:?} is no TCP port")]
    BadPort(String),
    /// No program after `--`.
    #[error("no program after --")]
    NoProgram,
}

/// The flag that makes the trampoline give up privileges only, with no Landlock ruleset.
const PRIVILEGES_ONLY: &str = "--privileges-only";

/// The parsed arguments: the rules (`None` with `--privileges-only`) and the program with
/// its arguments.
pub fn parse(args: &[OsString]) -> Result<(Option<Rules>, Vec<OsString>), UsageError> {
    if let Some((first, rest)) = args.split_first()
        && first == PRIVILEGES_ONLY
    {
        return match rest.split_first() {
            Some((dashes, program)) if dashes == "--" && !program.is_empty() => {
                Ok((None, program.to_vec()))
            }
            Some((dashes, _)) if dashes == "--" => Err(UsageError::NoProgram),
            Some((other, _)) => Err(UsageError::Unexpected(other.to_string_lossy().into_owned())),
            None => Err(UsageError::NoProgram),
        };
    }
    let mut rules = Rules::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let flag = arg.to_str().unwrap_or_default();
        match flag {
            "--" => {
                let program: Vec<OsString> = rest.cloned().collect();
                if program.is_empty() {
                    return Err(UsageError::NoProgram);
                }
                return Ok((Some(rules), program));
            }
            "--tcp" => {
                rules.tcp.get_or_insert_with(Vec::new);
                continue;
            }
            "--listen" => {
                rules.listen = true;
                continue;
            }
            "--ro" | "--rw" | "--dev" | "--hide" | "--connect" => {}
            _ => return Err(UsageError::Unexpected(arg.to_string_lossy().into_owned())),
        }
        let value = rest
            .next()
            .ok_or_else(|| UsageError::MissingValue(flag.to_owned()))?;
        let list = match flag {
            "--ro" => &mut rules.read,
            "--rw" => &mut rules.write,
            "--dev" => &mut rules.devices,
            "--hide" => &mut rules.hide,
            _ => {
                let text = value.to_string_lossy();
                let port = text
                    .parse::<u16>()
                    .map_err(|_| UsageError::BadPort(text.into_owned()))?;
                rules.tcp.get_or_insert_with(Vec::new).push(port);
                continue;
            }
        };
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
    if rules.listen {
        args.push("--listen".into());
    }
    if let Some(ports) = &rules.tcp {
        args.push("--tcp".into());
        for port in ports {
            args.push("--connect".into());
            args.push(port.to_string().into());
        }
    }
    args.push("--".into());
    args.extend(program.iter().cloned());
    args
}

/// The arguments that make `chela sandbox-exec` run `program` with no capabilities and
/// `no_new_privs` only (no Landlock ruleset).
pub fn args_privileges_only(program: &[OsString]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![SUBCOMMAND.into(), PRIVILEGES_ONLY.into(), "--".into()];
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
    if let Err(e) = confine(rules.as_ref()) {
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

/// Why the sandbox could not be applied.
#[derive(Debug, thiserror::Error)]
enum ConfineError {
    #[error(transparent)]
    Privileges(#[from] super::privs::PrivsError),
    #[error(transparent)]
    Landlock(#[from] landlock::LandlockError),
    #[error(transparent)]
    Listen(#[from] super::netguard::NetguardError),
}

/// Everything the program must start under, in order: no privileges (and `no_new_privs`,
/// which Landlock and seccomp need), then with `rules` the Landlock ruleset, and no
/// listening when TCP is confined.
fn confine(rules: Option<&Rules>) -> Result<(), ConfineError> {
    super::privs::drop_all()?;
    let Some(rules) = rules else {
        return Ok(());
    };
    landlock::restrict_self(rules)?;
    if rules.tcp.is_some() && !rules.listen {
        super::netguard::forbid_listening()?;
    }
    Ok(())
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
            tcp: Some(vec![80, 443]),
            listen: false,
        };
        let program: Vec<OsString> = vec!["sh".into(), "-c".into(), "echo --ro".into()];
        let args = args_for(&rules, &program);
        assert_eq!(args[0], SUBCOMMAND);
        assert_eq!(
            parse(&args[1..]).unwrap(),
            (Some(rules.clone()), program.clone())
        );
        let listening = Rules {
            listen: true,
            ..rules
        };
        let args = args_for(&listening, &program);
        assert!(args.iter().any(|a| a == "--listen"));
        assert_eq!(parse(&args[1..]).unwrap(), (Some(listening), program));
        let bad: Vec<OsString> = vec!["--rw".into()];
        assert_eq!(parse(&bad), Err(UsageError::MissingValue("--rw".into())));
        let none: Vec<OsString> = vec!["--ro".into(), "/".into(), "--".into()];
        assert_eq!(parse(&none), Err(UsageError::NoProgram));
    }

    #[test]
    fn privileges_only_round_trips_and_takes_no_rule() {
        let program: Vec<OsString> = vec!["sh".into(), "-c".into(), "--ro".into()];
        let args = args_privileges_only(&program);
        assert_eq!(args[..3], ["sandbox-exec", "--privileges-only", "--"]);
        assert_eq!(parse(&args[1..]).unwrap(), (None, program));
        let os = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            parse(&os(&["--privileges-only", "--"])),
            Err(UsageError::NoProgram)
        );
        assert_eq!(
            parse(&os(&["--privileges-only", "--ro", "/", "--", "true"])),
            Err(UsageError::Unexpected("--ro".into()))
        );
    }

    #[test]
    fn tcp_rules_round_trip_closed_open_and_bad() {
        let program: Vec<OsString> = vec!["true".into()];
        // No network rule at all ("all"): no flag.
        let open = Rules::default();
        let args = args_for(&open, &program);
        assert!(!args.iter().any(|a| a == "--tcp"), "{args:?}");
        assert_eq!(parse(&args[1..]).unwrap(), (Some(open), program.clone()));
        // TCP confined with no port ("none"): the flag alone.
        let closed = Rules {
            tcp: Some(Vec::new()),
            ..Rules::default()
        };
        let args = args_for(&closed, &program);
        assert_eq!(args, ["sandbox-exec", "--tcp", "--", "true"]);
        assert_eq!(parse(&args[1..]).unwrap(), (Some(closed), program));
        let os = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            parse(&os(&["--connect", "http", "--", "true"])),
            Err(UsageError::BadPort("http".into()))
        );
        assert_eq!(
            parse(&os(&["--connect", "70000", "--", "true"])),
            Err(UsageError::BadPort("70000".into()))
        );
        assert_eq!(
            parse(&os(&["--connect"])),
            Err(UsageError::MissingValue("--connect".into()))
        );
    }
}
