//! Landlock rulesets. A sandboxed `exec`: read (and execute) beneath the system folders and
//! the workspace, write beneath the workspace and a temp folder, devices, and nothing else.
//! Landlock is allow-list based, so chela's store, config, RPC token file and the rest of the
//! home folder are denied by not being listed. Hooks and coding agents: everything but
//! chela's own files ([`Rules::hide`], expanded by [`super::hide`]). Both: with [`Rules::tcp`],
//! TCP connect only to the listed ports and bind to none (Landlock ABI 4, Linux 6.7).

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The filesystem rights this crate version asks for (best effort on older kernels).
const ABI_USED: ABI = ABI::V6;

/// System folders a sandboxed command may read and execute from (those that exist).
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys",
];

/// Device folders: read and write of existing files (`/dev/null`, terminals), no creation.
pub const DEVICES: &[&str] = &["/dev"];

/// Why the sandbox could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// The kernel has no (enabled) Landlock.
    #[error("Landlock is not available on this kernel: {0}")]
    Unavailable(String),
    /// Building or applying the ruleset failed.
    #[error("cannot apply the Landlock ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// The kernel accepted the ruleset but enforces none of it.
    #[error("the kernel does not enforce the Landlock ruleset")]
    NotEnforced,
}

/// What a sandboxed command may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Read and execute beneath these.
    pub read: Vec<PathBuf>,
    /// Everything (create, write, remove...) beneath these.
    pub write: Vec<PathBuf>,
    /// Read and write of existing files beneath these (device nodes).
    pub devices: Vec<PathBuf>,
    /// Everything this user can reach except these (see [`super::hide`]): expanded into
    /// grants when the sandbox is applied.
    pub hide: Vec<PathBuf>,
    /// The TCP ports the process may connect to; it may bind none (the trampoline also
    /// refuses listening, unless `listen`). `None`: TCP is not confined.
    pub tcp: Option<Vec<u16>>,
    /// With `tcp`, whether the process may still listen on sockets it made (Chromium's own
    /// Unix sockets); binding a TCP port stays refused.
    pub listen: bool,
}

impl Rules {
    /// Every folder the rules open, for any access.
    pub fn roots(&self) -> impl Iterator<Item = &PathBuf> {
        self.read
            .iter()
            .chain(self.write.iter())
            .chain(self.devices.iter())
    }
}

/// Whether the kernel has Landlock: creates (and drops) an empty ruleset, restricting nothing.
pub fn probe() -> Result<(), LandlockError> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create())
        .map(drop)
        .map_err(|e| LandlockError::Unavailable(e.to_string()))
}

/// Whether the kernel has Landlock's TCP rules (ABI 4, Linux 6.7): creates (and drops) a
/// ruleset handling them, restricting nothing.
pub fn probe_network() -> Result<(), LandlockError> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessNet::from_all(ABI::V4))
        .and_then(|ruleset| ruleset.create())
        .map(drop)
        .map_err(|e| LandlockError::Unavailable(e.to_string()))
}

/// Restricts this process (one thread: call before starting any) to `rules`, for good.
pub fn restrict_self(rules: &Rules) -> Result<RulesetStatus, LandlockError> {
    let read = AccessFs::from_read(ABI_USED);
    let write = AccessFs::from_all(ABI_USED);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::IoctlDev;
    // Signals too stay inside the sandbox: a command cannot signal chela or other processes.
    let mut attr = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))?
        .scope(Scope::Signal)?;
    if rules.tcp.is_some() {
        // Handled with no bind rule: binding any TCP port is denied.
        attr = attr.handle_access(AccessNet::from_all(ABI::V4))?;
    }
    let mut ruleset = attr.create()?;
    for port in rules.tcp.iter().flatten() {
        ruleset = ruleset.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
    }
    let hidden = super::hide::expand(&rules.hide);
    let lists: [(&[PathBuf], BitFlags<AccessFs>); 5] = [
        (&rules.read, read),
        (&rules.write, write),
        (&rules.devices, device),
        (&hidden.list, AccessFs::ReadDir.into()),
        (&hidden.full, write),
    ];
    for (paths, access) in lists {
        for path in paths {
            // A folder that does not exist (no /lib32 here) grants nothing.
            let Ok(fd) = PathFd::new(path) else { continue };
            ruleset = ruleset.add_rule(PathBeneath::new(fd, fitting(path, access)))?;
        }
    }
    let status = ruleset.restrict_self()?;
    match status.ruleset {
        RulesetStatus::NotEnforced => Err(LandlockError::NotEnforced),
        enforced => Ok(enforced),
    }
}

/// `access` cut to what a rule on a plain file may hold.
fn fitting(path: &Path, access: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ABI_USED)
    }
}
