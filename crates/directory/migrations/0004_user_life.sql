-- mailstow directory, schema version 4: a message-count quota, the last login, and user
-- renames in progress.
--
-- `quota_messages`: NULL = unlimited (RFC 9208 5.2, the MESSAGE resource), like
-- `quota_bytes`.
-- `last_login_at`: Unix seconds of the user's last successful login by any protocol; written
-- at most once a minute per user, off the login's path, without bumping the generation (the
-- cache has no use for it).
ALTER TABLE users ADD COLUMN quota_messages BIGINT NULL CHECK (quota_messages >= 0);
ALTER TABLE users ADD COLUMN last_login_at BIGINT NULL;

-- `renamed_users`: `user rename` records its intent here before the store gives the old
-- address's folders to the new one, and deletes the row in the transaction that renames the
-- user, so a crash between the two steps is finished at the next start. While a row exists
-- neither address can be added, deleted or renamed again.
CREATE TABLE renamed_users (
    old_address VARCHAR(254) NOT NULL PRIMARY KEY,
    new_address VARCHAR(254) NOT NULL UNIQUE,
    -- Unix seconds.
    renamed_at BIGINT NOT NULL
);
