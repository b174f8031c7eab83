-- mailstow directory, schema version 2: IMAP subscriptions (RFC 9051 6.3.7).
--
-- A subscription is a name, not a folder: it may outlive the folder it names (RFC 9051
-- 6.3.8), so there is no link to the store. Rows go with their user.
CREATE TABLE subscriptions (
    address VARCHAR(254) NOT NULL REFERENCES users (address) ON DELETE CASCADE,
    mailbox VARCHAR(1024) NOT NULL,
    PRIMARY KEY (address, mailbox)
);
