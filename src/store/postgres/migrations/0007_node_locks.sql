-- chela store, schema version 7: failover by node locks, and one view of the cluster.
-- Each node holds a session-level advisory lock named after its id on its coordinator's
-- connection; PostgreSQL drops it the moment that connection ends. The first node to see a
-- node without its lock notes when (`down_since`, cleared when it has its lock again); once
-- it has been down for a second, any node takes its leases instead of waiting for them to
-- run out (a node whose connection blipped takes its lock back within that second).
-- `backend_pid` is that session (for operators: pg_stat_activity, and for the node
-- to end its own stale session after a reconnect); `runs` lists the sessions with a run
-- going on at the node's last heartbeat (`chela status`, the panel).
-- A node from before this version does not hold the lock and would lose its leases at once:
-- the upgrade is refused while such nodes hold leases, and they refuse this schema.
ALTER TABLE nodes ADD COLUMN backend_pid integer;
ALTER TABLE nodes ADD COLUMN runs text[] NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN down_since timestamptz;
