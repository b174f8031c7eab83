//! A received report as text (`mailstow report show`, the admin pages): what it is about,
//! then one line per row.

use std::fmt::Write as _;

use directory::{ReceivedReport, ReportKind};
use mail_auth::report::Report;
use mail_auth::report::tlsrpt::TlsReport;

/// Rows shown at most: the rest is counted in one line.
const SHOWN_ROWS_MAX: usize = 1_000;

/// A Unix time as `YYYY-MM-DDTHH:MM:SSZ`.
fn time(unix_s: i64) -> String {
    mail_parser::DateTime::from_timestamp(unix_s).to_rfc3339()
}

/// A name from a report, on one line whatever it holds.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The report's summary, then its rows from its stored JSON.
pub(crate) fn render(row: &ReceivedReport, json: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "id: {}", row.id);
    let _ = writeln!(text, "kind: {}", row.kind);
    let _ = writeln!(text, "from: {}", clean(&row.org));
    let _ = writeln!(text, "report id: {}", clean(&row.report_id));
    let _ = writeln!(text, "domain: {}", clean(&row.domain));
    let _ = writeln!(text, "period: {} to {}", time(row.begin), time(row.end));
    let _ = writeln!(text, "received: {}", time(row.received_at));
    let (what, failed) = match row.kind {
        ReportKind::TlsRpt => ("sessions", "failed"),
        ReportKind::Dmarc => ("messages", "failed DMARC"),
    };
    let _ = writeln!(text, "{what}: {}, {failed}: {}", row.total, row.failed);
    match row.kind {
        ReportKind::Dmarc => match serde_json::from_str::<Report>(json) {
            Ok(report) => dmarc_rows(&mut text, &report),
            Err(e) => {
                let _ = writeln!(text, "(stored report unreadable: {e})");
            }
        },
        ReportKind::TlsRpt => match serde_json::from_str::<TlsReport>(json) {
            Ok(report) => tls_rows(&mut text, &report),
            Err(e) => {
                let _ = writeln!(text, "(stored report unreadable: {e})");
            }
        },
    }
    text
}

fn dmarc_rows(text: &mut String, report: &Report) {
    let _ = writeln!(
        text,
        "policy: p={:?} sp={:?} adkim={:?} aspf={:?} testing={}",
        report.p(),
        report.sp(),
        report.adkim(),
        report.aspf(),
        report.testing()
    );
    let _ = writeln!(
        text,
        "{:<40} {:>8} {:<12} {:<5} {:<5} header_from",
        "source", "count", "disposition", "dkim", "spf"
    );
    for record in report.records().iter().take(SHOWN_ROWS_MAX) {
        let source = record
            .source_ip()
            .map(|ip| ip.to_string())
            .unwrap_or_else(|| "?".into());
        let _ = writeln!(
            text,
            "{:<40} {:>8} {:<12} {:<5} {:<5} {}",
            source,
            record.count(),
            format!("{:?}", record.action_disposition()).to_lowercase(),
            format!("{:?}", record.dmarc_dkim_result()).to_lowercase(),
            format!("{:?}", record.dmarc_spf_result()).to_lowercase(),
            clean(record.header_from())
        );
    }
    if report.records().len() > SHOWN_ROWS_MAX {
        let _ = writeln!(
            text,
            "... {} more rows",
            report.records().len() - SHOWN_ROWS_MAX
        );
    }
}

fn tls_rows(text: &mut String, report: &TlsReport) {
    let mut shown = 0;
    for policy in &report.policies {
        let details = &policy.policy;
        let _ = writeln!(
            text,
            "policy {:?} {}: {} successful, {} failed sessions",
            details.policy_type,
            clean(&details.policy_domain),
            policy.summary.total_success,
            policy.summary.total_failure
        );
        for detail in &policy.failure_details {
            shown += 1;
            if shown > SHOWN_ROWS_MAX {
                continue;
            }
            let _ = writeln!(
                text,
                "  {:?}: {} sessions, mx {}, ip {}{}",
                detail.result_type,
                detail.failed_session_count,
                clean(detail.receiving_mx_hostname.as_deref().unwrap_or("?")),
                detail
                    .receiving_ip
                    .map(|ip| ip.to_string())
                    .unwrap_or_else(|| "?".into()),
                detail
                    .failure_reason_code
                    .as_deref()
                    .map(|code| format!(", {}", clean(code)))
                    .unwrap_or_default()
            );
        }
    }
    if shown > SHOWN_ROWS_MAX {
        let _ = writeln!(text, "... {} more failure details", shown - SHOWN_ROWS_MAX);
    }
}
