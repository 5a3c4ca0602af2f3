#!/usr/bin/env bash
# The project's one test command: installs the npm packages the conformance tests need
# (when missing or stale), starts a throwaway PostgreSQL, then runs every Rust test. Extra
# arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The conformance tests run third-party emulators from npm, each pinned by the
# package-lock.json of its folder: telegram-test-api (tests/conformance/telegram),
# discord-digital-twin (tests/conformance/discord), and real ACP coding agents with acpx
# (tests/conformance/acp: codex-acp, claude-agent-acp), and pi's session loader
# (tests/conformance/pi). Reinstall a folder when its node_modules
# is missing or was installed from another lockfile than the one checked out.
for conformance in tests/conformance/telegram tests/conformance/discord tests/conformance/acp tests/conformance/pi; do
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
done

# The control panel's browser tests need chromium and chromium-driver; with CHELA_CI set
# they fail when the driver is missing instead of skipping (run `cargo test` by hand to skip).
export CHELA_CI="${CHELA_CI:-1}"

# The PostgreSQL store tests run against a private throwaway cluster (scripts/with-pg.sh).
scripts/with-pg.sh cargo test --workspace --locked "$@"
