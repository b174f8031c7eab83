//! Reports others send about our domains: recognised, bounded, parsed by mail-auth, stored.
//!
//! mail-auth caps each decompressed attachment or archive entry (its `max_size`, here
//! [`DECOMPRESSED_BYTES_MAX`]; a declared size past it is refused before reading), but it
//! tries every binary part and every entry of a zip archive in turn. A zip whose entries all
//! point at one compressed stream (the overlapping-entries bomb) would make it inflate the
//! cap once per entry, tens of thousands of times from a small message. So before mail-auth
//! sees a message, its binary parts are counted ([`ATTACHMENTS_MAX`]) and every zip archive's
//! entries too ([`ZIP_ENTRIES_MAX`]): the most one message can cost is
//! `ATTACHMENTS_MAX * ZIP_ENTRIES_MAX * DECOMPRESSED_BYTES_MAX` bytes inflated.

use std::io::Cursor;

use directory::{ReceivedReport, ReportKind};
use mail_auth::report::tlsrpt::TlsReport;
use mail_auth::report::{DmarcResult, Report};
use mail_auth::zip::ZipArchive;
use mail_parser::{MessageParser, MimeHeaders, PartType};

use crate::{Error, Reporter, TxtResolver};

/// Longest report message taken: a day's aggregate report of a large domain, compressed, is
/// well under it.
pub const MESSAGE_BYTES_MAX: usize = 4 << 20;

/// Most bytes one attachment or archive entry may decompress to (mail-auth's `max_size`).
pub const DECOMPRESSED_BYTES_MAX: usize = 16 << 20;

/// Most binary parts a report message may have (a report has one).
pub const ATTACHMENTS_MAX: usize = 4;

/// Most entries a zipped report may have (a report has one file).
pub const ZIP_ENTRIES_MAX: usize = 4;

/// Which report a message holds, from its form: RFC 8460 5.3's `multipart/report;
/// report-type=tlsrpt`, its `TLS-Report-Domain` field or an `application/tlsrpt+...`
/// attachment make it a TLS-RPT report, anything else is read as a DMARC report. Refuses a
/// message past the attachment and archive bounds.
fn inspect(message: &[u8]) -> Result<(ReportKind, Option<String>), Error> {
    let parsed = MessageParser::new()
        .parse(message)
        .ok_or_else(|| Error::NotAReport("not a message".into()))?;
    let domain = parsed
        .header_raw("TLS-Report-Domain")
        .map(|d| d.trim().to_ascii_lowercase());
    let mut tls = domain.is_some();
    let mut binaries = 0;
    for part in &parsed.parts {
        if let Some(ct) = part.content_type() {
            let subtype = ct.subtype().unwrap_or_default();
            let report_type = ct
                .attributes()
                .unwrap_or_default()
                .iter()
                .find(|a| a.name.eq_ignore_ascii_case("report-type"))
                .map(|a| a.value.as_ref());
            tls |= ct.ctype().eq_ignore_ascii_case("multipart")
                && subtype.eq_ignore_ascii_case("report")
                && report_type.is_some_and(|t| t.eq_ignore_ascii_case("tlsrpt"));
            tls |= ct.ctype().eq_ignore_ascii_case("application")
                && subtype.to_ascii_lowercase().starts_with("tlsrpt+");
        }
        if let PartType::Binary(body) | PartType::InlineBinary(body) = &part.body {
            binaries += 1;
            if binaries > ATTACHMENTS_MAX {
                return Err(Error::Unreadable(format!(
                    "more than {ATTACHMENTS_MAX} attachments"
                )));
            }
            if let Ok(archive) = ZipArchive::new(Cursor::new(body.as_ref()))
                && archive.len() > ZIP_ENTRIES_MAX
            {
                return Err(Error::Unreadable(format!(
                    "a zip archive of {} entries, more than {ZIP_ENTRIES_MAX}",
                    archive.len()
                )));
            }
        }
    }
    let kind = if tls {
        ReportKind::TlsRpt
    } else {
        ReportKind::Dmarc
    };
    Ok((kind, domain))
}

fn unreadable(error: mail_auth::report::Error) -> Error {
    use mail_auth::report::Error as E;
    match error {
        E::MailParseError => Error::NotAReport("not a message".into()),
        E::NoReportsFound => Error::NotAReport("no report attachment".into()),
        E::ReportTooLarge => Error::Unreadable(format!(
            "decompresses to more than {DECOMPRESSED_BYTES_MAX} bytes"
        )),
        E::UncompressError(e) => Error::Unreadable(format!("decompressing: {e}")),
        E::ReportParseError(e) => Error::Unreadable(e),
    }
}

/// A parsed report, its summary and its stored form.
pub(crate) struct Parsed {
    pub summary: ReceivedReport,
    pub json: String,
}

fn clamp(unix_s: u64) -> i64 {
    i64::try_from(unix_s).unwrap_or(i64::MAX)
}

/// The JSON of `value`, cut by `shrink` (half its rows each time) until it fits
/// [`directory::REPORT_BYTES_MAX`]; the summary keeps the counts of the whole report.
fn fitted<T: serde::Serialize>(
    mut value: T,
    mut shrink: impl FnMut(&mut T) -> bool,
) -> Result<String, Error> {
    loop {
        let json = serde_json::to_string(&value)
            .map_err(|e| Error::Unreadable(format!("storing the report: {e}")))?;
        if json.len() <= directory::REPORT_BYTES_MAX {
            return Ok(json);
        }
        if !shrink(&mut value) {
            return Err(Error::Unreadable(format!(
                "the report is larger than {} bytes even without its rows",
                directory::REPORT_BYTES_MAX
            )));
        }
    }
}

