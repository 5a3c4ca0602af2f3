#!/usr/bin/env bash
# The project's one test command: builds and lints every crate (clippy, warnings denied)
# with every optional part (`--all-features`: the tests need them all; docs/development.md,
# "Features"), installs the npm packages the conformance tests need (when missing or stale)
# meanwhile, starts a throwaway PostgreSQL, then runs every Rust test. Extra arguments go to
# `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The conformance tests run third-party emulators from npm, each pinned by the
# package-lock.json of its folder: telegram-test-api (tests/conformance/telegram),
# discord-digital-twin (tests/conformance/discord), and real ACP coding agents with acpx
# (tests/conformance/acp: codex-acp, claude-agent-acp), and pi's session loader
# (tests/conformance/pi). Reinstall a folder when its node_modules is missing or was
# installed from another lockfile than the one checked out. They install while cargo builds.
install_npm() {
    for conformance in tests/conformance/telegram tests/conformance/discord tests/conformance/acp tests/conformance/pi tests/conformance/mcp; do
        stamp="$conformance/node_modules/.chela-lockfile.sha256"
        want="$(sha256sum "$conformance/package-lock.json" | cut -d' ' -f1)"
        if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
            if ! command -v npm >/dev/null; then
                echo "scripts/test.sh: npm is needed (Node.js 20+) to install $conformance" >&2
                return 1
            fi
            echo "== npm ci --prefix $conformance"
            npm ci --prefix "$conformance" --no-audit --no-fund --loglevel=error
            echo "$want" >"$stamp"
        fi
    done
}
npm_log="$(mktemp -t chela-npm.XXXXXX)"
install_npm >"$npm_log" 2>&1 &
npm_pid=$!
# If the build fails, the installs still finish (no half-written node_modules) before exit.
trap 'wait "$npm_pid" 2>/dev/null || true; rm -f "$npm_log"' EXIT

# Every crate of the workspace is compiled by clippy-driver with warnings denied
# (scripts/lint-rustc.sh): the build that makes the test binaries is also the lint. A plain
# `cargo test --all-features` afterwards rebuilds the workspace's crates (not the dependencies) without it.
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/lint-rustc.sh"

# With no arguments, everything is built and linted first, the benches too (as tests, not
# run); with arguments only what they select is.
if [[ $# -eq 0 ]]; then
    cargo test --workspace --locked --all-features --all-targets --no-run
fi

if ! wait "$npm_pid"; then
    cat "$npm_log" >&2
    exit 1
fi
cat "$npm_log"
rm -f "$npm_log"

# The control panel's browser tests need chromium and chromium-driver; with CHELA_CI set
# they fail when the driver is missing instead of skipping (run `cargo test --all-features` by hand to skip).
export CHELA_CI="${CHELA_CI:-1}"

# The PostgreSQL store tests run against a private throwaway cluster (scripts/with-pg.sh).
scripts/with-pg.sh cargo test --workspace --locked --all-features "$@"
