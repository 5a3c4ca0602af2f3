-- chela store, schema version 5: what each node runs, and group context kept for the whole
-- cluster. A node records its chela version and the cluster protocol it speaks (what queued
-- rows and the nodes' notifications mean); a node refuses to start while a live node speaks
-- another one. Protocol 0: a node from before this was recorded.
ALTER TABLE nodes ADD COLUMN version text NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN protocol integer NOT NULL DEFAULT 0;

-- When a group's kept context last changed: beyond the cap, the least recently touched
-- groups are forgotten first.
ALTER TABLE group_history ADD COLUMN touched timestamptz NOT NULL DEFAULT now();

-- The key the nodes sign their calls to each other with (HMAC-SHA256 over each
-- notification): a role that can connect, and so NOTIFY and LISTEN, but not read this table
-- cannot make or forge calls. Made once, here, from PostgreSQL's strong random source.
CREATE TABLE node_call_key (key text NOT NULL);
INSERT INTO node_call_key (key) VALUES (gen_random_uuid()::text || gen_random_uuid()::text);
