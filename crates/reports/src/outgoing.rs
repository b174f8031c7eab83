//! The reports we send: one per kind, domain and finished UTC day, built from the directory's
//! counters with mail-auth's types, to the `rua` the domain publishes.

use std::collections::BTreeMap;

use directory::{
    Counted, DAY_S, DmarcDisposition, DmarcKey, ReportKind, SentReport, TlsPolicyType,
    TlsSessionKey,
};
use mail_auth::report::tlsrpt::{
    DateRange, FailureDetails, Policy, PolicyDetails, PolicyType, ResultType, Summary, TlsReport,
};
use mail_auth::report::{
    ActionDisposition, Alignment, DKIMAuthResult, Disposition, DkimResult, DmarcResult, Record,
    Report, SPFAuthResult, SPFDomainScope, SpfResult,
};

use crate::dns::{self, Destination, DnsError};
use crate::{Error, Reporter, TxtResolver};

/// Days of counters kept (and of sent records): a day whose report could not go out (DNS
/// failing) is tried again until then, and `mailstow report` shows what went.
pub const COUNTERS_KEPT_DAYS: i64 = 7;

/// Reports one call of [`Reporter::due`] builds at most: the rest wait for the next call, so
/// one call's memory and DNS lookups stay bounded however many domains were counted.
pub const DUE_REPORTS_MAX: usize = 500;

/// A report to send: the caller queues `message` from `from` to `recipients`, then calls
/// [`Reporter::mark_sent`].
#[derive(Clone, PartialEq, Eq)]
pub struct OutgoingReport {
    pub kind: ReportKind,
    /// The domain the report is about (and whose `rua` it goes to).
    pub domain: String,
    /// The UTC day it covers (days since the Unix epoch).
    pub day: i64,
    pub report_id: String,
    /// The envelope and header sender.
    pub from: String,
    pub recipients: Vec<String>,
    /// The whole RFC 5322 message.
    pub message: Vec<u8>,
}

impl std::fmt::Debug for OutgoingReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutgoingReport")
            .field("kind", &self.kind)
            .field("domain", &self.domain)
            .field("day", &self.day)
            .field("report_id", &self.report_id)
            .field("from", &self.from)
            .field("recipients", &self.recipients)
            .field("message_bytes", &self.message.len())
            .finish()
    }
}

/// `YYYY-MM-DD` of a UTC day.
pub(crate) fn date(day: i64) -> String {
    let dt = mail_parser::DateTime::from_timestamp(day.saturating_mul(DAY_S));
    format!("{:04}-{:02}-{:02}", dt.year, dt.month, dt.day)
}

/// Our report ID for a domain and day: the same every time it is built, so a report built
/// again after a crash is recognisably the same one. A name too long for the column gives
/// way to a hash of it.
fn report_id(kind: ReportKind, domain: &str, day: i64, submitter: &str) -> String {
    let id = format!("{}.{kind}.{domain}@{submitter}", date(day));
    if id.len() <= directory::REPORT_NAME_BYTES_MAX {
        return id;
    }
    // FNV-1a: a stable short name, not a secret.
    let hash = domain.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let id = format!("{}.{kind}.{hash:016x}@{submitter}", date(day));
    id.chars().take(directory::REPORT_NAME_BYTES_MAX).collect()
}

fn saturated(count: u64) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

fn policy_type(policy_type: TlsPolicyType) -> PolicyType {
    match policy_type {
        TlsPolicyType::Sts => PolicyType::Sts,
        TlsPolicyType::Tlsa => PolicyType::Tlsa,
        TlsPolicyType::NoPolicyFound => PolicyType::NoPolicyFound,
    }
}

/// An RFC 8460 4.3 result type by name; one mail-auth does not know is `Other`.
pub(crate) fn result_type(name: &str) -> ResultType {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).unwrap_or_default()
}

