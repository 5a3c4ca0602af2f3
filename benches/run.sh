#!/usr/bin/env bash
# chela benchmarks: builds the release profile and runs every bench, printing the figures.
#
# Usage (from anywhere):
#   benches/run.sh            # build + run turns, startup and channels
#   benches/run.sh turns      # only the turn latency/throughput bench
#   benches/run.sh startup    # only the binary start-up/memory bench
#   benches/run.sh channels   # Telegram and Discord adapters against the fakes
#   benches/run.sh acp        # ACP coding agents: chela's cost over the agent alone
#   benches/run.sh storm      # reply delivery: fault-free vs 5 fault-storm drains of 200 replies (about 6 min)
#   benches/run.sh memory     # RSS and store size over 40,000 messages in 5,000 chats (not in the default set)
#   benches/run.sh waiting    # 20 users x 5 messages with a ~1 s model: first text and whole answer
#   benches/run.sh media      # 20 users send a 5 MB photo at once: peak RSS, photo to model call
#   benches/run.sh panel      # control panel: page weight, first render with 10,000 sessions, idle RSS on/off
#   benches/run.sh prompt_cache  # request bytes and cached share per call, prompt caching off and on
#   benches/run.sh floor      # chela against a minimal Python bot on the fake Telegram (needs python3)
#   benches/run.sh cluster    # 1 node (redb), 1 and 3 nodes on PostgreSQL, failover (needs CHELA_STORE_URL: scripts/with-pg.sh)
#
# The benches report figures; they never assert times. Expect about 1 minute for `turns`
# (longer when a concurrent section hangs and is retried) and about 10 s for `startup`;
# `memory` takes several minutes (two idle periods of 70 s plus the load).
set -euo pipefail
cd "$(dirname "$0")/.."
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
    benches=(turns startup channels acp)
fi
# The benches measure the default build (no optional feature); those that need PostgreSQL
# build with `--features postgres`, and `CHELA_STORE_ENGINE=sled` adds `sled` (each another
# build of the binary).
features_of() {
    local features=()
    case "$1" in
        turns | cluster) features+=(postgres) ;;
    esac
    if [[ "${CHELA_STORE_ENGINE:-}" == "sled" ]]; then
        features+=(sled)
    fi
    if [[ ${#features[@]} -gt 0 ]]; then
        (IFS=,; echo "--features ${features[*]}")
    fi
}
status=0
for b in "${benches[@]}"; do
    echo
    echo "== bench: $b =="
    # shellcheck disable=SC2046
    cargo bench --bench "$b" $(features_of "$b") || status=$?
done
exit $status
