-- mailstow directory, schema version 6: admins, the login history, and which node a deleted
-- user's mail is on.
--
-- `admin`: 1 = the user may use the web view's admin pages (`mailstow user add --admin`,
-- `user admin ADDRESS on|off`). Read into the cache, so a change bumps the generation and
-- reaches every node like any other directory write.
ALTER TABLE users ADD COLUMN admin BIGINT NOT NULL DEFAULT 0 CHECK (admin IN (0, 1));

-- `logins`: the seed's logon info, what the account page shows as "recent logins": one row per
-- user, client address, protocol and result (`ok`, `failed`: a wrong password for this
-- existing user, `throttled`: refused before the password was checked), with how many such
-- attempts there were and the first and last of them (Unix seconds). Attempts are counted in
-- memory and written in batches (`Directory::note_attempt`), at most one row update per key
-- per batch; each user keeps its `LOGINS_KEPT_MAX` most recent rows, so a guesser rotating
-- addresses cannot grow the table. Rows go with the user (`del_user`) and follow a rename.
CREATE TABLE logins (
    address VARCHAR(254) NOT NULL,
    client VARCHAR(64) NOT NULL,
    protocol VARCHAR(16) NOT NULL,
    result VARCHAR(16) NOT NULL,
    attempts BIGINT NOT NULL,
    first_at BIGINT NOT NULL,
    last_at BIGINT NOT NULL,
    PRIMARY KEY (address, client, protocol, result)
);
CREATE INDEX logins_recent ON logins (address, last_at);

-- `deleted_users.node`: the node that held the user's mailbox when it was deleted (NULL: the
-- single node, or a deletion from before this version). In a cluster only that node removes
-- the mail and frees the address (`Directory::pending_deletions_on`): another node's store
-- has nothing of the user, and freeing the address from there would let a new account
-- inherit the old one's mail.
ALTER TABLE deleted_users ADD COLUMN node VARCHAR(64) NULL;
