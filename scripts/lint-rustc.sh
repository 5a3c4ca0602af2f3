#!/usr/bin/env bash
# Cargo's RUSTC_WORKSPACE_WRAPPER for the test command (scripts/test.sh): compiles the
# workspace's own crates with clippy-driver, which is rustc with Clippy's lints added, and
# denies every warning. One build then both lints and produces the test binaries, instead of
# `cargo clippy` checking every dependency a second time. Dependencies are built by plain
# rustc (cargo calls this script for workspace members only). $1 is the rustc cargo asks for.
set -euo pipefail
rustc="$1"
shift
driver="$("$rustc" --print sysroot)/bin/clippy-driver"
if [[ ! -x "$driver" ]]; then
    echo "scripts/lint-rustc.sh: $driver is missing: rustup component add clippy" >&2
    exit 1
fi
case " $* " in
    # A crate being compiled: lint it. Anything else (`-vV`, `--print`): rustc answers.
    *" --crate-name "*) exec "$driver" rustc "$@" -D warnings ;;
    *) exec "$rustc" "$@" ;;
esac
