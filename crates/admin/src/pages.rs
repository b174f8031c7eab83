//! The web view's admin pages over this server: what they show ([`data`]) and what they do
//! ([`act`]). Every action runs the same code as its CLI command (the directory's writes,
//! `accounts::delete_user`, the admin socket's queue requests) and leaves one log line,
//! `event=admin`, naming the admin, the client address, the action (never a password) and
//! the outcome. The reports page only reads: the directory's report tables (what `mailstow
//! report list|show` prints) and the ACME directory (what `mailstow acme status` prints).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use directory::{Directory, ReportKind};
use web::{
    ADMIN_REPORTS_SHOWN_MAX, AdminAction, AdminCertificate, AdminData, AdminReceivedReport,
    AdminReportKind, AdminReports, AdminSentReport, AdminUser, AdminView, BackendError, Queued,
};

use crate::commands::Operations;
use crate::format::{format_deleted, format_show, human_bytes};
use crate::request::Request;
use store::Mailstore as _;
use telemetry::shown;

fn directory_down(e: directory::DirectoryError) -> BackendError {
    BackendError::Unavailable(format!("the directory: {e}"))
}

fn queue_error(e: queue::QueueError) -> BackendError {
    match e {
        queue::QueueError::UnknownMessage(_) => BackendError::NotFound,
        other => BackendError::Failed(other.to_string()),
    }
}

/// Whether the user's mailbox is in this node's store.
fn stored_here(ctx: &Operations, node: Option<&str>) -> bool {
    match (ctx.accounts.gate.node(), node) {
        (Some(here), Some(node)) => here == node,
        _ => true,
    }
}

fn reports_error(e: reports::Error) -> BackendError {
    match e {
        reports::Error::Directory(e) => directory_down(e),
        other => BackendError::Failed(other.to_string()),
    }
}

fn report_kind(kind: ReportKind) -> AdminReportKind {
    match kind {
        ReportKind::TlsRpt => AdminReportKind::TlsRpt,
        ReportKind::Dmarc => AdminReportKind::Dmarc,
    }
}

/// Unix seconds.
fn unix(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}

/// The reports page: the newest received and sent reports (one more asked for, to know
/// whether the list is cut), and the certificate in `acme_dir` at `now` (`renewing`: whether
/// this server has `[acme]`).
async fn reports_page(
    directory: &Directory,
    acme_dir: &Path,
    renewing: bool,
    now: SystemTime,
) -> Result<AdminReports, BackendError> {
    let mut received = directory
        .received_reports(None, ADMIN_REPORTS_SHOWN_MAX + 1)
        .await
        .map_err(directory_down)?;
    let received_more = received.len() > ADMIN_REPORTS_SHOWN_MAX;
    received.truncate(ADMIN_REPORTS_SHOWN_MAX);
    let mut sent = directory
        .reports_sent(None, ADMIN_REPORTS_SHOWN_MAX + 1)
        .await
        .map_err(directory_down)?;
    let sent_more = sent.len() > ADMIN_REPORTS_SHOWN_MAX;
    sent.truncate(ADMIN_REPORTS_SHOWN_MAX);
    let acme_dir = acme_dir.to_path_buf();
    let certificate = tokio::task::spawn_blocking(move || certificate(&acme_dir, renewing, now))
        .await
        .map_err(|e| BackendError::Failed(e.to_string()))?;
    Ok(AdminReports {
        received: received
            .into_iter()
            .map(|r| AdminReceivedReport {
                id: r.id,
                kind: report_kind(r.kind),
                org: r.org,
                report_id: r.report_id,
                domain: r.domain,
                begin: r.begin,
                end: r.end,
                total: r.total,
                failed: r.failed,
            })
            .collect(),
        received_more,
        sent: sent
            .into_iter()
            .map(|r| AdminSentReport {
                kind: report_kind(r.kind),
                domain: r.domain,
                day: r.day.saturating_mul(directory::DAY_S),
                recipients: r.rua,
                sent_at: r.sent_at,
            })
            .collect(),
        sent_more,
        certificate,
    })
}

