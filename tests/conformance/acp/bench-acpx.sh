#!/usr/bin/env bash
# One-shot text turns through acpx 0.19.1 (`acpx --agent codex-acp exec`) against fake-model:
# wall time and peak RSS per run from /usr/bin/time -v, then the same runs with the peak RSS
# of acpx's node and of codex-acp told apart (polled from /proc).
#
#   bash bench-acpx.sh [RUNS]        (default 5; needs `npm ci` here and fake-model built)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs="${1:-5}"
fake="${FAKE_MODEL:-${CARGO_TARGET_DIR:-$here/../../../target}/debug/fake-model}"
acpx="$here/node_modules/acpx/dist/cli.js"
codex="$here/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp"
work="$(mktemp -d)"
fake_pid=""
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$fake" >"$work/fake.out" 2>&1 &
fake_pid=$!
for _ in $(seq 50); do grep -q listening "$work/fake.out" && break; sleep 0.1; done
url="$(sed -n 's/^listening //p' "$work/fake.out")"
[ -n "$url" ] || { echo "fake-model did not start" >&2; exit 1; }

mkdir -p "$work/codex-home" "$work/cwd"
cat >"$work/codex-home/config.toml" <<EOF
model = "gpt-5.2"
model_provider = "local"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
[model_providers.local]
name = "local"
base_url = "$url/v1"
wire_api = "responses"
env_key = "LOCAL_API_KEY"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0
[analytics]
enabled = false
EOF
field() { sed -n "s/^\s*$1: //p" "$2"; }
hwm() { sed -n 's/^VmHWM:\s*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }
run_acpx() { # $1 = run label; prints the agent's answer
  mkdir -p "$work/home$1"
  HOME="$work/home$1" CODEX_HOME="$work/codex-home" LOCAL_API_KEY=fake \
    /usr/bin/time -v -o "$work/acpx.time" \
    node "$acpx" --agent "$codex" --cwd "$work/cwd" --approve-all --format quiet \
    exec "hello $1" 2>/dev/null | tr '\n' ' '
}

# Wall time and peak RSS as /usr/bin/time -v reports them (its RSS is the largest single
# process among acpx's node and the agent it reaped, not their sum).
echo "run wall time_v_peak_rss_kb answer"
for i in $(seq "$runs"); do
  out="$(run_acpx "$i")"
  wall="$(field 'Elapsed (wall clock) time (h:mm:ss or m:ss)' "$work/acpx.time")"
  rss="$(field 'Maximum resident set size (kbytes)' "$work/acpx.time")"
  echo "$i $wall $rss $out"
done

# The same runs again, each process's own peak (VmHWM) polled from /proc every 10 ms.
set +e
echo "run acpx_node_peak_kb codex_acp_peak_kb"
for i in $(seq "$runs"); do
  run_acpx "p$i" >/dev/null &
  job=$!
  node_pid=""
  for _ in $(seq 200); do
    node_pid="$(pgrep -n -f "^node .*exec hello p$i\$")" && break
    sleep 0.005
  done
  node_peak=0
  agent_peak=0
  while [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; do
    v="$(hwm "$node_pid")"
    [ -n "$v" ] && [ "$v" -gt "$node_peak" ] && node_peak=$v
    for c in $(pgrep -x codex-acp); do
      v="$(hwm "$c")"
      [ -n "$v" ] && [ "$v" -gt "$agent_peak" ] && agent_peak=$v
    done
    sleep 0.01
  done
  wait "$job"
  echo "p$i $node_peak $agent_peak"
done
