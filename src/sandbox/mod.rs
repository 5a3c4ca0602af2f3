//! What the processes chela starts for the agent can reach (issue #11): every child starts
//! from a scrubbed environment ([`env`]), lives in its own process group that is stopped as a
//! whole ([`group`]), and `exec` runs under a Landlock ruleset ([`landlock`]) applied by the
//! hidden `chela sandbox-exec` trampoline ([`trampoline`]) as [`exec::ExecSandbox`] decides.
//! Hooks, coding agents and their terminal commands go through the same trampoline with
//! chela's own files hidden ([`hide`]) as [`child::ChildSandbox`] decides. The trampoline
//! also drops every capability and sets `no_new_privs` ([`privs`]) and, unless the network
//! is left open, allows TCP connect only to the policy's ports and no bind or listen
//! ([`landlock`], [`netguard`]). Interrupts that chela was started with ignored reach
//! them at their default ([`signals`]).

pub mod child;
pub mod env;
pub mod exec;
pub mod group;
pub mod hide;
pub mod landlock;
pub mod netguard;
pub mod privs;
pub mod signals;
pub mod trampoline;

pub use child::ChildSandbox;
pub use exec::{ExecRefusal, ExecSandbox};
pub use group::{GRACE, ProcessGroup};
