//! `mailstow report list|show|send`: the TLS-RPT (RFC 8460) and DMARC aggregate (RFC 7489
//! 7.2) reports others sent about our domains and the ones we sent, read from the directory
//! with or without a running server; `send` asks the running server to send the reports due.

use admin::Request;
use anyhow::{Result, bail};
use clap::Subcommand;
use directory::ReportKind;

use crate::directory_cmd::with_directory;
use crate::paths::Paths;

/// Reports listed when `--limit` is not given.
const LISTED_DEFAULT: usize = 1000;

#[derive(Subcommand)]
pub(crate) enum ReportCommand {
    /// Reports received (newest first), or with `--sent` the ones we sent: one line each,
    /// `ID KIND ORG DOMAIN BEGIN END SUMMARY`.
    List {
        /// Only `tlsrpt` or `dmarc` reports.
        #[arg(long, value_name = "tlsrpt|dmarc")]
        kind: Option<String>,
        /// The reports we sent (ID is the report ID, ORG `-`); a domain that asks for none
        /// shows `to=none`.
        #[arg(long)]
        sent: bool,
        /// At most this many.
        #[arg(long, default_value_t = LISTED_DEFAULT)]
        limit: usize,
    },
    /// A received report: what it is about, then one line per row.
    Show { id: i64 },
    /// Send the reports due now (the running server does so every hour).
    Send {
        /// Send as if it were this Unix time (for tests: the reports of days before it).
        #[arg(long, hide = true, value_name = "UNIX")]
        now: Option<i64>,
    },
}

/// The CLI's reporter looks nothing up: listing and showing need no DNS.
struct NoLookups;

impl reports::TxtResolver for NoLookups {
    async fn txt(&self, _name: &str) -> Result<Vec<String>, reports::DnsError> {
        Err(reports::DnsError::Temporary(
            "no lookups from the CLI".into(),
        ))
    }
}

fn reporter(directory: directory::Directory) -> Result<reports::Reporter<NoLookups>> {
    Ok(reports::Reporter::new(
        directory,
        NoLookups,
        reports::Config::new("mailstow", "localhost", "postmaster@localhost"),
    )?)
}

/// A Unix time as `YYYY-MM-DDTHH:MM:SSZ`.
fn time(unix_s: i64) -> String {
    chrono::DateTime::from_timestamp(unix_s, 0).map_or_else(
        || unix_s.to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

/// A name from a report as one column: no spaces, no control characters.
fn column(text: &str) -> String {
    if text.is_empty() {
        return "-".into();
    }
    text.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

pub(crate) fn run(command: ReportCommand, paths: &Paths) -> Result<()> {
    match command {
        ReportCommand::List { kind, sent, limit } => {
            let kind = kind
                .map(|k| k.parse::<ReportKind>())
                .transpose()
                .map_err(|e| anyhow::anyhow!("--kind: {e}"))?;
            let lines = with_directory(paths, async |d| {
                let reporter = reporter(d)?;
                let mut lines = Vec::new();
                if sent {
                    for r in reporter.sent(kind, limit).await? {
                        let begin = r.day.saturating_mul(directory::DAY_S);
                        let to = if r.rua.is_empty() {
                            "none".to_string()
                        } else {
                            r.rua.join(",")
                        };
                        lines.push(format!(
                            "{} {} - {} {} {} to={} bytes={} sent={}",
                            column(&r.report_id),
                            r.kind,
                            column(&r.domain),
                            time(begin),
                            time(begin + directory::DAY_S - 1),
                            column(&to),
                            r.bytes,
                            time(r.sent_at)
                        ));
                    }
                } else {
                    for r in reporter.list(kind, limit).await? {
                        let what = match r.kind {
                            ReportKind::TlsRpt => "sessions",
                            ReportKind::Dmarc => "messages",
                        };
                        lines.push(format!(
                            "{} {} {} {} {} {} {what}={} failed={} report_id={}",
                            r.id,
                            r.kind,
                            column(&r.org),
                            column(&r.domain),
                            time(r.begin),
                            time(r.end),
                            r.total,
                            r.failed,
                            column(&r.report_id)
                        ));
                    }
                }
                Ok(lines)
            })?;
            for line in lines {
                out!("{line}");
            }
            Ok(())
        }
        ReportCommand::Show { id } => {
            let text = with_directory(paths, async |d| Ok(reporter(d)?.show(id).await?))?;
            match text {
                Some(text) => {
                    use std::io::Write as _;
                    std::io::stdout().write_all(text.as_bytes())?;
                    Ok(())
                }
                None => bail!("no report {id}"),
            }
        }
        ReportCommand::Send { now } => {
            match admin::request(&paths.data_dir, &Request::ReportSend(now)) {
                Some(Ok(output)) => {
                    use std::io::Write as _;
                    std::io::stdout().write_all(&output)?;
                    Ok(())
                }
                Some(Err(message)) => bail!("{message}"),
                None => bail!(
                    "no server running in {}: reports are sent by the server (mailstow serve)",
                    paths.data_dir.display()
                ),
            }
        }
    }
}