/// The certificate ACME keeps in `acme_dir`, or [`AdminCertificate::Configured`] when there
/// is no such directory. Blocks (reads files).
fn certificate(acme_dir: &Path, renewing: bool, now: SystemTime) -> AdminCertificate {
    if !acme_dir.is_dir() {
        return AdminCertificate::Configured;
    }
    match acme::status(acme_dir, now) {
        Ok(status) => AdminCertificate::Acme {
            names: status.names,
            not_after: status.not_after.map(unix),
            days_left: status.days_left,
            last_error: status.last_error,
            consecutive_failures: status.consecutive_failures,
            next_attempt: status.next_attempt.map(unix),
            renewing,
        },
        Err(e) => AdminCertificate::Unreadable(e.to_string()),
    }
}

/// The admin pages' reporter looks nothing up: showing a report needs no DNS.
struct NoLookups;

impl reports::TxtResolver for NoLookups {
    async fn txt(&self, _name: &str) -> Result<Vec<String>, reports::DnsError> {
        Err(reports::DnsError::Temporary(
            "no lookups from the admin pages".into(),
        ))
    }
}

/// One received report as `mailstow report show` prints it.
async fn report_text(directory: &Directory, id: i64) -> Result<String, BackendError> {
    // The names in the configuration are not used for showing.
    let config = reports::Config::new("mailstow", "localhost", "postmaster@localhost");
    let reporter =
        reports::Reporter::new(directory.clone(), NoLookups, config).map_err(reports_error)?;
    reporter
        .show(id)
        .await
        .map_err(reports_error)?
        .ok_or(BackendError::NotFound)
}

/// An admin page's data.
pub async fn data(ctx: &Arc<Operations>, view: AdminView) -> Result<AdminData, BackendError> {
    let d = &ctx.directory;
    Ok(match view {
        AdminView::Overview => {
            let queue = ctx.queue.clone();
            let queued = tokio::task::spawn_blocking(move || queue.list())
                .await
                .map_err(|e| BackendError::Failed(e.to_string()))?
                .map_err(queue_error)?
                .len();
            AdminData::Overview {
                node: ctx.node_name.clone(),
                domains: d.list_domains().await.map_err(directory_down)?.len(),
                users: d.list_users(None).await.map_err(directory_down)?.len(),
                aliases: d.list_aliases().await.map_err(directory_down)?.len(),
                queued,
            }
        }
        AdminView::Domains => AdminData::Domains(d.list_domains().await.map_err(directory_down)?),
        AdminView::Aliases => AdminData::Aliases(d.list_aliases().await.map_err(directory_down)?),
        AdminView::Users(filter) => {
            let mut users = d.list_users(None).await.map_err(directory_down)?;
            users.retain(|u| u.address.contains(&filter));
            let matched = users.len();
            // Usage is read for the users shown only.
            users.truncate(web::ADMIN_USERS_SHOWN_MAX);
            let ctx = ctx.clone();
            let rows = tokio::task::spawn_blocking(move || {
                users
                    .into_iter()
                    .map(|u| {
                        let usage = stored_here(&ctx, u.node.as_deref())
                            .then(|| ctx.store.usage(&u.address));
                        AdminUser {
                            used_bytes: usage.as_ref().map(|u| u.bytes),
                            messages: usage.as_ref().map(|u| u.messages),
                            quota_bytes: u.quota_bytes,
                            last_login_at: u.last_login_at,
                            admin: u.admin,
                            node: u.node,
                            address: u.address,
                        }
                    })
                    .collect()
            })
            .await
            .map_err(|e| BackendError::Failed(e.to_string()))?;
            AdminData::Users(rows, matched)
        }
        AdminView::Queue => {
            let queue = ctx.queue.clone();
            let entries = tokio::task::spawn_blocking(move || queue.list())
                .await
                .map_err(|e| BackendError::Failed(e.to_string()))?
                .map_err(queue_error)?;
            AdminData::Queue(
                entries
                    .into_iter()
                    .map(|e| {
                        let pending = e
                            .envelope
                            .recipients
                            .iter()
                            .filter(|r| r.status == queue::RecipientStatus::Pending);
                        Queued {
                            id: e.id,
                            recipients: pending.clone().map(|r| r.address.clone()).collect(),
                            last_error: e.damage.clone().or_else(|| {
                                pending.filter_map(|r| r.last_error.clone()).next_back()
                            }),
                            sender: e.envelope.sender,
                            size: e.size,
                            queued_at: i64::try_from(e.envelope.arrival_ms / 1000)
                                .unwrap_or(i64::MAX),
                            attempts: e.attempts,
                        }
                    })
                    .collect(),
            )
        }
        AdminView::Queued(id) => {
            let queue = ctx.queue.clone();
            let detail = tokio::task::spawn_blocking(move || queue.show(id))
                .await
                .map_err(|e| BackendError::Failed(e.to_string()))?
                .map_err(queue_error)?;
            AdminData::Queued(String::from_utf8_lossy(&format_show(&detail)).into_owned())
        }
        AdminView::Counters => AdminData::Counters(
            ctx.telemetry
                .encode()
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .filter_map(|l| l.rsplit_once(' '))
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        ),
        AdminView::Reports => AdminData::Reports(
            reports_page(
                d,
                &ctx.data_dir.join("acme"),
                ctx.certificates.is_some(),
                SystemTime::now(),
            )
            .await?,
        ),
        AdminView::Report(id) => AdminData::Report(report_text(d, id).await?),
    })
}

