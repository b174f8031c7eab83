-- mailstow directory, schema version 3: users whose mail is still being removed, and DKIM
-- signing keys.
--
-- `deleted_users`: `user del` moves the address here in the same transaction that deletes
-- the user. The row stays until the store has durably removed the user's folders
-- (`Directory::purged`); while it exists, `user add` of the same address is refused, so a new
-- account can never see the old one's mail, even after a crash between the two steps.
CREATE TABLE deleted_users (
    address VARCHAR(254) NOT NULL PRIMARY KEY,
    -- Unix seconds.
    deleted_at BIGINT NOT NULL
);

-- DKIM keys (RFC 6376 3.1, RFC 8463). The newest key of a domain signs its outgoing mail;
-- older ones stay listed until deleted, so a rotation can keep the old DNS record published
-- while mail signed with it is still in flight. `private_key` is PKCS#8 PEM; `public_key` is
-- the base64 `p=` value of the DNS record.
CREATE TABLE dkim_keys (
    domain VARCHAR(255) NOT NULL REFERENCES domains (name),
    selector VARCHAR(63) NOT NULL,
    algorithm VARCHAR(16) NOT NULL,
    private_key TEXT NOT NULL,
    public_key TEXT NOT NULL,
    -- Unix seconds.
    created_at BIGINT NOT NULL,
    PRIMARY KEY (domain, selector)
);
