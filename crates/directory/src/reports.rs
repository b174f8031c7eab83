//! TLS-RPT (RFC 8460) and DMARC aggregate (RFC 7489 7.2) reports (issue 39): the counters the
//! reports we send are built from, which reports went, and the reports others sent us. The
//! reports themselves (building, parsing, sending) are the `reports` crate's; this is storage.
//!
//! None of it is a directory change: nothing here bumps the generation or reaches the cache.
//! Every table is bounded:
//!
//! - the counters (`report_tls_results`, `report_dmarc_records`) by the caller's
//!   `rows_per_day_max` distinct keys per day, checked against the count `report_days` keeps
//!   (written in the same transaction as the rows, so no call counts a table); a new key past
//!   it is added to the day's `overflow` count, never stored, so a flood of distinct senders
//!   or hosts cannot grow the tables. Old days go with [`Directory::prune_report_days`];
//! - `reports_sent` has one row per reported domain and day, which the counters bound, and
//!   goes with its day;
//! - `reports_received` by the caller's `reports_kept_max` rows (the oldest go first, counted
//!   by `reports_received_count`), each at most [`REPORT_BYTES_MAX`].
//!
//! A counter's first statement writes its day's `report_days` row: on SQLite that takes the
//! write lock, on PostgreSQL that row's lock. So the calls for one day take turns on every node
//! of a cluster, and checking the bound, then adding a row, is safe.

use std::net::IpAddr;
use std::str::FromStr;

use blake2::{Blake2s256, Digest};
use sqlx::{AnyConnection, AssertSqlSafe, Row as _};

use crate::error::shown;
use crate::spam::excess;
use crate::{Directory, DirectoryError, db};

/// Seconds in a UTC day: counters are kept per day since the Unix epoch (leap seconds are not
/// counted by Unix time).
pub const DAY_S: i64 = 86_400;

/// Received reports kept by default (`reports_kept_max`): past it the oldest go.
pub const REPORTS_KEPT_MAX: usize = 10_000;

/// Distinct counter keys kept per kind and day by default (`rows_per_day_max`): past it a new
/// key is only counted in the day's overflow.
pub const REPORT_ROWS_PER_DAY_MAX: usize = 50_000;

/// Longest stored form (JSON) of a received report: a report is counts, a larger one is
/// refused rather than cut.
pub const REPORT_BYTES_MAX: usize = 1 << 20;

/// Longest text of one MTA-STS or TLSA policy as counted (its strings joined by line feeds):
/// an MTA-STS policy is a few lines (RFC 8461 3.2), a TLSA set a few records.
pub const POLICY_STRINGS_BYTES_MAX: usize = 8 * 1024;

/// Longest name, report ID or organization name stored (`VARCHAR(255)`).
pub const REPORT_NAME_BYTES_MAX: usize = 255;

/// Longest TLS-RPT result type (RFC 8460 4.3) or DKIM/SPF result word.
const RESULT_BYTES_MAX: usize = 64;

/// Longest DKIM selector (one DNS label).
const SELECTOR_BYTES_MAX: usize = 63;

/// Most rows one listing returns, whatever limit the caller asks for.
pub const REPORT_LIST_MAX: usize = 10_000;

/// Which report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReportKind {
    /// SMTP TLS Reporting (RFC 8460).
    TlsRpt,
    /// DMARC aggregate report (RFC 7489 7.2).
    Dmarc,
}

impl ReportKind {
    /// The stored and shown name: `tlsrpt` or `dmarc`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::TlsRpt => "tlsrpt",
            ReportKind::Dmarc => "dmarc",
        }
    }
}

impl std::fmt::Display for ReportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReportKind {
    type Err = DirectoryError;

    fn from_str(s: &str) -> Result<ReportKind, DirectoryError> {
        match s {
            "tlsrpt" => Ok(ReportKind::TlsRpt),
            "dmarc" => Ok(ReportKind::Dmarc),
            other => Err(invalid("kind", other, "use tlsrpt or dmarc")),
        }
    }
}

/// RFC 8460 4.4 `policy-type`: the policy an outbound session was held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TlsPolicyType {
    /// MTA-STS (RFC 8461).
    Sts,
    /// DANE (RFC 7672).
    Tlsa,
    NoPolicyFound,
}

impl TlsPolicyType {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsPolicyType::Sts => "sts",
            TlsPolicyType::Tlsa => "tlsa",
            TlsPolicyType::NoPolicyFound => "no-policy-found",
        }
    }
}

