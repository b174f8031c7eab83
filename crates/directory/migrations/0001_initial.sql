-- mailstow directory, schema version 1.
--
-- Portable SQL: the same text runs on SQLite (the embedded default) and PostgreSQL.
-- Standard types only: VARCHAR/TEXT for names and hashes, BIGINT for counters, quotas and
-- Unix timestamps (SQLite has no date type; BIGINT seconds read the same everywhere).
-- The `meta` table and its `schema_version` row belong to the migrator (src/db.rs) and exist
-- before this file runs.
--
-- Addresses are stored normalised (src/address.rs): domains lowercase, local parts of our
-- own users and alias sources lowercase, so equality is plain `=` on every backend.

CREATE TABLE domains (
    name VARCHAR(255) NOT NULL PRIMARY KEY
);

CREATE TABLE users (
    address VARCHAR(254) NOT NULL PRIMARY KEY,
    domain VARCHAR(255) NOT NULL REFERENCES domains (name),
    -- argon2id PHC string.
    password_hash TEXT NOT NULL,
    -- NULL = unlimited.
    quota_bytes BIGINT NULL CHECK (quota_bytes >= 0),
    -- Unix seconds.
    created_at BIGINT NOT NULL
);

CREATE INDEX users_domain ON users (domain);

-- `source` is `local@domain`, or `@domain` for the domain's catch-all. `domain` repeats the
-- source's domain so the foreign key keeps `del_domain` from orphaning aliases.
-- `destination` is any address, local or remote.
CREATE TABLE aliases (
    source VARCHAR(255) NOT NULL,
    destination VARCHAR(254) NOT NULL,
    domain VARCHAR(255) NOT NULL REFERENCES domains (name),
    PRIMARY KEY (source, destination)
);

CREATE INDEX aliases_domain ON aliases (domain);

-- One catch-all per domain, with one destination (partial indexes: SQLite 3.8+, PostgreSQL).
CREATE UNIQUE INDEX aliases_one_catch_all ON aliases (source) WHERE source LIKE '@%';

-- Bumped by every write (src/db.rs `begin_write`); caches poll it.
INSERT INTO meta (key, value) VALUES ('generation', 0);
