#!/usr/bin/env bash
# The project's one test command: installs the npm packages the conformance tests need
# (when missing or stale), then runs every Rust test. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Telegram conformance test runs the telegram-test-api emulator (npm, pinned by
# tests/conformance/telegram/package-lock.json). Reinstall when node_modules is missing or
# was installed from another lockfile than the one checked out.
conformance=tests/conformance/telegram
stamp="$conformance/node_modules/.chela-lockfile.sha256"
want="$(sha256sum "$conformance/package-lock.json" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    if ! command -v npm >/dev/null; then
        echo "scripts/test.sh: npm is needed (Node.js 20+) to install $conformance" >&2
        exit 1
    fi
    echo "== npm ci --prefix $conformance"
    npm ci --prefix "$conformance" --no-audit --no-fund --loglevel=error
    echo "$want" >"$stamp"
fi

cargo test --workspace --locked "$@"