impl FromStr for TlsPolicyType {
    type Err = DirectoryError;

    fn from_str(s: &str) -> Result<TlsPolicyType, DirectoryError> {
        match s {
            "sts" => Ok(TlsPolicyType::Sts),
            "tlsa" => Ok(TlsPolicyType::Tlsa),
            "no-policy-found" => Ok(TlsPolicyType::NoPolicyFound),
            other => Err(invalid(
                "policy type",
                other,
                "use sts, tlsa or no-policy-found",
            )),
        }
    }
}

/// What one outbound SMTP session is counted under (RFC 8460 4.4).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TlsSessionKey {
    /// The recipient domain whose policy applied.
    pub policy_domain: String,
    pub policy_type: TlsPolicyType,
    /// The policy's strings (RFC 8460 4.4 `policy-string`): the MTA-STS policy's lines, or
    /// the TLSA records; none for `no-policy-found`. None may hold a line feed.
    pub policy_strings: Vec<String>,
    /// The MX host the session was with.
    pub mx_host: String,
    /// Its address, when one was reached.
    pub receiving_ip: Option<IpAddr>,
    /// `None`: TLS was negotiated as the policy asked. Otherwise the RFC 8460 4.3 result
    /// type (`certificate-expired`, `starttls-not-supported`, ...).
    pub failure: Option<String>,
}

/// A counter as stored: a key and how many sessions or messages it counted on its day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counted<K> {
    pub day: i64,
    pub key: K,
    pub count: u64,
}

/// A DMARC disposition (RFC 7489 6.3 `p`, `sp`; appendix C `DispositionType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DmarcDisposition {
    None,
    Quarantine,
    Reject,
}

impl DmarcDisposition {
    pub fn as_str(self) -> &'static str {
        match self {
            DmarcDisposition::None => "none",
            DmarcDisposition::Quarantine => "quarantine",
            DmarcDisposition::Reject => "reject",
        }
    }
}

impl FromStr for DmarcDisposition {
    type Err = DirectoryError;

    fn from_str(s: &str) -> Result<DmarcDisposition, DirectoryError> {
        match s {
            "none" => Ok(DmarcDisposition::None),
            "quarantine" => Ok(DmarcDisposition::Quarantine),
            "reject" => Ok(DmarcDisposition::Reject),
            other => Err(invalid(
                "disposition",
                other,
                "use none, quarantine or reject",
            )),
        }
    }
}

/// The DMARC policy as the domain published it when the message came (RFC 7489 appendix C
/// `PolicyPublishedType`; `testing` is DMARCbis's `t=y`, which replaced `pct`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DmarcPolicyPublished {
    pub p: DmarcDisposition,
    pub sp: DmarcDisposition,
    /// `adkim=s`.
    pub adkim_strict: bool,
    /// `aspf=s`.
    pub aspf_strict: bool,
    pub testing: bool,
}

/// What one received message with a DMARC policy is counted under (RFC 7489 appendix C
/// `RecordType`). Strings are empty where there was nothing (no DKIM signature).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DmarcKey {
    /// The domain whose policy applied, to which the report goes.
    pub policy_domain: String,
    pub source_ip: IpAddr,
    /// What we did with the message.
    pub disposition: DmarcDisposition,
    /// DMARC's DKIM and SPF results: an aligned pass (RFC 7489 3.1).
    pub dkim_aligned: bool,
    pub spf_aligned: bool,
    /// The RFC 5322.From domain.
    pub header_from: String,
    /// The RFC 5321.MailFrom domain.
    pub envelope_from: String,
    /// One DKIM signature's domain, selector and result (`pass`, `fail`, `none`, ...).
    pub dkim_domain: String,
    pub dkim_selector: String,
    pub dkim_result: String,
    /// The SPF check's domain and result, and whether it was HELO's (else MAIL FROM's).
    pub spf_domain: String,
    pub spf_helo: bool,
    pub spf_result: String,
    pub policy: DmarcPolicyPublished,
}

/// A report counters' day: how many distinct keys it holds, and how many sessions or messages
/// came past its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportDay {
    pub kind: ReportKind,
    pub day: i64,
    pub keys: u64,
    pub overflow: u64,
}

/// A report we built for one domain and day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentReport {
    pub kind: ReportKind,
    pub domain: String,
    pub day: i64,
    pub report_id: String,
    /// Unix seconds.
    pub sent_at: i64,
    /// The addresses it went to; empty when the domain asks for no report.
    pub rua: Vec<String>,
    pub bytes: u64,
}