/// Halves a list; false when it is empty.
fn halve<T>(rows: &mut Vec<T>) -> bool {
    if rows.is_empty() {
        return false;
    }
    rows.truncate(rows.len() / 2);
    true
}

/// A DMARC aggregate report's summary: messages, and those that failed DMARC (neither DKIM
/// nor SPF an aligned pass, RFC 7489 appendix C `policy_evaluated`).
pub(crate) fn parse_dmarc(message: &[u8], now: i64) -> Result<Parsed, Error> {
    let report = Report::parse_rfc5322(message, DECOMPRESSED_BYTES_MAX).map_err(unreadable)?;
    let (mut total, mut failed) = (0u64, 0u64);
    for record in report.records() {
        let count = u64::from(record.count());
        total = total.saturating_add(count);
        if record.dmarc_dkim_result() != DmarcResult::Pass
            && record.dmarc_spf_result() != DmarcResult::Pass
        {
            failed = failed.saturating_add(count);
        }
    }
    if report.report_id().is_empty() {
        return Err(Error::Unreadable("a DMARC report with no report_id".into()));
    }
    let summary = ReceivedReport {
        id: 0,
        kind: ReportKind::Dmarc,
        org: report.org_name().to_owned(),
        report_id: report.report_id().to_owned(),
        domain: report.domain().trim_end_matches('.').to_ascii_lowercase(),
        begin: clamp(report.date_range_begin()),
        end: clamp(report.date_range_end()),
        received_at: now,
        total,
        failed,
    };
    let json = fitted(report, |r| halve(&mut r.record))?;
    Ok(Parsed { summary, json })
}

/// A TLS-RPT report's summary: sessions, and failed sessions (RFC 8460 4.4 `summary`).
pub(crate) fn parse_tls(
    message: &[u8],
    header_domain: Option<String>,
    now: i64,
) -> Result<Parsed, Error> {
    let report = TlsReport::parse_rfc5322(message, DECOMPRESSED_BYTES_MAX).map_err(unreadable)?;
    let (mut total, mut failed) = (0u64, 0u64);
    for policy in &report.policies {
        let success = u64::from(policy.summary.total_success);
        let failure = u64::from(policy.summary.total_failure);
        total = total.saturating_add(success).saturating_add(failure);
        failed = failed.saturating_add(failure);
    }
    if report.report_id.is_empty() {
        return Err(Error::Unreadable(
            "a TLS-RPT report with no report-id".into(),
        ));
    }
    let domain = report
        .policies
        .first()
        .map(|p| {
            p.policy
                .policy_domain
                .trim_end_matches('.')
                .to_ascii_lowercase()
        })
        .or(header_domain)
        .unwrap_or_default();
    let summary = ReceivedReport {
        id: 0,
        kind: ReportKind::TlsRpt,
        org: report.organization_name.clone().unwrap_or_default(),
        report_id: report.report_id.clone(),
        domain,
        begin: report.date_range.start_datetime.to_timestamp(),
        end: report.date_range.end_datetime.to_timestamp(),
        received_at: now,
        total,
        failed,
    };
    let json = fitted(report, |r| {
        // The failure details first, then whole policies.
        let detailed = r
            .policies
            .iter_mut()
            .find(|p| !p.failure_details.is_empty());
        match detailed {
            Some(policy) => halve(&mut policy.failure_details),
            None => halve(&mut r.policies),
        }
    })?;
    Ok(Parsed { summary, json })
}

impl<R: TxtResolver> Reporter<R> {
    /// Takes a message delivered to a report address at `now` (Unix seconds): a DMARC
    /// aggregate report (XML, gzipped or zipped) or a TLS-RPT report (JSON, gzipped), about
    /// one of our domains (or a name under one), is stored and its summary returned; the same
    /// report again is `None`. A message longer than [`MESSAGE_BYTES_MAX`], past the
    /// attachment and archive bounds, decompressing past [`DECOMPRESSED_BYTES_MAX`], with no
    /// report, or with an unreadable one is an error, and nothing is stored.
    pub async fn ingest(&self, message: &[u8], now: i64) -> Result<Option<ReceivedReport>, Error> {
        if message.len() > MESSAGE_BYTES_MAX {
            return Err(Error::MessageTooLarge {
                bytes: message.len(),
                max: MESSAGE_BYTES_MAX,
            });
        }
        let (kind, header_domain) = inspect(message)?;
        let parsed = match kind {
            ReportKind::TlsRpt => parse_tls(message, header_domain, now)?,
            ReportKind::Dmarc => parse_dmarc(message, now)?,
        };
        if !self.is_ours(&parsed.summary.domain) {
            return Err(Error::NotOurDomain(parsed.summary.domain));
        }
        let kept_max = self.config.reports_kept_max;
        let id = self
            .directory
            .add_received_report(&parsed.summary, &parsed.json, kept_max)
            .await?;
        Ok(id.map(|id| ReceivedReport {
            id,
            ..parsed.summary
        }))
    }

    /// Whether `domain` or a domain it is under is one of ours.
    fn is_ours(&self, domain: &str) -> bool {
        let cache = self.directory.cache();
        let mut name = domain;
        loop {
            if !name.is_empty() && cache.is_local_domain(name) {
                return true;
            }
            match name.split_once('.') {
                Some((_, parent)) => name = parent,
                None => return false,
            }
        }
    }
}
