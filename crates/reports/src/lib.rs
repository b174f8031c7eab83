//! TLS-RPT (RFC 8460) and DMARC aggregate (RFC 7489 7.2) reports, sent and received
//! (issue 39), over the directory's report tables (`directory::reports`), which bound them.
//!
//! The server counts as it goes: each outbound SMTP session with
//! [`Reporter::record_tls`], each received message with a DMARC policy with
//! [`Reporter::record_dmarc`]. Then, periodically:
//!
//! - [`Reporter::due`] builds the reports of every finished UTC day not yet sent, one per
//!   domain and day, addressed to the `rua` the domain publishes at report time
//!   (`_smtp._tls` or `_dmarc`, through a [`TxtResolver`]). The server puts each message in
//!   its queue (signed with DKIM like any of its mail: RFC 8460 5.3 asks for it), then calls
//!   [`Reporter::mark_sent`]. A report whose message was queued but not marked (a crash in
//!   between) is built again with the same report ID, so its receiver can tell.
//! - [`Reporter::ingest`] takes a message delivered to a report address, recognises a DMARC
//!   or a TLS-RPT report in it (mail-auth's parsers), bounded, and stores it;
//!   [`Reporter::list`] and [`Reporter::show`] are what the CLI and the admin pages show.
//!
//! The reports are mail-auth's types and its generators and parsers: the JSON of RFC 8460 4,
//! the XML of RFC 7489 appendix C (gzipped), the messages of RFC 8460 5.3 and RFC 7489
//! 7.2.1.1. What this crate adds: the aggregation from the counters, the recipients (and RFC
//! 7489 7.1's verification of an external one), and the bounds on what comes in.
//!
//! Not supported: `https:` report URIs of TLS-RPT (RFC 8460 3: POSTing is one of two ways; a
//! domain that publishes only an `https:` URI gets no report from us), and DMARC failure
//! reports (`ruf`).

mod dns;
mod incoming;
mod outgoing;
mod show;

#[cfg(test)]
mod tests;

use directory::{Directory, DirectoryError, DmarcKey, TlsSessionKey};

pub use directory::{
    REPORT_BYTES_MAX, REPORT_ROWS_PER_DAY_MAX, REPORTS_KEPT_MAX, ReceivedReport, ReportKind,
    SentReport,
};
pub use dns::{DnsError, TxtResolver};
pub use incoming::{ATTACHMENTS_MAX, DECOMPRESSED_BYTES_MAX, MESSAGE_BYTES_MAX, ZIP_ENTRIES_MAX};
pub use outgoing::{COUNTERS_KEPT_DAYS, DUE_REPORTS_MAX, OutgoingReport};

/// A received report as the CLI and the admin pages list it.
pub type ReceivedRow = ReceivedReport;

/// What can go wrong. Bad input is an error, never a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Directory(#[from] DirectoryError),
    /// `Config` cannot be used.
    #[error("invalid report configuration: {0}")]
    Config(String),
    /// A message longer than [`MESSAGE_BYTES_MAX`].
    #[error("the message is {bytes} bytes, more than the {max} a report may have")]
    MessageTooLarge { bytes: usize, max: usize },
    /// A message with no DMARC or TLS-RPT report in it.
    #[error("no DMARC or TLS-RPT report in the message: {0}")]
    NotAReport(String),
    /// A report that could not be read: bad compression, a decompressed size past
    /// [`DECOMPRESSED_BYTES_MAX`], too many attachments or archive entries, bad XML or JSON.
    #[error("unreadable report: {0}")]
    Unreadable(String),
    /// A report about a domain that is not ours.
    #[error("a report about {0}, which is not one of our domains")]
    NotOurDomain(String),
    /// A report could not be built (an address mail-builder refused, ...).
    #[error("building the report for {domain}: {reason}")]
    Build { domain: String, reason: String },
}

