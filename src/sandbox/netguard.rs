//! The part of the network policy Landlock cannot say. Landlock's TCP rules check `bind` and
//! `connect`, but `listen` on a socket that was never bound binds it to a free port itself,
//! unchecked: a confined process could still serve on `127.0.0.1:<that port>` and receive what
//! a browser sends there (the panel's session cookie, which is not scoped by port). So when
//! TCP is confined, a seccomp filter also refuses `listen` and `io_uring_setup` (io_uring can
//! listen without the system call; programs fall back to plain calls), both with EPERM.
//! The filter accepts only this machine's native system calls (a 32-bit call ends the
//! process), and refuses the x32 spellings of both calls too, so neither can slip past it.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule, TargetArch};

/// The bit that marks an x32 system call on x86_64 (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// Why the filter could not be built or applied.
#[derive(Debug, thiserror::Error)]
pub enum NetguardError {
    /// seccomp is not known for this CPU architecture.
    #[error("no seccomp filter for this architecture: {0}")]
    Arch(String),
    /// Building or applying the filter failed.
    #[error("cannot apply the seccomp filter that refuses listening: {0}")]
    Seccomp(#[from] seccompiler::Error),
    /// Compiling the filter failed.
    #[error("cannot build the seccomp filter that refuses listening: {0}")]
    Backend(#[from] seccompiler::BackendError),
}

/// Refuses `listen` and io_uring to this thread and what it executes, for good (needs
/// `no_new_privs`, see [`super::privs`]).
pub fn forbid_listening() -> Result<(), NetguardError> {
    let program = filter()?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}

/// The compiled filter for this machine.
fn filter() -> Result<BpfProgram, NetguardError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| NetguardError::Arch(std::env::consts::ARCH.to_owned()))?;
    // An empty rule list matches the call whatever its arguments.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for number in [libc::SYS_listen, libc::SYS_io_uring_setup] {
        rules.insert(number, Vec::new());
        // x32 calls pass the x86_64 architecture check under numbers of their own.
        if cfg!(target_arch = "x86_64") {
            rules.insert(number | X32_SYSCALL_BIT, Vec::new());
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// What `tcp` (see [`super::landlock::Rules::tcp`]) lets processes do, for logs and
/// `chela doctor`; `false` when this kernel cannot confine TCP as asked.
pub fn describe(tcp: Option<&[u16]>) -> (bool, String) {
    let Some(ports) = tcp else {
        return (true, "network not confined (network = \"all\")".to_owned());
    };
    let connect = if ports.is_empty() {
        "no TCP connections".to_owned()
    } else {
        let names: Vec<String> = ports.iter().map(u16::to_string).collect();
        format!("TCP connections to ports {} only", names.join(", "))
    };
    match super::landlock::probe_network() {
        Ok(()) => (true, format!("{connect}, no listening")),
        Err(_) => (
            false,
            "this kernel lacks Landlock's TCP rules (Linux 6.7 and later have them): \
             connections to any port stay possible; listening is still refused"
                .to_owned(),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_filtered_thread_cannot_listen_but_still_connects() {
        let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = outside.local_addr().unwrap();
        // The filter belongs to the thread that applies it: the test's own one.
        let (listen, connect) = std::thread::spawn(move || {
            rustix::thread::set_no_new_privs(true).unwrap();
            forbid_listening().unwrap();
            let listen = std::net::TcpListener::bind("127.0.0.1:0").map(drop);
            let connect = std::net::TcpStream::connect(addr).map(drop);
            (listen, connect)
        })
        .join()
        .unwrap();
        let refused = listen.unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
        connect.unwrap();
    }

    #[test]
    fn the_policy_reads_as_its_ports() {
        assert!(describe(None).1.contains("network = \"all\""));
        let (ok, text) = describe(Some(&[80, 443]));
        if ok {
            assert_eq!(text, "TCP connections to ports 80, 443 only, no listening");
        }
        let (ok, text) = describe(Some(&[]));
        if ok {
            assert_eq!(text, "no TCP connections, no listening");
        }
    }
}