/// A report another organization sent about one of our domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedReport {
    /// Given when stored; ignored by [`Directory::add_received_report`].
    pub id: i64,
    pub kind: ReportKind,
    pub org: String,
    pub report_id: String,
    pub domain: String,
    /// The period it covers, Unix seconds.
    pub begin: i64,
    pub end: i64,
    /// When it came, Unix seconds.
    pub received_at: i64,
    /// TLS-RPT: sessions; DMARC: messages.
    pub total: u64,
    /// TLS-RPT: failed sessions; DMARC: messages that failed DMARC (neither aligned pass).
    pub failed: u64,
}

fn invalid(what: &'static str, value: &str, reason: &'static str) -> DirectoryError {
    DirectoryError::InvalidReportField {
        what,
        value: shown(value),
        reason,
    }
}

/// A text field that fits its column and holds no control character.
fn check_text(what: &'static str, value: &str, bytes_max: usize) -> Result<(), DirectoryError> {
    if value.len() > bytes_max {
        return Err(invalid(what, value, "too long"));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid(what, value, "holds a control character"));
    }
    Ok(())
}

/// A field that must not be empty either.
fn check_name(what: &'static str, value: &str, bytes_max: usize) -> Result<(), DirectoryError> {
    if value.is_empty() {
        return Err(invalid(what, value, "empty"));
    }
    check_text(what, value, bytes_max)
}

/// A result word: lower-case letters, digits and hyphens (RFC 8460 4.3 result types, RFC
/// 8601 result values).
fn check_word(what: &'static str, value: &str) -> Result<(), DirectoryError> {
    let word = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    if value.is_empty() || value.len() > RESULT_BYTES_MAX || !value.bytes().all(word) {
        return Err(invalid(
            what,
            value,
            "use lower-case letters, digits and hyphens",
        ));
    }
    Ok(())
}

/// A hash of the fields of a key, each preceded by its length so no two keys collide by
/// moving text between fields; hex, 64 characters.
fn key_hash(fields: &[&str]) -> String {
    let mut hasher = Blake2s256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// The UTC day of a Unix time.
pub fn day_of(unix_s: i64) -> i64 {
    unix_s.div_euclid(DAY_S)
}

fn ip_text(ip: Option<IpAddr>) -> String {
    ip.map(|ip| ip.to_string()).unwrap_or_default()
}

fn stored_u64(what: &str, value: i64) -> Result<u64, DirectoryError> {
    u64::try_from(value).map_err(|_| DirectoryError::Corrupt(format!("{what} is {value}")))
}

fn stored_ip(what: &str, value: &str) -> Result<Option<IpAddr>, DirectoryError> {
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| DirectoryError::Corrupt(format!("{what} {}", shown(value))))
}

fn flag(value: bool) -> &'static str {
    if value { "1" } else { "0" }
}

fn dmarc_result(aligned: bool) -> &'static str {
    if aligned { "pass" } else { "fail" }
}

impl TlsSessionKey {
    fn check(&self) -> Result<String, DirectoryError> {
        check_name("policy domain", &self.policy_domain, REPORT_NAME_BYTES_MAX)?;
        check_text("MX host", &self.mx_host, REPORT_NAME_BYTES_MAX)?;
        if let Some(failure) = &self.failure {
            check_word("result type", failure)?;
            if failure == "success" {
                return Err(invalid("result type", failure, "success is no failure"));
            }
        }
        let mut strings = String::new();
        for (n, line) in self.policy_strings.iter().enumerate() {
            if line.contains('\n') {
                return Err(invalid("policy string", line, "holds a line feed"));
            }
            if n > 0 {
                strings.push('\n');
            }
            strings.push_str(line);
        }
        if strings.len() > POLICY_STRINGS_BYTES_MAX {
            return Err(invalid("policy strings", &strings, "too long"));
        }
        Ok(strings)
    }
}

impl DmarcKey {
    fn check(&self) -> Result<(), DirectoryError> {
        check_name("policy domain", &self.policy_domain, REPORT_NAME_BYTES_MAX)?;
        check_text(
            "header From domain",
            &self.header_from,
            REPORT_NAME_BYTES_MAX,
        )?;
        check_text(
            "envelope From domain",
            &self.envelope_from,
            REPORT_NAME_BYTES_MAX,
        )?;
        check_text("DKIM domain", &self.dkim_domain, REPORT_NAME_BYTES_MAX)?;
        check_text("DKIM selector", &self.dkim_selector, SELECTOR_BYTES_MAX)?;
        check_word("DKIM result", &self.dkim_result)?;
        check_text("SPF domain", &self.spf_domain, REPORT_NAME_BYTES_MAX)?;
        check_word("SPF result", &self.spf_result)?;
        Ok(())
    }

