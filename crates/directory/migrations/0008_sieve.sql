-- mailstow directory, schema version 8: Sieve scripts (RFC 5228, managed by ManageSieve,
-- RFC 5804) and what the rules remember between deliveries.
--
-- A user's scripts go with the user (and follow a rename); at most one is active. Global
-- scripts (RFC 6609 `include :global`) are the operator's. A tracking row is one vacation
-- reply sent (RFC 5230 4.2: once per sender and handle within the period) or one message
-- id seen by the duplicate test (RFC 7352): never a directory change in the cache's sense.
CREATE TABLE sieve_scripts (
    address VARCHAR(254) NOT NULL REFERENCES users (address) ON DELETE CASCADE,
    name VARCHAR(512) NOT NULL,
    source TEXT NOT NULL,
    active BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (address, name)
);
CREATE TABLE sieve_global_scripts (
    name VARCHAR(512) PRIMARY KEY,
    source TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE sieve_tracking (
    address VARCHAR(254) NOT NULL REFERENCES users (address) ON DELETE CASCADE,
    tracking_key VARCHAR(128) NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (address, tracking_key)
);
-- Secrets every node of an installation shares, made on first use: `srs` keys the sender
-- rewriting of redirected mail, so a bounce reaching any node is taken back.
CREATE TABLE secrets (
    name VARCHAR(64) PRIMARY KEY,
    value VARCHAR(256) NOT NULL
);
