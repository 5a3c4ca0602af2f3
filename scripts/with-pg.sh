#!/usr/bin/env bash
# Runs a command with a private throwaway PostgreSQL cluster: its own temp folder and a free
# port on 127.0.0.1, started as a non-root user (the `postgres` system user when run as
# root, else the current user), exported to the command as CHELA_TEST_PG_URL, and stopped
# and removed on exit, also when the command fails. The cluster is for tests only: fsync is
# off (nothing in it must survive a power cut), so it starts and runs fast.
#
#   scripts/with-pg.sh cargo test --all-features --lib store::postgres
set -euo pipefail

bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
    echo "scripts/with-pg.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2
    exit 1
fi

dir="$(mktemp -d -t chela-pg.XXXXXX)"
as_owner=()
if [[ "$(id -u)" == 0 ]]; then
    chown postgres: "$dir"
    as_owner=(runuser -u postgres --)
fi
stop() {
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT

password="chela-test-$RANDOM$RANDOM"
echo "$password" >"$dir/pw"
[[ -n "${as_owner[*]}" ]] && chown postgres: "$dir/pw"
"${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U chela --pwfile="$dir/pw" -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 -N >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    exit 1
}

# Statement counts for the benches (benches/cluster.rs), where the module is installed.
preload=""
if [[ -f "$(dirname "$bin")/lib/pg_stat_statements.so" ]]; then
    preload=" -c shared_preload_libraries=pg_stat_statements"
fi

# A free port: pick one at random until nothing answers on it and the server starts there.
started=""
for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 40000))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        continue
    fi
    if "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300$preload" \
        start >/dev/null; then
        started=1
        break
    fi
done
if [[ -z "$started" ]]; then
    echo "scripts/with-pg.sh: the test PostgreSQL did not start:" >&2
    cat "$dir/server.log" >&2 || true
    exit 1
fi

export CHELA_TEST_PG_URL="postgres://chela:$password@127.0.0.1:$port/postgres"
echo "== test PostgreSQL on 127.0.0.1:$port ($dir)"
"$@"
