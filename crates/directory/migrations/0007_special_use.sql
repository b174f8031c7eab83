-- mailstow directory, schema version 7: special-use folders a client named (RFC 6154 3,
-- CREATE-SPECIAL-USE: `CREATE "Sent Items" (USE (\Sent))`).
--
-- One row per folder and attribute. Folders named like the defaults (Sent, Drafts, Trash,
-- Junk, Archive) carry their attribute without a row. Rows follow the folder's RENAME and
-- go with its DELETE (the IMAP session asks), and go with their user.
CREATE TABLE special_use (
    address VARCHAR(254) NOT NULL REFERENCES users (address) ON DELETE CASCADE,
    mailbox VARCHAR(1024) NOT NULL,
    attribute VARCHAR(16) NOT NULL,
    PRIMARY KEY (address, mailbox, attribute)
);