/// RFC 8460 4: the report of one domain's sessions of one day. Sessions under one policy
/// make one `policies` entry: its summary, and a failure detail per result type, MX host and
/// address.
pub(crate) fn tls_report(
    rows: &[Counted<TlsSessionKey>],
    org_name: &str,
    contact: &str,
    report_id: &str,
    day: i64,
) -> TlsReport {
    let mut policies: BTreeMap<(TlsPolicyType, &[String]), Vec<&Counted<TlsSessionKey>>> =
        BTreeMap::new();
    for row in rows {
        let key = (row.key.policy_type, row.key.policy_strings.as_slice());
        policies.entry(key).or_default().push(row);
    }
    let policies = policies
        .into_iter()
        .map(|((kind, strings), rows)| {
            let mut details =
                PolicyDetails::new(policy_type(kind), rows[0].key.policy_domain.clone());
            details.policy_string = strings.to_vec();
            let mut mx_hosts: Vec<String> = rows
                .iter()
                .map(|r| r.key.mx_host.clone())
                .filter(|h| !h.is_empty())
                .collect();
            mx_hosts.sort();
            mx_hosts.dedup();
            details.mx_host = mx_hosts;
            let (mut success, mut failure) = (0u64, 0u64);
            let mut failure_details = Vec::new();
            for row in &rows {
                match &row.key.failure {
                    None => success = success.saturating_add(row.count),
                    Some(name) => {
                        failure = failure.saturating_add(row.count);
                        let mut detail = FailureDetails::new(result_type(name));
                        if detail.result_type == ResultType::Other {
                            detail = detail.with_failure_reason_code(name.clone());
                        }
                        if !row.key.mx_host.is_empty() {
                            detail = detail.with_receiving_mx_hostname(row.key.mx_host.clone());
                        }
                        if let Some(ip) = row.key.receiving_ip {
                            detail = detail.with_receiving_ip(ip);
                        }
                        detail.failed_session_count = saturated(row.count);
                        failure_details.push(detail);
                    }
                }
            }
            Policy {
                policy: details,
                summary: Summary {
                    total_success: saturated(success),
                    total_failure: saturated(failure),
                },
                failure_details,
            }
        })
        .collect();
    let begin = day.saturating_mul(DAY_S);
    TlsReport {
        organization_name: Some(org_name.to_owned()),
        // RFC 8460 4.4: the whole UTC day, as its example writes it.
        date_range: DateRange::from_timestamps(begin, begin + DAY_S - 1),
        contact_info: Some(contact.to_owned()),
        report_id: report_id.to_owned(),
        policies,
    }
}

fn disposition(d: DmarcDisposition) -> Disposition {
    match d {
        DmarcDisposition::None => Disposition::None,
        DmarcDisposition::Quarantine => Disposition::Quarantine,
        DmarcDisposition::Reject => Disposition::Reject,
    }
}

fn action(d: DmarcDisposition) -> ActionDisposition {
    match d {
        DmarcDisposition::None => ActionDisposition::None,
        DmarcDisposition::Quarantine => ActionDisposition::Quarantine,
        DmarcDisposition::Reject => ActionDisposition::Reject,
    }
}

fn alignment(strict: bool) -> Alignment {
    if strict {
        Alignment::Strict
    } else {
        Alignment::Relaxed
    }
}

fn dmarc_result(pass: bool) -> DmarcResult {
    if pass {
        DmarcResult::Pass
    } else {
        DmarcResult::Fail
    }
}

/// RFC 7489 appendix C `DKIMResultType`.
fn dkim_result(name: &str) -> DkimResult {
    match name {
        "pass" => DkimResult::Pass,
        "fail" => DkimResult::Fail,
        "policy" => DkimResult::Policy,
        "neutral" => DkimResult::Neutral,
        "temperror" => DkimResult::TempError,
        "permerror" => DkimResult::PermError,
        _ => DkimResult::None,
    }
}

/// RFC 7489 appendix C `SPFResultType`.
fn spf_result(name: &str) -> SpfResult {
    match name {
        "pass" => SpfResult::Pass,
        "fail" => SpfResult::Fail,
        "softfail" => SpfResult::SoftFail,
        "neutral" => SpfResult::Neutral,
        "temperror" => SpfResult::TempError,
        "permerror" => SpfResult::PermError,
        _ => SpfResult::None,
    }
}

