#!/usr/bin/env bash
# Writes link/startup-order.txt, the symbol order file build.rs links chela with: the code and
# constants an idle gateway touched, so the linker lays them out first and together
# (docs/benchmarks.md, "Start-up code laid out together").
#
# It builds the default release binary with a link map (`CHELA_LINK_MAP`, build.rs: the
# stripped binary keeps no symbols, and a build that keeps them names chela's own code
# differently), turns read-ahead off for the binary's disk and drops the page cache, so the
# kernel reads in only the pages the process touches; starts the gateway on embedded defaults
# in an empty home, waits four seconds, reads which pages of the binary are resident
# (/proc/PID/pagemap) and lists every symbol on them, in address order. Needs root (the page
# cache, the disk's read-ahead and pagemap); puts read-ahead back when done.
#
# Usage: scripts/startup-order.sh [BINARY MAP]   (default: build them)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root (drop_caches, read_ahead_kb, pagemap)" >&2; exit 1; }

work=$(mktemp -d /tmp/chela-order-XXXX)
bin=${1:-}
map=${2:-}
if [ -z "$bin" ]; then
    map=$work/chela.map
    CHELA_LINK_MAP=$map cargo build --release --locked
    bin=$work/chela
    cp target/release/chela "$bin"
fi
bin=$(realpath "$bin")
printf '[store]\npath = "%s/store"\n' "$work" > "$work/chela.toml"

# The disk holding the binary (its whole-disk device for a partition).
disk=$(lsblk -no PKNAME "$(findmnt -no SOURCE -T "$bin")" 2>/dev/null | head -1)
[ -n "$disk" ] || disk=$(basename "$(findmnt -no SOURCE -T "$bin")")
ra=/sys/block/$disk/queue/read_ahead_kb
old_ra=$(cat "$ra")
restore() {
    echo "$old_ra" > "$ra"
    [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
    [ -n "${feeder:-}" ] && kill "$feeder" 2>/dev/null || true
    rm -rf "$work"
}
trap restore EXIT
echo 0 > "$ra"
sync
echo 3 > /proc/sys/vm/drop_caches

# stdin held open, as a terminal would keep it.
mkfifo "$work/stdin"
sleep infinity > "$work/stdin" &
feeder=$!
HOME=$work OPENAI_API_KEY=unused "$bin" --config "$work/chela.toml" gateway \
    < "$work/stdin" > "$work/out" 2>&1 &
pid=$!
sleep 4
kill -0 "$pid" || { cat "$work/out" >&2; exit 1; }
grep -E 'VmRSS|RssFile' "/proc/$pid/status"

python3 - "$pid" "$bin" "$map" > link/startup-order.txt <<'EOF'
import bisect, struct, subprocess, sys

pid, binary, link_map = int(sys.argv[1]), sys.argv[2], sys.argv[3]
# Resident pages of the binary's read-only and code mappings, as file offsets.
offsets = []
with open(f"/proc/{pid}/pagemap", "rb") as pagemap, open(f"/proc/{pid}/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) < 6 or fields[5] != binary or "w" in fields[1]:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        pagemap.seek(start // 4096 * 8)
        entries = pagemap.read((end - start) // 4096 * 8)
        for i in range(len(entries) // 8):
            if struct.unpack_from("<Q", entries, i * 8)[0] >> 63:
                offsets.append(int(fields[2], 16) + i * 4096)
# File offset to address, through the loadable segments.
segments = []
for line in subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout.splitlines():
    if line.strip().startswith("LOAD"):
        f = line.split()
        segments.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
# The map's symbol lines: address, LMA, size, alignment, name (input sections name a file).
symbols = []
with open(link_map) as lines:
    for line in lines:
        f = line.split()
        if len(f) == 5 and f[0] != "VMA" and not f[4].startswith(".") and ":(" not in f[4]:
            symbols.append((int(f[0], 16), int(f[2], 16), f[4]))
symbols.sort()
starts = [s[0] for s in symbols]
listed = {}
for offset in offsets:
    for file_offset, address, size in segments:
        if file_offset <= offset < file_offset + size:
            page = offset - file_offset + address
            i = max(bisect.bisect_right(starts, page) - 1, 0)
            while i < len(symbols) and symbols[i][0] < page + 4096:
                start, length, name = symbols[i]
                if start + max(length, 1) > page:
                    listed.setdefault(name, start)
                i += 1
print("# chela's start-up symbol order (build.rs): written by scripts/startup-order.sh; do not edit.")
print(f"# {len(listed)} symbols on the {len(offsets)} pages an idle gateway touched.")
for name, _ in sorted(listed.items(), key=lambda item: item[1]):
    print(name)
EOF
wc -l link/startup-order.txt
