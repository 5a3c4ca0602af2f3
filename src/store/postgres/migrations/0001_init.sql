-- chela store, schema version 1: everything the sled backend holds, one table per record
-- kind. Typed columns hold what is queried or changed in place; the rest of a record is its
-- JSON encoding (bytea), the same bytes sled stores. Keys that are listed in order use the
-- "C" collation, so the order is the byte order sled gives.

-- Pending seqs and outbox ids: one counter (they increase and are never reused).
CREATE SEQUENCE chela_ids START 1;

CREATE TABLE sessions (
    key text COLLATE "C" PRIMARY KEY,
    session_id text NOT NULL,
    created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    entries bigint NOT NULL,
    last_entry_id text
);

-- Transcript lines byte for byte; seq 0 is the header (no entry id).
CREATE TABLE transcript (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    entry_id text,
    line bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX transcript_entry_ids ON transcript (session_id, entry_id)
    WHERE entry_id IS NOT NULL;

CREATE TABLE settings (key text COLLATE "C" PRIMARY KEY, json bytea NOT NULL);

CREATE TABLE pending (
    seq bigint PRIMARY KEY,
    session_key text NOT NULL,
    turn bytea NOT NULL
);

CREATE TABLE dedupe (key text PRIMARY KEY, seen_ms bigint NOT NULL);
CREATE INDEX dedupe_seen ON dedupe (seen_ms);

CREATE TABLE finished (seq bigint PRIMARY KEY, ended_ms bigint NOT NULL, run bytea NOT NULL);

CREATE TABLE outbox (
    id bigint PRIMARY KEY,
    created_ms bigint NOT NULL,
    delivered boolean NOT NULL,
    attempts integer NOT NULL,
    entry bytea NOT NULL
);

CREATE TABLE dead_letters (
    id bigint PRIMARY KEY,
    attempts integer NOT NULL,
    delivered boolean NOT NULL,
    entry bytea NOT NULL
);

CREATE TABLE reply_journal (run_id text COLLATE "C" PRIMARY KEY, journal bytea NOT NULL);

CREATE TABLE bindings (session_key text COLLATE "C" PRIMARY KEY, binding bytea NOT NULL);

CREATE TABLE subagents (
    child text COLLATE "C" PRIMARY KEY,
    parent text NOT NULL,
    created_ms bigint NOT NULL,
    state text NOT NULL,
    link bytea NOT NULL
);
CREATE INDEX subagents_parent ON subagents (parent);

CREATE TABLE targets (session_key text PRIMARY KEY, conversation bytea NOT NULL);

CREATE TABLE pairing_codes (
    channel text COLLATE "C" NOT NULL,
    code text COLLATE "C" NOT NULL,
    account text NOT NULL,
    sender_id text NOT NULL,
    created_ms bigint NOT NULL,
    request bytea NOT NULL,
    PRIMARY KEY (channel, code)
);

CREATE TABLE pairing_approved (
    channel text NOT NULL,
    account text NOT NULL,
    sender_id text NOT NULL,
    approved_ms bigint NOT NULL,
    PRIMARY KEY (channel, account, sender_id)
);

CREATE TABLE pairing_owners (
    channel text NOT NULL,
    sender_id text NOT NULL,
    since_ms bigint NOT NULL,
    PRIMARY KEY (channel, sender_id)
);

CREATE TABLE cursors (name text COLLATE "C" PRIMARY KEY, value bigint NOT NULL);

CREATE TABLE group_history (session_key text COLLATE "C" PRIMARY KEY, lines bytea NOT NULL);