/// RFC 7489 7.2 and appendix C: the aggregate report of one domain's messages of one day.
/// The policy published is the one most messages saw (a policy changed during the day shows
/// in one report, with the other's rows).
pub(crate) fn dmarc_report(
    rows: &[Counted<DmarcKey>],
    domain: &str,
    org_name: &str,
    email: &str,
    report_id: &str,
    day: i64,
) -> Report {
    let begin = u64::try_from(day.saturating_mul(DAY_S)).unwrap_or(0);
    let mut by_policy: BTreeMap<_, u64> = BTreeMap::new();
    for row in rows {
        *by_policy.entry(row.key.policy).or_default() += row.count;
    }
    let policy = by_policy
        .into_iter()
        .max_by_key(|(_, count)| *count)
        .map(|(policy, _)| policy);
    let mut report = Report::new()
        .with_version(1.0)
        .with_org_name(org_name)
        .with_email(email)
        .with_report_id(report_id)
        .with_date_range_begin(begin)
        .with_date_range_end(begin + DAY_S as u64 - 1)
        .with_domain(domain);
    if let Some(policy) = policy {
        report = report
            .with_p(disposition(policy.p))
            .with_sp(disposition(policy.sp))
            .with_adkim(alignment(policy.adkim_strict))
            .with_aspf(alignment(policy.aspf_strict))
            .with_testing(policy.testing);
    }
    for row in rows {
        let key = &row.key;
        let mut record = Record::new()
            .with_source_ip(key.source_ip)
            .with_count(saturated(row.count))
            .with_action_disposition(action(key.disposition))
            .with_dmarc_dkim_result(dmarc_result(key.dkim_aligned))
            .with_dmarc_spf_result(dmarc_result(key.spf_aligned))
            .with_header_from(key.header_from.as_str())
            .with_envelope_from(key.envelope_from.as_str());
        if !key.dkim_domain.is_empty() {
            record = record.with_dkim_auth_result(
                DKIMAuthResult::new()
                    .with_domain(key.dkim_domain.as_str())
                    .with_selector(key.dkim_selector.as_str())
                    .with_result(dkim_result(&key.dkim_result)),
            );
        }
        let scope = if key.spf_helo {
            SPFDomainScope::Helo
        } else {
            SPFDomainScope::MailFrom
        };
        record = record.with_spf_auth_result(
            SPFAuthResult::new()
                .with_domain(key.spf_domain.as_str())
                .with_scope(scope)
                .with_result(spf_result(&key.spf_result)),
        );
        report.add_record(record);
    }
    report
}

/// The destinations that take a report of `bytes`: RFC 7489 6.2's size limit (`!10m`).
fn taking(destinations: Vec<Destination>, bytes: usize) -> Vec<String> {
    destinations
        .into_iter()
        .filter(|d| d.size_max == 0 || bytes <= d.size_max)
        .map(|d| d.address)
        .collect()
}

impl<R: TxtResolver> Reporter<R> {
    /// The reports due at `now` (Unix seconds): for each kind, each finished UTC day with
    /// counters, each domain counted that day with no report recorded as sent, the report,
    /// addressed to the `rua` the domain publishes now. At most [`DUE_REPORTS_MAX`]. A domain
    /// that asks for no report (no record, no `mailto:` destination) is recorded as sent with
    /// no recipient and not asked again; one whose DNS fails now is left for the next call.
    /// Counters older than [`COUNTERS_KEPT_DAYS`] are pruned first.
    pub async fn due(&self, now: i64) -> Result<Vec<OutgoingReport>, Error> {
        let today = directory::day_of(now);
        self.directory
            .prune_report_days(today - COUNTERS_KEPT_DAYS)
            .await?;
        let mut due = Vec::new();
        for kind in [ReportKind::TlsRpt, ReportKind::Dmarc] {
            for day in self.directory.report_days(kind).await? {
                if day.day >= today {
                    continue;
                }
                for domain in self.directory.report_domains(kind, day.day).await? {
                    if due.len() >= DUE_REPORTS_MAX {
                        return Ok(due);
                    }
                    if self
                        .directory
                        .report_sent(kind, &domain, day.day)
                        .await?
                        .is_some()
                    {
                        continue;
                    }
                    if let Some(report) = self.build(kind, &domain, day.day, now).await? {
                        due.push(report);
                    }
                }
            }
        }
        Ok(due)
    }