/// Carries out an admin action and logs it.
pub async fn act(
    ctx: &Arc<Operations>,
    admin: &str,
    client: IpAddr,
    action: AdminAction,
) -> Result<String, String> {
    let described = action.describe();
    let outcome = run(ctx, action).await;
    match &outcome {
        Ok(done) => tracing::info!(
            event = "admin",
            proto = "web",
            admin = %shown(admin),
            client = %client,
            action = %shown(&described),
            result = "ok",
            detail = %shown(done)
        ),
        Err(why) => tracing::warn!(
            event = "admin",
            proto = "web",
            admin = %shown(admin),
            client = %client,
            action = %shown(&described),
            result = "refused",
            error = %shown(why)
        ),
    }
    outcome
}

async fn run(ctx: &Arc<Operations>, action: AdminAction) -> Result<String, String> {
    let d = &ctx.directory;
    let e = |e: directory::DirectoryError| e.to_string();
    match action {
        AdminAction::AddDomain(name) => {
            d.add_domain(&name).await.map_err(e)?;
            Ok(format!("domain added: {}", name.to_ascii_lowercase()))
        }
        AdminAction::DeleteDomain(name) => {
            d.del_domain(&name).await.map_err(e)?;
            Ok(format!("domain removed: {}", name.to_ascii_lowercase()))
        }
        AdminAction::AddUser {
            address,
            password,
            quota_bytes,
            admin,
        } => {
            let node = d
                .add_user_as(&address, &password, None, admin)
                .await
                .map_err(e)?;
            let address = address.to_ascii_lowercase();
            if quota_bytes.is_some() {
                d.set_quota(&address, quota_bytes).await.map_err(e)?;
            }
            Ok(match node {
                Some(node) => format!("user added: {address} (node {node})"),
                None => format!("user added: {address}"),
            })
        }
        AdminAction::DeleteUser(address) => ctx
            .accounts
            .delete_user(&address)
            .await
            .map(|(user, deleted, node)| {
                format_deleted(&user, &deleted, node.as_deref())
                    .trim_end()
                    .to_string()
            })
            .map_err(|e| format!("{e:#}")),
        AdminAction::SetQuota {
            address,
            quota_bytes,
        } => {
            d.set_quota(&address, quota_bytes).await.map_err(e)?;
            Ok(format!(
                "quota of {}: {}",
                address.to_ascii_lowercase(),
                quota_bytes.map_or("no limit".to_string(), human_bytes)
            ))
        }
        AdminAction::ResetPassword { address, password } => {
            d.set_password(&address, &password).await.map_err(e)?;
            Ok(format!(
                "password changed: {}",
                address.to_ascii_lowercase()
            ))
        }
        AdminAction::SetAdmin { address, on } => {
            d.set_admin(&address, on).await.map_err(e)?;
            Ok(format!(
                "admin {}: {}",
                if on { "on" } else { "off" },
                address.to_ascii_lowercase()
            ))
        }
        AdminAction::AddAlias {
            source,
            destination,
        } => {
            d.add_alias(&source, &destination).await.map_err(e)?;
            Ok(format!(
                "alias added: {} -> {}",
                source.to_ascii_lowercase(),
                destination
            ))
        }
        AdminAction::DeleteAlias {
            source,
            destination,
        } => {
            d.del_alias(&source, Some(&destination)).await.map_err(e)?;
            Ok(format!(
                "alias removed: {} -> {}",
                source.to_ascii_lowercase(),
                destination
            ))
        }
        AdminAction::Retry(id) => ctx
            .run(Request::Retry(id))
            .await
            .map(|out| String::from_utf8_lossy(&out).trim_end().to_string()),
        AdminAction::Remove(id) => ctx
            .run(Request::Remove(id))
            .await
            .map(|out| String::from_utf8_lossy(&out).trim_end().to_string()),
    }
}

