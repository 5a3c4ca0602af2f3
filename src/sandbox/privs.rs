//! Giving up privileges before a sandboxed program starts: `no_new_privs` (no setuid bit or
//! file capability grants anything from here on) and no capabilities at all: the bounding set
//! emptied (when this process may), then the ambient, inheritable, permitted and effective
//! sets. With the bounding and inheritable sets empty, even a program run as root starts with
//! none (execve gives root `permitted = inheritable | bounding`).

use rustix::io::Errno;
use rustix::thread::{
    CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
    clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
    set_no_new_privs,
};

/// Why privileges could not be given up (the program must not run then).
#[derive(Debug, thiserror::Error)]
pub enum PrivsError {
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(std::io::Error),
    /// Reading or dropping from the capability bounding set failed.
    #[error("cannot drop capability {0} from the bounding set: {1}")]
    Bounding(u32, std::io::Error),
    /// `prctl(PR_CAP_AMBIENT_CLEAR_ALL)` failed.
    #[error("cannot clear the ambient capabilities: {0}")]
    Ambient(std::io::Error),
    /// `capget` or `capset` failed.
    #[error("cannot clear the capabilities: {0}")]
    Sets(std::io::Error),
}

/// Sets `no_new_privs` and drops every capability of this thread (call it while the process
/// has one thread, just before `exec`).
pub fn drop_all() -> Result<(), PrivsError> {
    set_no_new_privs(true).map_err(|e| PrivsError::NoNewPrivs(e.into()))?;
    let current = capabilities(None).map_err(|e| PrivsError::Sets(e.into()))?;
    // Without CAP_SETPCAP the bounding set cannot shrink; no_new_privs and an empty
    // inheritable set already keep execve from granting anything then.
    if current.effective.contains(CapabilitySet::SETPCAP) {
        empty_bounding_set()?;
    }
    match clear_ambient_capability_set() {
        // Kernels before 4.3 have no ambient set: nothing to clear.
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(PrivsError::Ambient(e.into())),
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(|e| PrivsError::Sets(e.into()))
}

/// Drops every capability the kernel knows from the bounding set.
fn empty_bounding_set() -> Result<(), PrivsError> {
    for bit in 0..u64::BITS {
        let capability = CapabilitySet::from_bits_retain(1 << bit);
        match capability_is_in_bounding_set(capability) {
            // Past the kernel's last capability.
            Err(Errno::INVAL) => return Ok(()),
            Err(e) => return Err(PrivsError::Bounding(bit, e.into())),
            Ok(false) => {}
            Ok(true) => remove_capability_from_bounding_set(capability)
                .map_err(|e| PrivsError::Bounding(bit, e.into()))?,
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The lines of this thread's status whose names are in `names`.
    fn status(names: &[&str]) -> Vec<String> {
        let text = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        text.lines()
            .filter(|l| names.iter().any(|n| l.starts_with(&format!("{n}:"))))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    #[test]
    fn a_thread_that_drops_everything_holds_no_capability() {
        // Capabilities and no_new_privs belong to a thread: the test's own one pays.
        let (lines, root) = std::thread::spawn(|| {
            let root = capabilities(None)
                .unwrap()
                .effective
                .contains(CapabilitySet::SETPCAP);
            drop_all().unwrap();
            let names = [
                "CapInh",
                "CapPrm",
                "CapEff",
                "CapBnd",
                "CapAmb",
                "NoNewPrivs",
            ];
            (status(&names), root)
        })
        .join()
        .unwrap();
        let zero = "0000000000000000";
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            assert!(lines.contains(&format!("{set}: {zero}")), "{lines:?}");
        }
        if root {
            assert!(lines.contains(&format!("CapBnd: {zero}")), "{lines:?}");
        }
        assert!(lines.contains(&"NoNewPrivs: 1".to_owned()), "{lines:?}");
    }
}
