-- chela store, schema version 3: intake leases. A channel whose intake only one process may
-- run at a time (Telegram long polling, a Discord shard) runs on the node holding its row;
-- the others take it over once it expires. Times are the database's clock.

CREATE TABLE intake_leases (
    name text COLLATE "C" PRIMARY KEY,
    node text COLLATE "C",
    expires timestamptz NOT NULL DEFAULT '-infinity'
);
