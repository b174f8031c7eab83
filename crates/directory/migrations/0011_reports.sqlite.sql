-- mailstow directory, schema version 11 (SQLite variant): TLS-RPT (RFC 8460) and DMARC
-- aggregate (RFC 7489 7.2) reports, the ones we send and the ones we receive (issue 39).
-- Same tables as 0011_reports.postgres.sql; only `reports_received.id` differs (SQLite
-- numbers an `INTEGER PRIMARY KEY` itself, PostgreSQL needs an identity column).
--
-- None of this is a directory change: nothing here bumps the generation. `day` is a UTC
-- day, counted in days since the Unix epoch.
--
-- `report_days`: one row per kind ('tlsrpt', 'dmarc') and day with counters: the number of
-- rows `report_tls_results` or `report_dmarc_records` hold for that day (`key_count`, written in
-- the same transaction as those rows, so the per-day bound is checked without counting),
-- and the sessions or messages counted past that bound (`overflow`): a distinct key beyond
-- the caller's `*_rows_per_day_max` is counted here only, never reported.
CREATE TABLE report_days (
    kind VARCHAR(8) NOT NULL CHECK (kind IN ('tlsrpt', 'dmarc')),
    day BIGINT NOT NULL,
    key_count BIGINT NOT NULL CHECK (key_count >= 0),
    overflow BIGINT NOT NULL CHECK (overflow >= 0),
    PRIMARY KEY (kind, day)
);

-- `report_tls_results`: our outbound SMTP sessions of one day, counted per policy domain (the
-- recipient domain), policy (RFC 8460 4.4: 'sts', 'tlsa' or 'no-policy-found', and its
-- strings joined by line feeds), MX host, receiving IP ('' when none was reached) and result
-- ('success' or an RFC 8460 4.3 result type). `key_hash` is a hash of all of those, so the
-- key stays short whatever the policy's length.
CREATE TABLE report_tls_results (
    day BIGINT NOT NULL,
    key_hash VARCHAR(64) NOT NULL,
    policy_domain VARCHAR(255) NOT NULL,
    policy_type VARCHAR(16) NOT NULL CHECK (policy_type IN ('sts', 'tlsa', 'no-policy-found')),
    policy_strings TEXT NOT NULL,
    mx_host VARCHAR(255) NOT NULL,
    receiving_ip VARCHAR(45) NOT NULL,
    result_type VARCHAR(64) NOT NULL,
    sessions BIGINT NOT NULL CHECK (sessions > 0),
    PRIMARY KEY (day, key_hash)
);
CREATE INDEX report_tls_results_domain ON report_tls_results (day, policy_domain);

-- `report_dmarc_records`: the messages we received of one day that had a DMARC policy,
-- counted per policy domain, RFC 7489 appendix C `row` and `identifiers` (source IP,
-- disposition, the aligned DKIM and SPF results, header From domain, envelope From domain)
-- and `auth_results` (one DKIM domain, selector and result; the SPF domain, scope and
-- result), and the policy as published (p, sp, adkim, aspf, and t: testing, which replaced
-- pct). Empty strings where there was none. `key_hash` is a hash of all of those.
CREATE TABLE report_dmarc_records (
    day BIGINT NOT NULL,
    key_hash VARCHAR(64) NOT NULL,
    policy_domain VARCHAR(255) NOT NULL,
    source_ip VARCHAR(45) NOT NULL,
    disposition VARCHAR(16) NOT NULL CHECK (disposition IN ('none', 'quarantine', 'reject')),
    dmarc_dkim VARCHAR(4) NOT NULL CHECK (dmarc_dkim IN ('pass', 'fail')),
    dmarc_spf VARCHAR(4) NOT NULL CHECK (dmarc_spf IN ('pass', 'fail')),
    header_from VARCHAR(255) NOT NULL,
    envelope_from VARCHAR(255) NOT NULL,
    dkim_domain VARCHAR(255) NOT NULL,
    dkim_selector VARCHAR(63) NOT NULL,
    dkim_result VARCHAR(16) NOT NULL,
    spf_domain VARCHAR(255) NOT NULL,
    spf_scope VARCHAR(8) NOT NULL CHECK (spf_scope IN ('mfrom', 'helo')),
    spf_result VARCHAR(16) NOT NULL,
    policy_p VARCHAR(16) NOT NULL CHECK (policy_p IN ('none', 'quarantine', 'reject')),
    policy_sp VARCHAR(16) NOT NULL CHECK (policy_sp IN ('none', 'quarantine', 'reject')),
    policy_adkim VARCHAR(1) NOT NULL CHECK (policy_adkim IN ('r', 's')),
    policy_aspf VARCHAR(1) NOT NULL CHECK (policy_aspf IN ('r', 's')),
    policy_testing BIGINT NOT NULL CHECK (policy_testing IN (0, 1)),
    messages BIGINT NOT NULL CHECK (messages > 0),
    PRIMARY KEY (day, key_hash)
);
CREATE INDEX report_dmarc_records_domain ON report_dmarc_records (day, policy_domain);

-- `reports_sent`: one row per report we built for a domain and a day (RFC 8460 and RFC 7489
-- ask for one report per period), so each goes once: `report_id` as written in it, when it
-- was handed to the queue (Unix seconds), to whom (the `rua` addresses, comma-separated; ''
-- when the domain asks for no report, which is recorded too so it is not looked up again)
-- and its size. Pruned with the counters.
CREATE TABLE reports_sent (
    kind VARCHAR(8) NOT NULL CHECK (kind IN ('tlsrpt', 'dmarc')),
    domain VARCHAR(255) NOT NULL,
    day BIGINT NOT NULL,
    report_id VARCHAR(255) NOT NULL,
    sent_at BIGINT NOT NULL,
    rua TEXT NOT NULL,
    bytes BIGINT NOT NULL CHECK (bytes >= 0),
    PRIMARY KEY (kind, domain, day)
);

-- `reports_received`: one row per report others sent about our domains: who sent it
-- (`org`, its organization name) and its `report_id` (one row per pair: a report sent
-- twice is kept once), the domain it is about, the period it covers and when it came (Unix
-- seconds), its counts (TLS-RPT: sessions and failed sessions; DMARC: messages, and those
-- that failed DMARC) and the report itself as JSON (at most `REPORT_BYTES_MAX`). Bounded by
-- the caller's `reports_kept_max`: past it the oldest go, counted by
-- `reports_received_count`.
CREATE TABLE reports_received (
    id INTEGER PRIMARY KEY,
    kind VARCHAR(8) NOT NULL CHECK (kind IN ('tlsrpt', 'dmarc')),
    org VARCHAR(255) NOT NULL,
    report_id VARCHAR(255) NOT NULL,
    domain VARCHAR(255) NOT NULL,
    begin_at BIGINT NOT NULL,
    end_at BIGINT NOT NULL,
    received_at BIGINT NOT NULL,
    total BIGINT NOT NULL CHECK (total >= 0),
    failed BIGINT NOT NULL CHECK (failed >= 0),
    report TEXT NOT NULL,
    UNIQUE (kind, org, report_id)
);
CREATE INDEX reports_received_age ON reports_received (received_at, id);
-- `reports_received_count`: one row, the number of rows of `reports_received`, written in
-- the same transaction as its inserts and deletions.
CREATE TABLE reports_received_count (
    reports BIGINT NOT NULL CHECK (reports >= 0)
);
INSERT INTO reports_received_count (reports) VALUES (0);
