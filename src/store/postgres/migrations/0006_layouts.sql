-- chela store, schema version 6: which nodes run the parts of an intake split into parts
-- (Discord's shards). A node running the parts of a layout (`discord#/4`: Discord in 4
-- shards) keeps a row here, renewed like a lease, and drops it when its intake ends; the
-- nodes share a layout's parts over the nodes with an unexpired row, so a node without that
-- intake, with another layout, or whose intake ended does not lower the others' share.
-- Times are the database's clock.

CREATE TABLE intake_layouts (
    layout text COLLATE "C" NOT NULL,
    node text COLLATE "C" NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (layout, node)
);
