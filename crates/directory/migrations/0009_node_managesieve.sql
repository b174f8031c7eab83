-- mailstow directory, schema version 9: each cluster node's ManageSieve address (RFC 5804),
-- where the other nodes hand a ManageSieve login for one of its users. NULL: the node has
-- none registered (logins for its users elsewhere are answered "try later").
ALTER TABLE nodes ADD COLUMN managesieve VARCHAR(255);