/// Who we are in the reports we send.
#[derive(Clone, Debug)]
pub struct Config {
    /// Our organization's name (RFC 8460 4.4 `organization-name`, RFC 7489 `org_name`).
    pub org_name: String,
    /// The reporting MTA's host name: the `Submitter` of the subject (RFC 8460 5.3, RFC 7489
    /// 7.2.1.1) and the domain of our report IDs.
    pub submitter: String,
    /// The reports' From address, also their contact (RFC 8460 4.4 `contact-info`, RFC 7489
    /// `email`): a mailbox of one of our domains, so the reports are signed with its key.
    pub from: String,
    /// Distinct counter keys kept per kind and day (`directory::record_tls_result`).
    pub rows_per_day_max: usize,
    /// Received reports kept: past it the oldest go.
    pub reports_kept_max: usize,
}

impl Config {
    /// Our name and address with the default bounds.
    pub fn new(org_name: &str, submitter: &str, from: &str) -> Config {
        Config {
            org_name: org_name.to_owned(),
            submitter: submitter.trim_end_matches('.').to_ascii_lowercase(),
            from: from.to_owned(),
            rows_per_day_max: REPORT_ROWS_PER_DAY_MAX,
            reports_kept_max: REPORTS_KEPT_MAX,
        }
    }

    fn check(&self) -> Result<(), Error> {
        let printable =
            |s: &str| !s.is_empty() && s.len() <= 255 && !s.chars().any(char::is_control);
        if !printable(&self.org_name) {
            return Err(Error::Config("org_name: 1 to 255 printable bytes".into()));
        }
        if !printable(&self.submitter) || self.submitter.contains([' ', '@']) {
            return Err(Error::Config("submitter: a host name".into()));
        }
        let address = self.from.split_once('@');
        if !printable(&self.from)
            || self.from.contains([' ', '<', '>', ','])
            || !address.is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        {
            return Err(Error::Config("from: an address, local@domain".into()));
        }
        Ok(())
    }
}

/// The reports of one server: its directory, its resolver, and who it is.
pub struct Reporter<R> {
    directory: Directory,
    resolver: R,
    config: Config,
}

impl<R: TxtResolver> Reporter<R> {
    pub fn new(directory: Directory, resolver: R, config: Config) -> Result<Reporter<R>, Error> {
        config.check()?;
        Ok(Reporter {
            directory,
            resolver,
            config,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counts one outbound SMTP session at `now` (Unix seconds) for its day's TLS-RPT report.
    pub async fn record_tls(&self, now: i64, key: &TlsSessionKey) -> Result<(), Error> {
        let max = self.config.rows_per_day_max;
        Ok(self.directory.record_tls_result(now, key, max).await?)
    }

    /// Counts one received message with a DMARC policy at `now` (Unix seconds) for its day's
    /// aggregate report.
    pub async fn record_dmarc(&self, now: i64, key: &DmarcKey) -> Result<(), Error> {
        let max = self.config.rows_per_day_max;
        Ok(self.directory.record_dmarc(now, key, max).await?)
    }

    /// Records that `report` was put in the queue at `now` (Unix seconds): it is not built
    /// again.
    pub async fn mark_sent(&self, report: &OutgoingReport, now: i64) -> Result<(), Error> {
        self.directory
            .mark_report_sent(&SentReport {
                kind: report.kind,
                domain: report.domain.clone(),
                day: report.day,
                report_id: report.report_id.clone(),
                sent_at: now,
                rua: report.recipients.clone(),
                bytes: report.message.len() as u64,
            })
            .await?;
        Ok(())
    }

    /// The received reports, newest first: at most `limit`, of one kind or both.
    pub async fn list(
        &self,
        kind: Option<ReportKind>,
        limit: usize,
    ) -> Result<Vec<ReceivedRow>, Error> {
        Ok(self.directory.received_reports(kind, limit).await?)
    }

    /// The reports we sent (and the domains that asked for none), newest day first.
    pub async fn sent(
        &self,
        kind: Option<ReportKind>,
        limit: usize,
    ) -> Result<Vec<SentReport>, Error> {
        Ok(self.directory.reports_sent(kind, limit).await?)
    }

    /// One received report as text: what it is about and each of its rows.
    pub async fn show(&self, id: i64) -> Result<Option<String>, Error> {
        let Some((row, json)) = self.directory.received_report(id).await? else {
            return Ok(None);
        };
        Ok(Some(show::render(&row, &json)))
    }
}
