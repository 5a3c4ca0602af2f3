# syntax=docker/dockerfile:1
# chela in a container (docs/operating.md). Not built in CI: check it with
# `docker build -t chela .` before relying on it.
#
#   docker build -t chela .
#   docker run -d --name chela \
#     -v chela-data:/var/lib/chela \
#     -v "$PWD/config.toml:/etc/chela/config.toml:ro" \
#     -e TELEGRAM_BOT_TOKEN=... -e OPENAI_API_KEY=... \
#     chela
#
# The config is read from $CHELA_CONFIG (/etc/chela/config.toml); secrets come in through
# `${VAR}` in it or the environment overrides (docs/configuration.md). Everything chela
# writes (store, workspace, skills, the RPC discovery file) is under $HOME = /var/lib/chela,
# the volume. The RPC (and /metrics, /healthz, /readyz) listens on 127.0.0.1:18789 inside the
# container; to reach it from outside set CHELA_RPC_LISTEN=0.0.0.0:18789 and CHELA_RPC_TOKEN
# (required off loopback) and publish the port, e.g. `-p 127.0.0.1:18789:18789`.

ARG RUST_VERSION=1.95
ARG DEBIAN=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN} AS builder
# The optional parts to build in (docs/development.md, "Features"), e.g.
# `--build-arg FEATURES=postgres` for several nodes on PostgreSQL.
ARG FEATURES=""
WORKDIR /build
# 1. The dependencies alone: the manifests, the build script and empty crate roots. This
#    layer (most of the build time) is reused until Cargo.toml, Cargo.lock or build.rs change.
COPY Cargo.toml Cargo.lock build.rs ./
COPY .cargo .cargo
COPY channels/core/Cargo.toml channels/core/
COPY channels/discord/Cargo.toml channels/discord/
COPY channels/slack/Cargo.toml channels/slack/
COPY channels/telegram/Cargo.toml channels/telegram/
COPY channels/terminal/Cargo.toml channels/terminal/
COPY tests/kit/Cargo.toml tests/kit/
RUN set -eu; \
    for dir in . channels/core channels/discord channels/slack channels/telegram channels/terminal tests/kit; do \
        mkdir -p "$dir/src"; touch "$dir/src/lib.rs"; \
    done; \
    echo 'fn main() {}' > src/main.rs; \
    mkdir -p benches; \
    for bench in $(sed -n '/^\[\[bench\]\]/{n;s/^name = "\(.*\)"/\1/p}' Cargo.toml); do \
        echo 'fn main() {}' > "benches/$bench.rs"; \
    done; \
    cargo build --release --locked --features "$FEATURES" --bin chela; \
    rm -rf src benches channels/*/src tests/kit/src
# 2. chela itself. The copied sources may be older than the stubs: touch them so cargo
#    rebuilds the workspace crates.
COPY . .
RUN touch src/lib.rs src/main.rs channels/*/src/lib.rs \
    && cargo build --release --locked --features "$FEATURES" --bin chela

FROM debian:${DEBIAN}-slim
# ca-certificates for the agent's tools (git, curl in exec); tini reaps the processes the
# agent's tools leave behind (chela is not made to be PID 1); tzdata for named time zones
# (the binary bundles none).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tini tzdata \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system chela \
    && useradd --system --gid chela --home-dir /var/lib/chela --create-home \
        --shell /usr/sbin/nologin chela \
    && mkdir -p /etc/chela
COPY --from=builder /build/target/release/chela /usr/local/bin/chela
ENV HOME=/var/lib/chela \
    USER=chela \
    CHELA_CONFIG=/etc/chela/config.toml
USER chela
WORKDIR /var/lib/chela
VOLUME ["/var/lib/chela"]
# The RPC listener: WebSocket RPC, /metrics, /healthz, /readyz (see the note at the top).
EXPOSE 18789
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/chela"]
CMD ["gateway"]