#[cfg(test)]
mod tests {
    //! The reports page's data from a real directory (an SQLite file) and a real ACME
    //! directory (written by `acme::obtain`'s failed attempt); the web crate's tests cover
    //! how the page shows it.

    use std::time::SystemTime;

    use directory::{DAY_S, Directory, ReceivedReport, ReportKind, SentReport};
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use web::{ADMIN_REPORTS_SHOWN_MAX, AdminCertificate, AdminReportKind, BackendError};

    use super::{report_text, reports_page};

    /// 2025-11-25 00:00 UTC.
    const DAY_START: i64 = 1_764_028_800;

    /// A TLS-RPT report (RFC 8460 4) with one failure detail.
    const TLS_REPORT: &str = r#"{
        "organization-name": "<Example> & Co",
        "date-range": {"start-datetime": "2025-11-25T00:00:00Z",
                       "end-datetime": "2025-11-25T23:59:59Z"},
        "contact-info": "tlsrpt@example.com",
        "report-id": "r-0",
        "policies": [{
            "policy": {"policy-type": "sts", "policy-string": ["version: STSv1"],
                       "policy-domain": "example.org", "mx-host": ["mx.example.org"]},
            "summary": {"total-successful-session-count": 117,
                        "total-failure-session-count": 3},
            "failure-details": [{"result-type": "certificate-expired",
                                 "receiving-mx-hostname": "mx.example.org",
                                 "receiving-ip": "192.0.2.1",
                                 "failed-session-count": 3}]
        }]
    }"#;

    fn received(n: i64) -> ReceivedReport {
        ReceivedReport {
            id: 0,
            kind: ReportKind::TlsRpt,
            org: "<Example> & Co".into(),
            report_id: format!("r-{n}"),
            domain: "example.org".into(),
            begin: DAY_START,
            end: DAY_START + DAY_S - 1,
            received_at: DAY_START + DAY_S + n,
            total: 120,
            failed: 3,
        }
    }

    struct Unanswered;

    impl acme::Responder for Unanswered {
        fn put_http01(&self, _: &str, _: &str) {}
        fn put_tls_alpn01(&self, _: &str, _: CertificateDer<'static>, _: PrivateKeyDer<'static>) {}
        fn clear_http01(&self, _: &str) {}
        fn clear_tls_alpn01(&self, _: &str) {}
    }

    #[tokio::test]
    async fn the_reports_page_lists_the_newest_reports_cut_and_the_certificate() {
        let temp = tempfile::tempdir().unwrap();
        let directory = Directory::open(&temp.path().join("directory.db"))
            .await
            .unwrap();
        let acme_dir = temp.path().join("acme");
        let now = SystemTime::now();

        // Nothing yet, no ACME directory.
        let page = reports_page(&directory, &acme_dir, false, now)
            .await
            .unwrap();
        assert!(page.received.is_empty() && !page.received_more);
        assert!(page.sent.is_empty() && !page.sent_more);
        assert_eq!(page.certificate, AdminCertificate::Configured);

        // As many received reports as are shown: not cut; one more: cut, the oldest left out.
        let mut first_id = None;
        for n in 0..ADMIN_REPORTS_SHOWN_MAX as i64 {
            let id = directory
                .add_received_report(&received(n), TLS_REPORT, 10_000)
                .await
                .unwrap();
            first_id = first_id.or(id);
        }
        directory
            .mark_report_sent(&SentReport {
                kind: ReportKind::Dmarc,
                domain: "example.net".into(),
                day: DAY_START / DAY_S,
                report_id: "ours-1".into(),
                sent_at: DAY_START + DAY_S + 3_600,
                rua: vec!["dmarc@example.net".into()],
                bytes: 900,
            })
            .await
            .unwrap();
        let page = reports_page(&directory, &acme_dir, false, now)
            .await
            .unwrap();
        assert_eq!(page.received.len(), ADMIN_REPORTS_SHOWN_MAX);
        assert!(!page.received_more);
        let last = ADMIN_REPORTS_SHOWN_MAX as i64;
        directory
            .add_received_report(&received(last), TLS_REPORT, 10_000)
            .await
            .unwrap();
        let page = reports_page(&directory, &acme_dir, false, now)
            .await
            .unwrap();
        assert_eq!(page.received.len(), ADMIN_REPORTS_SHOWN_MAX);
        assert!(page.received_more);
        let newest = &page.received[0];
        assert_eq!(newest.report_id, format!("r-{last}"));
        assert_eq!(newest.kind, AdminReportKind::TlsRpt);
        assert_eq!(newest.org, "<Example> & Co", "escaping is the page's work");
        assert_eq!(
            (newest.begin, newest.end, newest.total, newest.failed),
            (DAY_START, DAY_START + DAY_S - 1, 120, 3)
        );
        assert_eq!(page.received.last().unwrap().report_id, "r-1");
        assert_eq!(page.sent.len(), 1);
        assert!(!page.sent_more);
        let sent = &page.sent[0];
        assert_eq!(sent.kind, AdminReportKind::Dmarc);
        assert_eq!(sent.day, DAY_START);
        assert_eq!(sent.recipients, vec!["dmarc@example.net".to_string()]);
        assert_eq!(sent.sent_at, DAY_START + DAY_S + 3_600);

        // A report's text, as `mailstow report show` prints it; an unknown id.
        let text = report_text(&directory, first_id.unwrap()).await.unwrap();
        assert!(text.contains("from: <Example> & Co"), "{text}");
        assert!(text.contains("report id: r-0"), "{text}");
        assert!(
            text.contains("3 sessions, mx mx.example.org, ip 192.0.2.1"),
            "{text}"
        );
        assert_eq!(
            report_text(&directory, 999_999).await,
            Err(BackendError::NotFound)
        );

        // An ACME directory after a failed attempt: no certificate, the error and the next try.
        let config = acme::Config::new("http://127.0.0.1:1/directory");
        let names = ["mail.example.org".to_string()];
        let error = acme::obtain(&config, &acme_dir, &names, &Unanswered)
            .await
            .unwrap_err();
        let page = reports_page(&directory, &acme_dir, true, SystemTime::now())
            .await
            .unwrap();
        let AdminCertificate::Acme {
            names,
            not_after,
            last_error,
            consecutive_failures,
            next_attempt,
            renewing,
            ..
        } = page.certificate
        else {
            panic!("{:?}", page.certificate);
        };
        assert!(names.is_empty() && not_after.is_none());
        assert_eq!(last_error, Some(error.to_string()));
        assert_eq!(consecutive_failures, 1);
        assert!(next_attempt.unwrap() > DAY_START);
        assert!(renewing);

        // A state file something else wrote: said, not hidden.
        std::fs::write(acme_dir.join("state.json"), "not json").unwrap();
        let page = reports_page(&directory, &acme_dir, true, SystemTime::now())
            .await
            .unwrap();
        assert!(
            matches!(&page.certificate, AdminCertificate::Unreadable(why) if why.contains("state.json")),
            "{:?}",
            page.certificate
        );
    }
}
