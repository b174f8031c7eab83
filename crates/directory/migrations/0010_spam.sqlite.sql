-- mailstow directory, schema version 10 (SQLite variant): the spam filter's state (issue 38,
-- docs/spam.md). Same tables as 0010_spam.postgres.sql; only `spam_owners.id` differs
-- (SQLite numbers an `INTEGER PRIMARY KEY` itself, PostgreSQL needs an identity column).
--
-- `spam_owners`: one row per classifier, made by its first write (training, reputation): a
-- user's (`address`), or the site-wide one (`id` 0, `address` NULL, made here; new users fall
-- back to it), which is no user. Everything below hangs off this row: a user's deletion
-- takes it and all of it (ON DELETE CASCADE), a rename moves only `address`
-- (`Directory::finish_rename`). It keeps the trained message counts and the number of rows
-- each child table holds for it, written in the same transaction as those rows, so a bound
-- is checked without counting. A freed `id` may be given again; its rows went with it.
CREATE TABLE spam_owners (
    id INTEGER PRIMARY KEY,
    address VARCHAR(254) NULL UNIQUE REFERENCES users (address) ON DELETE CASCADE,
    spam_messages BIGINT NOT NULL CHECK (spam_messages >= 0),
    ham_messages BIGINT NOT NULL CHECK (ham_messages >= 0),
    tokens BIGINT NOT NULL CHECK (tokens >= 0),
    trained BIGINT NOT NULL CHECK (trained >= 0),
    reputation BIGINT NOT NULL CHECK (reputation >= 0),
    CHECK ((id = 0) = (address IS NULL))
);
INSERT INTO spam_owners (id, address, spam_messages, ham_messages, tokens, trained, reputation)
VALUES (0, NULL, 0, 0, 0, 0, 0);

-- `spam_tokens`: one row per token an owner's classifier has seen: its 64-bit hash (stored
-- bit for bit as a signed BIGINT) and how many spam and ham messages held it. A row at 0/0 is
-- deleted. Bounded per owner by the caller's `bayes_tokens_max`: past it the tokens seen
-- least (spam + ham smallest) are pruned down to 90% of it (`Directory::spam_apply`).
CREATE TABLE spam_tokens (
    owner BIGINT NOT NULL REFERENCES spam_owners (id) ON DELETE CASCADE,
    token BIGINT NOT NULL,
    spam BIGINT NOT NULL CHECK (spam >= 0),
    ham BIGINT NOT NULL CHECK (ham >= 0),
    PRIMARY KEY (owner, token)
);

-- `spam_trained`: one row per message an owner trained: a digest of its content (at most
-- 128 bytes, the caller's) and the class it was trained as, so training it again is no
-- double count. Bounded per owner by the caller's `records_max`: past it the oldest go.
CREATE TABLE spam_trained (
    owner BIGINT NOT NULL REFERENCES spam_owners (id) ON DELETE CASCADE,
    digest VARCHAR(128) NOT NULL,
    class VARCHAR(4) NOT NULL CHECK (class IN ('spam', 'ham')),
    -- Unix seconds.
    trained_at BIGINT NOT NULL,
    PRIMARY KEY (owner, digest)
);
CREATE INDEX spam_trained_age ON spam_trained (owner, trained_at);

-- `spam_reputation`: one row per sender key a user's training and mail have counted (the
-- caller's keys, at most 320 bytes: a From address, an authenticated domain, a network),
-- with its spam and ham counts. A row at 0/0 is deleted. Bounded per owner by the caller's
-- `rows_max`: past it the least recently seen go.
CREATE TABLE spam_reputation (
    owner BIGINT NOT NULL REFERENCES spam_owners (id) ON DELETE CASCADE,
    reputation_key VARCHAR(320) NOT NULL,
    spam BIGINT NOT NULL CHECK (spam >= 0),
    ham BIGINT NOT NULL CHECK (ham >= 0),
    -- Unix seconds.
    seen_at BIGINT NOT NULL,
    PRIMARY KEY (owner, reputation_key)
);
CREATE INDEX spam_reputation_age ON spam_reputation (owner, seen_at);

-- Score thresholds overriding `[spam]`'s, per domain and per user (`mailstow spam set`); NULL
-- = not overridden here (a user's falls back to its domain's, field by field). A row with
-- every field NULL is deleted. Directory changes: read into the cache, so a change bumps the
-- generation. Rows go with their domain or user, and a user's follows a rename. At most one
-- row per domain and per user.
CREATE TABLE spam_domain_thresholds (
    domain VARCHAR(255) NOT NULL PRIMARY KEY REFERENCES domains (name) ON DELETE CASCADE,
    junk DOUBLE PRECISION NULL,
    reject DOUBLE PRECISION NULL,
    greylist DOUBLE PRECISION NULL
);
CREATE TABLE spam_user_thresholds (
    address VARCHAR(254) NOT NULL PRIMARY KEY REFERENCES users (address) ON DELETE CASCADE,
    junk DOUBLE PRECISION NULL,
    reject DOUBLE PRECISION NULL,
    greylist DOUBLE PRECISION NULL
);

-- `spam_greylist`: one row per greylisting triplet (RFC 6647 4.2; the caller's hash of the
-- client network, sender and recipient, at most 64 bytes). `passed` 0: temporarily refused
-- since `first_seen_at`, until `expires_at` (24 hours after); 1: retried after the delay, so
-- it passes until `expires_at` (the caller's pass time-to-live after its last pass). A row
-- past `expires_at` counts as never seen. Not per user, and not a directory change. Bounded by
-- the caller's `greylist_entries_max`: past it the rows nearest their expiry go first.
CREATE TABLE spam_greylist (
    triplet VARCHAR(64) NOT NULL PRIMARY KEY,
    first_seen_at BIGINT NOT NULL,
    passed BIGINT NOT NULL CHECK (passed IN (0, 1)),
    expires_at BIGINT NOT NULL
);
CREATE INDEX spam_greylist_expiry ON spam_greylist (expires_at);
-- `spam_greylist_count`: one row, the number of rows of `spam_greylist`, written in the same
-- transaction as its inserts and deletions (`Directory::greylist`).
CREATE TABLE spam_greylist_count (
    entries BIGINT NOT NULL CHECK (entries >= 0)
);
INSERT INTO spam_greylist_count (entries) VALUES (0);
