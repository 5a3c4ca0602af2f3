-- chela store, schema version 2: several gateways on one store. Each node records a
-- heartbeat; the session keys are spread over 64 partitions (FNV-1a of the key, computed by
-- chela), each leased to one node at a time. Times are the database's clock.

CREATE TABLE nodes (
    id text COLLATE "C" PRIMARY KEY,
    started timestamptz NOT NULL,
    last_seen timestamptz NOT NULL
);

-- One row per partition, always there; a free partition has no node. The generation grows
-- at every change of holder.
CREATE TABLE leases (
    partition integer PRIMARY KEY,
    node text COLLATE "C",
    generation bigint NOT NULL DEFAULT 0,
    expires timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO leases (partition) SELECT generate_series(0, 63);
