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
//!
//! On x86_64 Linux with the GNU C library, where rustc links with its own LLD unless told
//! otherwise, the binaries are also linked with `link/startup-order.txt`: the code and
//! constants a start and an idle gateway touch, laid out first and together, so an idle
//! process maps a few megabytes of its code instead of most of it (docs/benchmarks.md,
//! "Start-up code laid out together"). `scripts/startup-order.sh` writes that file; a name
//! it lists that a build does not have (changed code, other features) is passed over, so a
//! stale file costs memory, never a build. The flags are first tried on an empty program
//! linked the way this build links (its rustc, target, `RUSTFLAGS` and configured linker):
//! a linker that does not take them (GNU ld, a rustc built to link through it) gets none.
//! `CHELA_NO_SYMBOL_ORDER=1` builds without them.

use std::path::Path;

/// The symbol order file, from the package root.
const ORDER_FILE: &str = "link/startup-order.txt";

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
    println!("cargo:rerun-if-env-changed=CHELA_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=CHELA_LINK_MAP");
    let native = var("HOST") == var("TARGET");
    let glibc = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if native && glibc && !set("CHELA_NO_RELR") && libc_has_relr(&var("CARGO_CFG_TARGET_ARCH")) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    if glibc && var("CARGO_CFG_TARGET_ARCH") == "x86_64" && !set("CHELA_NO_SYMBOL_ORDER") {
        order_symbols();
    }
    // Where each symbol went, for `scripts/startup-order.sh`: a map is the only list of them
    // a stripped build leaves (a build that keeps them names chela's own differently).
    let map = var("CHELA_LINK_MAP");
    if !map.is_empty() {
        linker_args(&["--no-demangle".to_owned(), format!("-Map={map}")]);
    }
}

/// An environment variable's value, empty when it is not set.
fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// Whether the switch `name` is on (set, and neither empty nor `0`).
fn set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Links with the symbol order file when the linker takes it.
fn order_symbols() {
    let file = Path::new(&var("CARGO_MANIFEST_DIR")).join(ORDER_FILE);
    // A file that is not there yet is watched too (cargo then runs this script at every
    // build: only where `link/` is left out, as in the Dockerfile's dependency layer).
    println!("cargo:rerun-if-changed={}", file.display());
    if !file.exists() {
        return;
    }
    let args = [
        "--no-warn-symbol-ordering".to_owned(),
        format!("--symbol-ordering-file={}", file.display()),
    ];
    match links_with(&args) {
        Ok(()) => linker_args(&args),
        Err(why) => println!(
            "cargo:warning=linking without the start-up symbol order, so an idle chela maps more of its code (docs/benchmarks.md): {why}"
        ),
    }
}

/// Whether an empty program links, the way this build links, with `args` for the linker:
/// `Ok`, or why not (the linker's complaint, else the first line rustc wrote).
fn links_with(args: &[String]) -> Result<(), String> {
    let out = Path::new(&var("OUT_DIR")).join("order-probe");
    let source = out.with_extension("rs");
    std::fs::write(&source, "fn main() {}\n").map_err(|e| e.to_string())?;
    let mut rustc = std::process::Command::new(var("RUSTC"));
    rustc
        .arg("--target")
        .arg(var("TARGET"))
        .arg("--cap-lints=allow");
    // In cargo's order: the configured linker, then `RUSTFLAGS` (which may name another).
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut flag = std::ffi::OsString::from("linker=");
        flag.push(linker);
        rustc.arg("-C").arg(flag);
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    rustc.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    for arg in args {
        rustc.arg("-C").arg("link-arg=-Xlinker");
        rustc.arg("-C").arg(format!("link-arg={arg}"));
    }
    rustc.arg("-o").arg(&out).arg(&source);
    let output = rustc.output().map_err(|e| e.to_string())?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let why = stderr.lines().find(|l| {
        ["unrecognized option", "unknown option", "unknown argument"]
            .iter()
            .any(|m| l.contains(m))
    });
    Err(why
        .or(stderr.lines().next())
        .unwrap_or("")
        .trim()
        .to_owned())
}

/// Passes `args` to the linker when it links the binaries, one per line, so a comma in a path
/// cannot split one (as `-Wl,` would).
fn linker_args(args: &[String]) {
    for arg in args {
        println!("cargo:rustc-link-arg-bins=-Xlinker");
        println!("cargo:rustc-link-arg-bins={arg}");
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
