-- chela store, schema version 4: scheduled jobs. The record is its JSON encoding (the bytes
-- the embedded backends store); its next run is a column of its own for the compare-and-set
-- that moves a job past a run (several nodes' schedulers may try it at once).

CREATE TABLE cron_jobs (
    id text COLLATE "C" PRIMARY KEY,
    next_ms bigint,
    job bytea NOT NULL
);