    /// Every column of the key but the policy domain's, as stored, in the order of
    /// [`DMARC_COLUMNS`] after it.
    fn columns(&self) -> [String; 15] {
        let policy = &self.policy;
        [
            self.source_ip.to_string(),
            self.disposition.as_str().into(),
            dmarc_result(self.dkim_aligned).into(),
            dmarc_result(self.spf_aligned).into(),
            self.header_from.clone(),
            self.envelope_from.clone(),
            self.dkim_domain.clone(),
            self.dkim_selector.clone(),
            self.dkim_result.clone(),
            self.spf_domain.clone(),
            if self.spf_helo { "helo" } else { "mfrom" }.into(),
            self.spf_result.clone(),
            policy.p.as_str().into(),
            policy.sp.as_str().into(),
            if policy.adkim_strict { "s" } else { "r" }.into(),
        ]
    }
}

/// The key columns of `report_dmarc_records` after `policy_domain`, in the order of
/// [`DmarcKey::columns`], then `policy_aspf` and `policy_testing`.
const DMARC_COLUMNS: &str = "source_ip, disposition, dmarc_dkim, dmarc_spf, header_from, \
     envelope_from, dkim_domain, dkim_selector, dkim_result, spf_domain, spf_scope, \
     spf_result, policy_p, policy_sp, policy_adkim, policy_aspf, policy_testing";

/// Locks the day's `report_days` row (made if new) for the rest of the transaction and
/// returns its key count. Must be the transaction's first statement.
async fn lock_day(
    conn: &mut AnyConnection,
    kind: ReportKind,
    day: i64,
) -> Result<i64, DirectoryError> {
    sqlx::query(
        "INSERT INTO report_days (kind, day, key_count, overflow) VALUES ($1, $2, 0, 0) \
         ON CONFLICT (kind, day) DO NOTHING",
    )
    .bind(kind.as_str())
    .bind(day)
    .execute(&mut *conn)
    .await?;
    let keys: i64 = sqlx::query_scalar(
        "UPDATE report_days SET key_count = key_count WHERE kind = $1 AND day = $2 \
         RETURNING key_count",
    )
    .bind(kind.as_str())
    .bind(day)
    .fetch_one(&mut *conn)
    .await?;
    Ok(keys)
}

/// Where one more of a key is counted.
#[derive(Debug, PartialEq, Eq)]
enum Slot {
    /// Its row existed and counts one more.
    Counted,
    /// A new key within the day's bound: the caller inserts its row, then [`add_key`].
    New,
    /// A new key past the bound: counted in the day's overflow.
    Overflow,
}

/// Counts one more of `key_hash` if its row exists, else decides where the new key goes.
/// Must be the transaction's first call (it locks the day).
async fn count_existing(
    conn: &mut AnyConnection,
    kind: ReportKind,
    day: i64,
    key_hash: &str,
    rows_per_day_max: usize,
) -> Result<Slot, DirectoryError> {
    let keys = lock_day(conn, kind, day).await?;
    let (table, column) = match kind {
        ReportKind::TlsRpt => ("report_tls_results", "sessions"),
        ReportKind::Dmarc => ("report_dmarc_records", "messages"),
    };
    let sql =
        format!("UPDATE {table} SET {column} = {column} + 1 WHERE day = $1 AND key_hash = $2");
    let updated = sqlx::query(AssertSqlSafe(sql))
        .bind(day)
        .bind(key_hash)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if updated > 0 {
        return Ok(Slot::Counted);
    }
    if excess(keys + 1, rows_per_day_max) == 0 {
        return Ok(Slot::New);
    }
    sqlx::query("UPDATE report_days SET overflow = overflow + 1 WHERE kind = $1 AND day = $2")
        .bind(kind.as_str())
        .bind(day)
        .execute(&mut *conn)
        .await?;
    Ok(Slot::Overflow)
}

