//! Interrupts for what chela starts, even when chela itself was started with them ignored.
//!
//! A shell script's `chela gateway &` (and some supervisors) start chela with SIGINT and
//! SIGQUIT ignored. An ignored signal stays ignored across `exec`, so every command the agent
//! ran would ignore the `C-c` the process tool sends, and a shell may not even trap it. A
//! signal with a handler, by contrast, is reset to its default by `exec`. So when either
//! signal is ignored here, [`let_children_take_interrupts`] installs a handler that does
//! nothing: that handler by itself leaves chela ignoring the signal (though `chela gateway`
//! and `chat` have their own SIGINT handler and stop on it), and its children start with the
//! default.
//! (`sigaction` itself is `unsafe`, which the crate forbids; signal-hook's flag handler is a
//! safe way to install one, and `/proc/self/status` a safe way to read what is ignored.)

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::AtomicBool;

/// The signals a person sends from a terminal to stop a command.
const INTERRUPTS: [i32; 2] = [signal_hook::consts::SIGINT, signal_hook::consts::SIGQUIT];

/// Makes sure children start with SIGINT and SIGQUIT at their default, once per process.
pub fn let_children_take_interrupts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(ignored) = ignored_signals() else {
            tracing::debug!("cannot read /proc/self/status; ignored signals stay ignored");
            return;
        };
        for signal in INTERRUPTS {
            if ignored & (1 << (signal - 1)) == 0 {
                continue;
            }
            // The flag is never read: the handler only exists so that `exec` resets the signal.
            if let Err(e) = signal_hook::flag::register(signal, Arc::new(AtomicBool::new(false))) {
                tracing::warn!(signal, error = %e, "cannot pass an ignored signal's default to commands");
            }
        }
    });
}

/// The mask of signals this process ignores (`SigIgn` of `/proc/self/status`; bit n-1 for
/// signal n), `None` where that cannot be read.
fn ignored_signals() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_sig_ign(&status)
}

/// The `SigIgn:` mask in the text of a `/proc/<pid>/status` file.
fn parse_sig_ign(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The variable that makes [`probe_child`] do its work (only when this test binary is
    /// started again by [`commands_of_a_process_started_with_interrupts_ignored_take_them`]).
    const PROBE: &str = "CHELA_SIGNAL_PROBE";

    #[test]
    fn the_ignored_mask_is_read_from_proc_status() {
        let status = "Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000006\n";
        assert_eq!(parse_sig_ign(status), Some(6));
        assert_eq!(parse_sig_ign("Name:\tx\n"), None);
        assert!(ignored_signals().is_some());
    }

    /// Started with SIGINT and SIGQUIT ignored, this test binary runs [`probe_child`], which
    /// prints the ignored mask of a command it starts: neither signal may be in it.
    #[test]
    fn commands_of_a_process_started_with_interrupts_ignored_take_them() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", "trap '' INT QUIT; exec \"$@\"", "sh"])
            .arg(exe)
            .args([
                "--exact",
                "sandbox::signals::tests::probe_child",
                "--nocapture",
            ])
            .env(PROBE, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().find_map(|l| l.strip_prefix("probe: "));
        let (parent, child) = line.and_then(|l| l.split_once(' ')).expect(&stdout);
        let (parent, child): (u64, u64) = (parent.parse().unwrap(), child.parse().unwrap());
        assert_eq!(
            parent & 0b110,
            0b110,
            "the probe did not start with them ignored"
        );
        assert_eq!(
            child & 0b110,
            0,
            "a command inherited ignored interrupts: {child:#x}"
        );
    }

    /// Does nothing unless [`PROBE`] is set; see the test above.
    #[test]
    fn probe_child() {
        if std::env::var_os(PROBE).is_none() {
            return;
        }
        let parent = ignored_signals().unwrap();
        let_children_take_interrupts();
        let out = std::process::Command::new("cat")
            .arg("/proc/self/status")
            .output()
            .unwrap();
        let child = parse_sig_ign(&String::from_utf8_lossy(&out.stdout)).unwrap();
        println!("probe: {parent} {child}");
    }
}
