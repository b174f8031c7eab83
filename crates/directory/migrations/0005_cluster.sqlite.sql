-- mailstow directory, schema version 5 (SQLite variant): the cluster's nodes and each user's
-- owner node. Same tables as 0005_cluster.postgres.sql; only the backfill of `created_seq`
-- differs (SQLite numbers existing rows by `rowid`, which PostgreSQL has not).
--
-- `nodes`: one row per mail node. `lease_until` is milliseconds since the Unix epoch by the
-- DATABASE's clock: a node renews it every few seconds and is up while it lies in the future
-- (`Directory::renew_lease`); renewals bump no generation.
CREATE TABLE nodes (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    lmtp VARCHAR(255) NOT NULL,
    imap VARCHAR(255) NOT NULL,
    pop3 VARCHAR(255) NOT NULL,
    -- NULL = no web interface.
    web VARCHAR(255) NULL,
    lease_until BIGINT NOT NULL DEFAULT 0,
    -- Unix seconds.
    created_at BIGINT NOT NULL
);

-- `node`: the node holding the user's mailbox; NULL = the single node (no cluster).
-- `epoch`: bumped by every move (`Directory::finish_move`), so a node can tell a stale owner.
-- `move_state`: NULL, or `frozen:<target node>` while a move is in progress.
-- `created_seq`: the generation of the transaction that added the user: orders users added
-- within the same second (the oldest user takes `postmaster@`).
ALTER TABLE users ADD COLUMN node VARCHAR(64) NULL REFERENCES nodes (name);
ALTER TABLE users ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;
ALTER TABLE users ADD COLUMN move_state VARCHAR(80) NULL;
ALTER TABLE users ADD COLUMN created_seq BIGINT NOT NULL DEFAULT 0;
UPDATE users SET created_seq = rowid;
CREATE INDEX users_node ON users (node);