    /// One domain's report of one day, or `None` when it needs none or DNS cannot say now.
    async fn build(
        &self,
        kind: ReportKind,
        domain: &str,
        day: i64,
        now: i64,
    ) -> Result<Option<OutgoingReport>, Error> {
        let config = &self.config;
        let id = report_id(kind, domain, day, &config.submitter);
        let destinations = match kind {
            ReportKind::TlsRpt => dns::tlsrpt_destinations(&self.resolver, domain).await,
            ReportKind::Dmarc => dns::dmarc_destinations(&self.resolver, domain).await,
        };
        let destinations = match destinations {
            Ok(destinations) => destinations,
            Err(DnsError::NotFound) => Vec::new(),
            Err(DnsError::Temporary(_)) => return Ok(None),
        };
        let build_error = |e: std::io::Error| Error::Build {
            domain: domain.to_owned(),
            reason: e.to_string(),
        };
        let message = if destinations.is_empty() {
            None
        } else {
            let to = destinations.iter().map(|d| d.address.as_str());
            Some(match kind {
                ReportKind::TlsRpt => {
                    let rows = self.directory.tls_results(day, domain).await?;
                    let report = tls_report(&rows, &config.org_name, &config.from, &id, day);
                    // RFC 8460 5.3: multipart/report; report-type=tlsrpt, the gzipped JSON,
                    // TLS-Report-Domain and TLS-Report-Submitter, the subject.
                    report
                        .to_rfc5322(domain, &config.submitter, config.from.as_str(), to)
                        .map_err(build_error)?
                }
                ReportKind::Dmarc => {
                    let rows = self.directory.dmarc_records(day, domain).await?;
                    let report =
                        dmarc_report(&rows, domain, &config.org_name, &config.from, &id, day);
                    // RFC 7489 7.2.1.1: the gzipped XML, the subject.
                    report
                        .to_rfc5322(&config.submitter, config.from.as_str(), to)
                        .map_err(build_error)?
                }
            })
        };
        let recipients = message
            .as_ref()
            .map(|m| taking(destinations, m.len()))
            .unwrap_or_default();
        let (Some(message), false) = (message, recipients.is_empty()) else {
            // Nothing to send: remembered, so the domain is not looked up again for the day.
            self.directory
                .mark_report_sent(&SentReport {
                    kind,
                    domain: domain.to_owned(),
                    day,
                    report_id: id,
                    sent_at: now,
                    rua: Vec::new(),
                    bytes: 0,
                })
                .await?;
            return Ok(None);
        };
        Ok(Some(OutgoingReport {
            kind,
            domain: domain.to_owned(),
            day,
            report_id: id,
            from: config.from.clone(),
            recipients,
            message: message.into_bytes(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_report_ids() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(20_000), "2024-10-04");
        assert_eq!(
            report_id(ReportKind::Dmarc, "example.com", 20_000, "mx.example.org"),
            "2024-10-04.dmarc.example.com@mx.example.org"
        );
        let long = format!("{}.example", "a".repeat(250));
        let id = report_id(ReportKind::TlsRpt, &long, 20_000, "mx.example.org");
        assert!(id.len() <= directory::REPORT_NAME_BYTES_MAX, "{id}");
        assert_eq!(
            id,
            report_id(ReportKind::TlsRpt, &long, 20_000, "mx.example.org")
        );
    }

    #[test]
    fn result_types_by_name() {
        assert_eq!(
            result_type("certificate-expired"),
            ResultType::CertificateExpired
        );
        assert_eq!(
            result_type("starttls-not-supported"),
            ResultType::StartTlsNotSupported
        );
        assert_eq!(result_type("something-new"), ResultType::Other);
    }
}
