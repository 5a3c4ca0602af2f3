#!/usr/bin/env bash
# Writes link/startup-order.txt, the symbol order file build.rs links chela with: the code and
# constants an idle gateway touched, so the linker lays them out first and together
# (docs/benchmarks.md, "Start-up code laid out together").
#
# It needs the default release binary built without the order (so the list does not keep
# the old order's neighbours) and with a link map (`CHELA_LINK_MAP`, build.rs: the stripped
# binary names nothing, and a build that keeps its symbols names chela's own code
# differently). It copies the binary onto a small ext4 image mounted on a loop device with
# read-ahead off, drops the page cache, so the kernel reads in only the pages the process
# touches; starts the gateway on embedded defaults in an empty home, waits four seconds,
# reads which of the binary's file pages are resident (/proc/PID/pagemap) and lists every
# code and constant symbol on them, in address order. Needs root (the loop mount, the page
# cache, pagemap).
#
# Usage, as root:            scripts/startup-order.sh              (builds, then measures)
#   or build as yourself:    CHELA_NO_SYMBOL_ORDER=1 CHELA_LINK_MAP=/tmp/chela.map \
#                                cargo build --release --locked
#   then, as root:           scripts/startup-order.sh target/release/chela /tmp/chela.map
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "startup-order: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (a loop mount, the page cache, pagemap)"
[ $# = 0 ] || [ $# = 2 ] || fail "give no argument, or a binary and its link map"

work=$(mktemp -d /tmp/chela-order-XXXX)
cleanup() {
    kill ${pid:-} ${feeder:-} 2>/dev/null || true
    wait 2>/dev/null || true
    if mountpoint -q "$work/mnt"; then umount "$work/mnt" || umount -l "$work/mnt" || true; fi
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

if [ $# = 0 ]; then
    CHELA_NO_SYMBOL_ORDER=1 CHELA_LINK_MAP="$work/chela.map" cargo build --release --locked
    set -- "${CARGO_TARGET_DIR:-target}/release/chela" "$work/chela.map"
fi
[ -f "$1" ] && [ -f "$2" ] || fail "no such binary or map: $1 $2"

# The binary on its own file system, whose loop device reads nothing ahead.
truncate -s 128M "$work/disk.img"
mkfs.ext4 -q "$work/disk.img"
mkdir "$work/mnt" "$work/home"
mount -o loop "$work/disk.img" "$work/mnt"
loop=$(findmnt -no SOURCE "$work/mnt")
echo 0 > "/sys/block/$(basename "$loop")/queue/read_ahead_kb"
cp "$1" "$work/mnt/chela"
printf '[store]\npath = "%s/store"\n' "$work/home" > "$work/home/chela.toml"
sync
echo 3 > /proc/sys/vm/drop_caches

# stdin held open, as a terminal would keep it.
mkfifo "$work/stdin"
sleep infinity > "$work/stdin" &
feeder=$!
HOME=$work/home OPENAI_API_KEY=unused "$work/mnt/chela" --config "$work/home/chela.toml" \
    gateway < "$work/stdin" > "$work/out" 2>&1 &
pid=$!
sleep 4
kill -0 "$pid" 2>/dev/null || { cat "$work/out" >&2; fail "the gateway did not stay up"; }
grep -E 'VmRSS|RssFile' "/proc/$pid/status"

python3 - "$pid" "$work/mnt/chela" "$2" > "$work/order.txt" <<'EOF'
import bisect, os, re, struct, subprocess, sys

pid, binary, link_map = int(sys.argv[1]), sys.argv[2], sys.argv[3]
stat = os.stat(binary)
device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}"
PRESENT, FILE_PAGE = 1 << 63, 1 << 61
# Resident file pages (not the copies the loader wrote) of the binary's mappings, as offsets.
offsets = []
with open(f"/proc/{pid}/pagemap", "rb") as pagemap, open(f"/proc/{pid}/maps") as maps:
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or (fields[3], int(fields[4])) != (device, stat.st_ino):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        pagemap.seek(start // 4096 * 8)
        entries = pagemap.read((end - start) // 4096 * 8)
        for i in range(len(entries) // 8):
            entry = struct.unpack_from("<Q", entries, i * 8)[0]
            if entry & PRESENT and entry & FILE_PAGE:
                offsets.append(int(fields[2], 16) + i * 4096)
# File offset to address, through the loadable segments.
segments = []
readelf = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True)
for line in readelf.stdout.splitlines():
    if line.strip().startswith("LOAD"):
        f = line.split()
        segments.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
# The map's lines: address, LMA, size, alignment, then an output section (no indent), an
# input section (8 spaces: `file:(section)`) or a symbol (16). Symbols of code and constants.
line_format = re.compile(r"\s*([0-9a-f]+) +[0-9a-f]+ +([0-9a-f]+) +[0-9]+ ( *)(\S+)$")
symbols, section = [], ""
with open(link_map) as lines:
    for line in lines:
        m = line_format.match(line)
        if not m:
            continue
        if len(m[3]) == 0:
            section = m[4]
        elif len(m[3]) == 16 and section.startswith((".text", ".rodata")):
            symbols.append((int(m[1], 16), int(m[2], 16), m[4]))
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
if not listed:
    sys.exit("startup-order: no symbol of the map is on a resident page (a map of another build?)")
print("# chela's start-up symbol order (build.rs): written by scripts/startup-order.sh; do not edit.")
print(f"# {len(listed)} symbols on the {len(offsets)} pages an idle gateway touched.")
for name, _ in sorted(listed.items(), key=lambda item: item[1]):
    print(name)
EOF
# Written over, not moved, so the file keeps its owner.
cat "$work/order.txt" > link/startup-order.txt
wc -l link/startup-order.txt
