-- mailstow directory, schema version 12: replication (docs/replication.md).
-- `replication`: host:port of the node's replication listener, where its partner streams;
-- NULL = it takes no copies. `replica`: the node that holds every change this node
-- acknowledged, NULL = none does (written by the node itself, docs/replication.md R2).
-- `epoch`: bumped by every take-over of the node (fencing). `host`: the node whose machine
-- serves this node's files now, NULL = its own (after a take-over, its replica partner's).
-- `replica_lag_ms`: how long the
-- oldest change not yet on the replica has waited, reported with the lease.
ALTER TABLE nodes ADD COLUMN replication VARCHAR(255) NULL;
ALTER TABLE nodes ADD COLUMN replica VARCHAR(64) NULL;
ALTER TABLE nodes ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;
ALTER TABLE nodes ADD COLUMN host VARCHAR(64) NULL;
-- `standby`: host:port where the node's own machine, back (or replaced) after a take-over,
-- receives the copy from the machine serving it, before it is handed back.
-- `draining`: 1 while `mailstow node drain` asks the node to hand itself to its partner, 2
-- once it gave its lease up (no renewal of that epoch holds), 0 again after the take-over.
ALTER TABLE nodes ADD COLUMN standby VARCHAR(255) NULL;
ALTER TABLE nodes ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN replica_lag_ms BIGINT NULL;