/// Counts the row a [`Slot::New`] key was given.
async fn add_key(
    conn: &mut AnyConnection,
    kind: ReportKind,
    day: i64,
) -> Result<(), DirectoryError> {
    sqlx::query("UPDATE report_days SET key_count = key_count + 1 WHERE kind = $1 AND day = $2")
        .bind(kind.as_str())
        .bind(day)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl Directory {
    /// Counts one outbound SMTP session at `now` (Unix seconds) for the TLS-RPT report of its
    /// UTC day (RFC 8460 4). Past `rows_per_day_max` distinct keys that day, a new key is
    /// only counted in the day's overflow.
    pub async fn record_tls_result(
        &self,
        now: i64,
        key: &TlsSessionKey,
        rows_per_day_max: usize,
    ) -> Result<(), DirectoryError> {
        let strings = key.check()?;
        let day = day_of(now);
        let ip = ip_text(key.receiving_ip);
        let result = key.failure.as_deref().unwrap_or("success");
        let policy_type = key.policy_type.as_str();
        let hash = key_hash(&[
            &key.policy_domain,
            policy_type,
            &strings,
            &key.mx_host,
            &ip,
            result,
        ]);
        let mut tx = self.inner.pool.begin().await?;
        let slot = count_existing(&mut tx, ReportKind::TlsRpt, day, &hash, rows_per_day_max);
        if slot.await? == Slot::New {
            sqlx::query(
                "INSERT INTO report_tls_results (day, key_hash, policy_domain, policy_type, \
                 policy_strings, mx_host, receiving_ip, result_type, sessions) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1)",
            )
            .bind(day)
            .bind(&hash)
            .bind(&key.policy_domain)
            .bind(policy_type)
            .bind(&strings)
            .bind(&key.mx_host)
            .bind(&ip)
            .bind(result)
            .execute(&mut *tx)
            .await?;
            add_key(&mut tx, ReportKind::TlsRpt, day).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Counts one received message with a DMARC policy at `now` (Unix seconds) for the
    /// aggregate report of its UTC day (RFC 7489 7.2). Past `rows_per_day_max` distinct keys
    /// that day, a new key is only counted in the day's overflow.
    pub async fn record_dmarc(
        &self,
        now: i64,
        key: &DmarcKey,
        rows_per_day_max: usize,
    ) -> Result<(), DirectoryError> {
        key.check()?;
        let day = day_of(now);
        let columns = key.columns();
        let aspf = if key.policy.aspf_strict { "s" } else { "r" };
        let testing = flag(key.policy.testing);
        let mut fields: Vec<&str> = vec![&key.policy_domain];
        fields.extend(columns.iter().map(String::as_str));
        fields.extend([aspf, testing]);
        let hash = key_hash(&fields);
        let mut tx = self.inner.pool.begin().await?;
        let slot = count_existing(&mut tx, ReportKind::Dmarc, day, &hash, rows_per_day_max);
        if slot.await? == Slot::New {
            let sql = format!(
                "INSERT INTO report_dmarc_records (day, key_hash, policy_domain, \
                 {DMARC_COLUMNS}, messages) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
                 $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, 1)"
            );
            let mut query = sqlx::query(AssertSqlSafe(sql))
                .bind(day)
                .bind(&hash)
                .bind(&key.policy_domain);
            for column in &columns {
                query = query.bind(column.as_str());
            }
            query
                .bind(aspf)
                .bind(i64::from(key.policy.testing))
                .execute(&mut *tx)
                .await?;
            add_key(&mut tx, ReportKind::Dmarc, day).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The days that hold counters of `kind`, oldest first.
    pub async fn report_days(&self, kind: ReportKind) -> Result<Vec<ReportDay>, DirectoryError> {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT day, key_count, overflow FROM report_days WHERE kind = $1 ORDER BY day",
        )
        .bind(kind.as_str())
        .fetch_all(&self.inner.pool)
        .await?;
        rows.into_iter()
            .map(|(day, keys, overflow)| {
                Ok(ReportDay {
                    kind,
                    day,
                    keys: stored_u64("report_days.key_count", keys)?,
                    overflow: stored_u64("report_days.overflow", overflow)?,
                })
            })
            .collect()
    }

    /// The policy domains with counters of `kind` on `day`, sorted.
    pub async fn report_domains(
        &self,
        kind: ReportKind,
        day: i64,
    ) -> Result<Vec<String>, DirectoryError> {
        let table = match kind {
            ReportKind::TlsRpt => "report_tls_results",
            ReportKind::Dmarc => "report_dmarc_records",
        };
        let sql = format!(
            "SELECT DISTINCT policy_domain FROM {table} WHERE day = $1 ORDER BY policy_domain"
        );
        Ok(sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(day)
            .fetch_all(&self.inner.pool)
            .await?)
    }

    /// The TLS-RPT counters of one policy domain on `day`.
    pub async fn tls_results(
        &self,
        day: i64,
        policy_domain: &str,
    ) -> Result<Vec<Counted<TlsSessionKey>>, DirectoryError> {
        type Row = (String, String, String, String, String, i64);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT policy_type, policy_strings, mx_host, receiving_ip, result_type, sessions \
             FROM report_tls_results WHERE day = $1 AND policy_domain = $2 ORDER BY key_hash",
        )
        .bind(day)
        .bind(policy_domain)
        .fetch_all(&self.inner.pool)
        .await?;
        let corrupt = |e: DirectoryError| DirectoryError::Corrupt(e.to_string());
        rows.into_iter()
            .map(|(policy_type, strings, mx_host, ip, result, sessions)| {
                let policy_strings = if strings.is_empty() {
                    Vec::new()
                } else {
                    strings.split('\n').map(str::to_owned).collect()
                };
                Ok(Counted {
                    day,
                    key: TlsSessionKey {
                        policy_domain: policy_domain.to_owned(),
                        policy_type: policy_type.parse().map_err(corrupt)?,
                        policy_strings,
                        mx_host,
                        receiving_ip: stored_ip("report_tls_results.receiving_ip", &ip)?,
                        failure: (result != "success").then_some(result),
                    },
                    count: stored_u64("report_tls_results.sessions", sessions)?,
                })
            })
            .collect()
    }

    /// The DMARC counters of one policy domain on `day`.
    pub async fn dmarc_records(
        &self,
        day: i64,
        policy_domain: &str,
    ) -> Result<Vec<Counted<DmarcKey>>, DirectoryError> {
        let sql = format!(
            "SELECT {DMARC_COLUMNS}, messages FROM report_dmarc_records \
             WHERE day = $1 AND policy_domain = $2 ORDER BY key_hash"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(day)
            .bind(policy_domain)
            .fetch_all(&self.inner.pool)
            .await?;
        let corrupt = |e: DirectoryError| DirectoryError::Corrupt(e.to_string());
        let mut counted = Vec::with_capacity(rows.len());
        for row in rows {
            // The 15 text columns of `DmarcKey::columns`, then aspf, testing, messages.
            let mut c: Vec<String> = Vec::with_capacity(16);
            for n in 0..16 {
                c.push(row.try_get(n)?);
            }
            let testing: i64 = row.try_get(16)?;
            let messages: i64 = row.try_get(17)?;
            let source_ip = stored_ip("report_dmarc_records.source_ip", &c[0])?
                .ok_or_else(|| DirectoryError::Corrupt("an empty DMARC source IP".into()))?;
            let mut c = c.into_iter().skip(1);
            let mut next = || c.next().unwrap_or_default();
            let disposition = next().parse().map_err(corrupt)?;
            let dkim_aligned = next() == "pass";
            let spf_aligned = next() == "pass";
            let header_from = next();
            let envelope_from = next();
            let dkim_domain = next();
            let dkim_selector = next();
            let dkim_result = next();
            let spf_domain = next();
            let spf_helo = next() == "helo";
            let spf_result = next();
            let policy = DmarcPolicyPublished {
                p: next().parse().map_err(corrupt)?,
                sp: next().parse().map_err(corrupt)?,
                adkim_strict: next() == "s",
                aspf_strict: next() == "s",
                testing: testing != 0,
            };
            counted.push(Counted {
                day,
                key: DmarcKey {
                    policy_domain: policy_domain.to_owned(),
                    source_ip,
                    disposition,
                    dkim_aligned,
                    spf_aligned,
                    header_from,
                    envelope_from,
                    dkim_domain,
                    dkim_selector,
                    dkim_result,
                    spf_domain,
                    spf_helo,
                    spf_result,
                    policy,
                },
                count: stored_u64("report_dmarc_records.messages", messages)?,
            });
        }
        Ok(counted)
    }

    /// The report of `kind` for `domain` and `day`, if one was recorded as sent.
    pub async fn report_sent(
        &self,
        kind: ReportKind,
        domain: &str,
        day: i64,
    ) -> Result<Option<SentReport>, DirectoryError> {
        let row: Option<SentRow> = sqlx::query_as(
            "SELECT kind, domain, day, report_id, sent_at, rua, bytes FROM reports_sent \
             WHERE kind = $1 AND domain = $2 AND day = $3",
        )
        .bind(kind.as_str())
        .bind(domain)
        .bind(day)
        .fetch_optional(&self.inner.pool)
        .await?;
        row.map(sent_report).transpose()
    }

    /// Records that a report was built and handed to the queue (or that the domain asks for
    /// none: `rua` empty), so it is not built again. Returns `false` when one was recorded
    /// already for its kind, domain and day (that one stays).
    pub async fn mark_report_sent(&self, report: &SentReport) -> Result<bool, DirectoryError> {
        check_name("domain", &report.domain, REPORT_NAME_BYTES_MAX)?;
        check_name("report ID", &report.report_id, REPORT_NAME_BYTES_MAX)?;
        for address in &report.rua {
            check_name("rua", address, REPORT_NAME_BYTES_MAX)?;
            if address.contains(',') {
                return Err(invalid("rua", address, "holds a comma"));
            }
        }
        let bytes = i64::try_from(report.bytes).unwrap_or(i64::MAX);
        let inserted = sqlx::query(
            "INSERT INTO reports_sent (kind, domain, day, report_id, sent_at, rua, bytes) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kind, domain, day) DO NOTHING",
        )
        .bind(report.kind.as_str())
        .bind(&report.domain)
        .bind(report.day)
        .bind(&report.report_id)
        .bind(report.sent_at)
        .bind(report.rua.join(","))
        .bind(bytes)
        .execute(&self.inner.pool)
        .await?;
        Ok(inserted.rows_affected() > 0)
    }

    /// The reports sent, newest day first: at most `limit` (and [`REPORT_LIST_MAX`]), of one
    /// kind or both.
    pub async fn reports_sent(
        &self,
        kind: Option<ReportKind>,
        limit: usize,
    ) -> Result<Vec<SentReport>, DirectoryError> {
        let limit = i64::try_from(limit.min(REPORT_LIST_MAX)).unwrap_or(0);
        let rows: Vec<SentRow> = sqlx::query_as(
            "SELECT kind, domain, day, report_id, sent_at, rua, bytes FROM reports_sent \
             WHERE $1 = '' OR kind = $1 ORDER BY day DESC, kind, domain LIMIT $2",
        )
        .bind(kind.map(ReportKind::as_str).unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.inner.pool)
        .await?;
        rows.into_iter().map(sent_report).collect()
    }

    /// Deletes the counters, day counts and sent records of the days before `day`; returns
    /// how many rows went.
    pub async fn prune_report_days(&self, day: i64) -> Result<u64, DirectoryError> {
        let mut tx = self.inner.pool.begin().await?;
        let mut deleted = 0;
        for table in [
            "report_days",
            "report_tls_results",
            "report_dmarc_records",
            "reports_sent",
        ] {
            let sql = format!("DELETE FROM {table} WHERE day < $1");
            deleted += sqlx::query(AssertSqlSafe(sql))
                .bind(day)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(deleted)
    }

    /// Stores a report received at `received_at` (Unix seconds) with its JSON form (at most
    /// [`REPORT_BYTES_MAX`]). Returns its id, or `None` when a report of the same kind,
    /// organization and report ID is stored already (a report sent twice is kept once).
    /// Past `reports_kept_max` reports, the oldest go.
    pub async fn add_received_report(
        &self,
        report: &ReceivedReport,
        json: &str,
        reports_kept_max: usize,
    ) -> Result<Option<i64>, DirectoryError> {
        check_text("organization", &report.org, REPORT_NAME_BYTES_MAX)?;
        check_name("report ID", &report.report_id, REPORT_NAME_BYTES_MAX)?;
        check_name("domain", &report.domain, REPORT_NAME_BYTES_MAX)?;
        if json.len() > REPORT_BYTES_MAX {
            return Err(invalid("body", json, "longer than REPORT_BYTES_MAX"));
        }
        let total = i64::try_from(report.total).unwrap_or(i64::MAX);
        let failed = i64::try_from(report.failed).unwrap_or(i64::MAX);
        let mut tx = self.inner.pool.begin().await?;
        // Locks the count (PostgreSQL), takes the write lock (SQLite): inserts take turns.
        let kept: i64 = sqlx::query_scalar(
            "UPDATE reports_received_count SET reports = reports RETURNING reports",
        )
        .fetch_one(&mut *tx)
        .await?;
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO reports_received (kind, org, report_id, domain, begin_at, end_at, \
             received_at, total, failed, report) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (kind, org, report_id) DO NOTHING RETURNING id",
        )
        .bind(report.kind.as_str())
        .bind(&report.org)
        .bind(&report.report_id)
        .bind(&report.domain)
        .bind(report.begin)
        .bind(report.end)
        .bind(report.received_at)
        .bind(total)
        .bind(failed)
        .bind(json)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = id else {
            tx.commit().await?;
            return Ok(None);
        };
        let excess = excess(kept + 1, reports_kept_max.max(1));
        let mut deleted = 0;
        if excess > 0 {
            let gone = sqlx::query(
                "DELETE FROM reports_received WHERE id IN \
                 (SELECT id FROM reports_received WHERE id <> $1 \
                  ORDER BY received_at, id LIMIT $2)",
            )
            .bind(id)
            .bind(excess)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            deleted = i64::try_from(gone).unwrap_or(i64::MAX);
        }
        sqlx::query("UPDATE reports_received_count SET reports = reports + 1 - $1")
            .bind(deleted)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(id))
    }

    /// The received reports, newest first: at most `limit` (and [`REPORT_LIST_MAX`]), of one
    /// kind or both.
    pub async fn received_reports(
        &self,
        kind: Option<ReportKind>,
        limit: usize,
    ) -> Result<Vec<ReceivedReport>, DirectoryError> {
        let limit = i64::try_from(limit.min(REPORT_LIST_MAX)).unwrap_or(0);
        let rows: Vec<ReceivedRow> = sqlx::query_as(
            "SELECT id, kind, org, report_id, domain, begin_at, end_at, received_at, total, \
             failed FROM reports_received WHERE $1 = '' OR kind = $1 \
             ORDER BY received_at DESC, id DESC LIMIT $2",
        )
        .bind(kind.map(ReportKind::as_str).unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.inner.pool)
        .await?;
        rows.into_iter().map(received_report).collect()
    }

    /// One received report and its JSON form.
    pub async fn received_report(
        &self,
        id: i64,
    ) -> Result<Option<(ReceivedReport, String)>, DirectoryError> {
        let mut tx = db::begin_read(&self.inner.pool).await?;
        let row: Option<ReceivedRow> = sqlx::query_as(
            "SELECT id, kind, org, report_id, domain, begin_at, end_at, received_at, total, \
             failed FROM reports_received WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let json: Option<String> =
            sqlx::query_scalar("SELECT report FROM reports_received WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        tx.commit().await?;
        match (row, json) {
            (Some(row), Some(json)) => Ok(Some((received_report(row)?, json))),
            _ => Ok(None),
        }
    }

    /// Deletes the received reports that came before `received_before` (Unix seconds);
    /// returns how many went.
    pub async fn prune_received_reports(
        &self,
        received_before: i64,
    ) -> Result<u64, DirectoryError> {
        let mut tx = self.inner.pool.begin().await?;
        let deleted = sqlx::query("DELETE FROM reports_received WHERE received_at < $1")
            .bind(received_before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE reports_received_count SET reports = reports - $1")
            .bind(i64::try_from(deleted).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }
}

type SentRow = (String, String, i64, String, i64, String, i64);

fn sent_report(row: SentRow) -> Result<SentReport, DirectoryError> {
    let (kind, domain, day, report_id, sent_at, rua, bytes) = row;
    Ok(SentReport {
        kind: kind
            .parse()
            .map_err(|e: DirectoryError| DirectoryError::Corrupt(e.to_string()))?,
        domain,
        day,
        report_id,
        sent_at,
        rua: rua
            .split(',')
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect(),
        bytes: stored_u64("reports_sent.bytes", bytes)?,
    })
}

type ReceivedRow = (i64, String, String, String, String, i64, i64, i64, i64, i64);

fn received_report(row: ReceivedRow) -> Result<ReceivedReport, DirectoryError> {
    let (id, kind, org, report_id, domain, begin, end, received_at, total, failed) = row;
    Ok(ReceivedReport {
        id,
        kind: kind
            .parse()
            .map_err(|e: DirectoryError| DirectoryError::Corrupt(e.to_string()))?,
        org,
        report_id,
        domain,
        begin,
        end,
        received_at,
        total: stored_u64("reports_received.total", total)?,
        failed: stored_u64("reports_received.failed", failed)?,
    })
}
