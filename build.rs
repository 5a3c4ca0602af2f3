//! Links chela's binaries with packed relative relocations (`DT_RELR`) on Linux with the
//! GNU C library: the executable stays position-independent (its address is still
//! randomized), and its tens of thousands of relative relocations take a few kilobytes
//! instead of 1.3 MB, which the dynamic loader would also read in at every start
//! (docs/benchmarks.md, "Per crate, and packed relocations").
//!
//! Such a binary needs glibc 2.36 or later (Debian 12, Ubuntu 24.04), so the flag is only
//! added when the C library found on the building machine supports it (it defines the
//! `GLIBC_ABI_DT_RELR` version), and only for a native build. `CHELA_NO_RELR=1` builds
//! without it, for a binary meant for an older system (or a build that links against an
//! older glibc than the host's, as cargo-zigbuild can).

use std::path::Path;

/// Where distributions keep the C library: Debian's multiarch folders (`{arch}` is the
/// target's architecture, so a host with several architectures' libraries reads the right
/// one; where Debian's folder name differs from it, as for i386 or armhf, nothing is found
/// and the flag is left off), then Fedora's and Arch's.
const LIBC_PATHS: [&str; 4] = [
    "/lib/{arch}-linux-gnu/libc.so.6",
    "/usr/lib/{arch}-linux-gnu/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/usr/lib/libc.so.6",
];

fn main() {
    println!("cargo:rerun-if-env-changed=CHELA_NO_RELR");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    let glibc = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let off = std::env::var_os("CHELA_NO_RELR").is_some_and(|v| !v.is_empty() && v != "0");
    if native && glibc && !off && libc_has_relr(&var("CARGO_CFG_TARGET_ARCH")) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the first C library found for `arch` defines the `GLIBC_ABI_DT_RELR` version.
fn libc_has_relr(arch: &str) -> bool {
    let paths = LIBC_PATHS.map(|path| path.replace("{arch}", arch));
    let Some(libc) = paths.iter().map(Path::new).find(|p| p.exists()) else {
        return false;
    };
    println!("cargo:rerun-if-changed={}", libc.display());
    let needle = b"GLIBC_ABI_DT_RELR";
    std::fs::read(libc).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}
