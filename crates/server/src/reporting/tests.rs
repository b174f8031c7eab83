//! The reports in the server over a real directory (SQLite) and a real queue: TLS sessions
//! counted through the writer, the report built, signed, queued and parsed back with
//! mail-auth; one claim per report when two nodes send; DMARC rows from verdicts. DNS is a
//! table (the `reports` crate tests hickory against a real name server).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use directory::{DmarcDisposition, ReportKind};
use mail_auth::report::tlsrpt::{PolicyType, ResultType, TlsReport};
use reports::{DnsError, TxtResolver};
use sender_auth::{DkimOutcome, DkimResult, DmarcPolicy, DmarcResult, SpfResult, Verdict};

use super::*;

/// TXT records by name; a name not in the table does not exist.
#[derive(Clone, Default)]
struct Table(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl Table {
    fn set(&self, name: &str, record: &str) {
        let mut table = self.0.lock().unwrap();
        table.insert(name.to_owned(), vec![record.to_owned()]);
    }
}

impl TxtResolver for Table {
    async fn txt(&self, name: &str) -> Result<Vec<String>, DnsError> {
        let table = self.0.lock().unwrap();
        table.get(name).cloned().ok_or(DnsError::NotFound)
    }
}

struct Node {
    _dir: tempfile::TempDir,
    directory: Directory,
    queue: Arc<queue::Queue>,
    wakeup: Arc<delivery::Wakeup>,
}

async fn node(directory: Option<Directory>) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let directory = match directory {
        Some(directory) => directory,
        None => Directory::open(&dir.path().join("directory.db"))
            .await
            .unwrap(),
    };
    let queue_dir = dir.path().join("queue");
    std::fs::create_dir_all(&queue_dir).unwrap();
    let (queue, _) = queue::Queue::open(
        Arc::new(disk::RealDisk),
        &queue_dir,
        queue::QueueConfig::default(),
    )
    .unwrap();
    Node {
        _dir: dir,
        directory,
        queue: Arc::new(queue),
        wakeup: Arc::new(delivery::Wakeup::default()),
    }
}

fn sts_policy() -> transport_policy::AppliedPolicy {
    transport_policy::AppliedPolicy {
        kind: transport_policy::PolicyKind::Sts,
        strings: vec![
            "version: STSv1".into(),
            "mode: enforce".into(),
            "mx: mx1.remote.example".into(),
            "max_age: 86400".into(),
        ],
        domain: "remote.example".into(),
        mx_host: vec!["mx1.remote.example".into()],
    }
}

/// Waits until the writer has counted `sessions` TLS sessions today.
async fn counted(directory: &Directory, sessions: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let today = directory::day_of(unix_now());
        let rows = directory
            .tls_results(today, "remote.example")
            .await
            .unwrap();
        if rows.iter().map(|r| r.count).sum::<u64>() >= sessions {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the writer never counted: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn tls_sessions_are_counted_then_reported_signed_from_the_queue() {
    let node = node(None).await;
    node.directory.add_domain("example.org").await.unwrap();
    let key = sender_auth::generate(sender_auth::Algorithm::Ed25519).unwrap();
    node.directory
        .add_dkim_key(&directory::DkimKey {
            domain: "example.org".into(),
            selector: "s1".into(),
            algorithm: "ed25519".into(),
            private_key: key.private_key_pem.clone(),
            public_key: key.public_key_b64.clone(),
            created_at: 0,
        })
        .await
        .unwrap();
    let dns = Table::default();
    dns.set(
        "_smtp._tls.remote.example",
        "v=TLSRPTv1; rua=mailto:tls@remote.example",
    );
    let telemetry = telemetry::Telemetry::new();
    let reports =
        Reports::with_resolver(dns, "mx.example.org", node.directory.clone(), telemetry).unwrap();
    let ip: IpAddr = "192.0.2.25".parse().unwrap();
    for _ in 0..3 {
        reports.record(&sts_policy(), "mx1.remote.example.", ip, None, "");
    }
    reports.record(
        &sts_policy(),
        "mx1.remote.example",
        ip,
        Some(transport_policy::ResultType::CertificateExpired),
        "the certificate expired",
    );
    counted(&node.directory, 4).await;
    assert_eq!(reports.dropped(), 0);

    // Today's sessions are not due today.
    let out = reports
        .send_due(&node.queue, &node.wakeup, unix_now())
        .await
        .unwrap();
    assert_eq!(out, "");
    // Tomorrow they are: one report, queued from postmaster@ our host's domain to the rua.
    let tomorrow = unix_now() + directory::DAY_S;
    let out = reports
        .send_due(&node.queue, &node.wakeup, tomorrow)
        .await
        .unwrap();
    assert!(
        out.starts_with("sent tlsrpt remote.example ") && out.ends_with(" to tls@remote.example\n"),
        "{out}"
    );
    let queued = node.queue.list().unwrap();
    assert_eq!(queued.len(), 1);
    let detail = node.queue.show(queued[0].id).unwrap();
    assert_eq!(detail.entry.envelope.sender, "postmaster@example.org");
    let to: Vec<&str> = detail
        .entry
        .envelope
        .recipients
        .iter()
        .map(|r| r.address.as_str())
        .collect();
    assert_eq!(to, ["tls@remote.example"]);
    let text = String::from_utf8_lossy(&detail.content);
    assert!(
        text.starts_with("DKIM-Signature: ") && text.contains("d=example.org"),
        "{text}"
    );

    // Parsed back by mail-auth: the sessions counted, under the policy applied.
    let report = TlsReport::parse_rfc5322(&detail.content, 1 << 20).unwrap();
    assert_eq!(report.policies.len(), 1);
    let policy = &report.policies[0];
    assert_eq!(policy.policy.policy_type, PolicyType::Sts);
    assert_eq!(policy.policy.policy_domain, "remote.example");
    assert_eq!(policy.policy.policy_string, sts_policy().strings);
    assert_eq!(policy.summary.total_success, 3);
    assert_eq!(policy.summary.total_failure, 1);
    assert_eq!(policy.failure_details.len(), 1);
    let failure = &policy.failure_details[0];
    assert_eq!(failure.result_type, ResultType::CertificateExpired);
    assert_eq!(failure.failed_session_count, 1);
    assert_eq!(failure.receiving_ip, Some(ip));
    assert_eq!(
        failure.receiving_mx_hostname.as_deref(),
        Some("mx1.remote.example")
    );

    // Sent once: a later round has nothing, and the directory remembers it.
    let out = reports
        .send_due(&node.queue, &node.wakeup, tomorrow + 3600)
        .await
        .unwrap();
    assert_eq!(out, "");
    assert_eq!(node.queue.list().unwrap().len(), 1);
    let sent = node
        .directory
        .reports_sent(Some(ReportKind::TlsRpt), 10)
        .await
        .unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].rua, ["tls@remote.example"]);
}

#[tokio::test]
async fn two_nodes_on_one_directory_send_each_report_once() {
    let first = node(None).await;
    first.directory.add_domain("example.org").await.unwrap();
    let second = node(Some(first.directory.clone())).await;
    let dns = Table::default();
    dns.set(
        "_smtp._tls.remote.example",
        "v=TLSRPTv1; rua=mailto:tls@remote.example",
    );
    let telemetry = telemetry::Telemetry::new();
    let on = |n: &Node| {
        Reports::with_resolver(
            dns.clone(),
            "mx.example.org",
            n.directory.clone(),
            telemetry.clone(),
        )
        .unwrap()
    };
    let (a, b) = (on(&first), on(&second));
    a.record(
        &sts_policy(),
        "mx1.remote.example",
        [192, 0, 2, 1].into(),
        None,
        "",
    );
    b.record(
        &sts_policy(),
        "mx1.remote.example",
        [192, 0, 2, 1].into(),
        None,
        "",
    );
    counted(&first.directory, 2).await;
    let tomorrow = unix_now() + directory::DAY_S;
    // Both build the report; only the claim that wins queues it.
    let (out_a, out_b) = tokio::join!(
        a.send_due(&first.queue, &first.wakeup, tomorrow),
        b.send_due(&second.queue, &second.wakeup, tomorrow),
    );
    let (out_a, out_b) = (out_a.unwrap(), out_b.unwrap());
    let queued = first.queue.list().unwrap().len() + second.queue.list().unwrap().len();
    assert_eq!(queued, 1, "{out_a:?} {out_b:?}");
    assert_eq!(
        [&out_a, &out_b]
            .iter()
            .filter(|o| o.starts_with("sent "))
            .count(),
        1
    );
}

fn verdict(dmarc: DmarcResult, policy: DmarcPolicy, dkim: &[(&str, DkimResult)]) -> Verdict {
    Verdict {
        spf: SpfResult::Fail,
        spf_domain: "bounce.remote.example".into(),
        dkim: dkim
            .iter()
            .map(|(domain, result)| DkimOutcome {
                domain: (*domain).into(),
                selector: "s".into(),
                result: *result,
                signature_prefix: String::new(),
            })
            .collect(),
        dmarc,
        dmarc_policy: policy,
        from_domain: Some("remote.example".into()),
        header: String::new(),
    }
}

#[test]
fn dmarc_rows_say_what_aligned_and_what_we_did() {
    let ip: IpAddr = "198.51.100.7".parse().unwrap();
    // A pass by an aligned signature (a subdomain's key), after an unaligned one.
    let pass = verdict(
        DmarcResult::Pass,
        DmarcPolicy::Reject,
        &[
            ("other.example", DkimResult::Pass),
            ("mail.remote.example", DkimResult::Pass),
        ],
    );
    let key = dmarc_key(ip, "x@bounce.remote.example", &pass, false).unwrap();
    assert_eq!(key.policy_domain, "remote.example");
    assert_eq!(key.header_from, "remote.example");
    assert_eq!(key.envelope_from, "bounce.remote.example");
    assert!(key.dkim_aligned && !key.spf_aligned);
    assert_eq!(key.dkim_domain, "mail.remote.example");
    assert_eq!(key.dkim_result, "pass");
    assert_eq!(key.spf_result, "fail");
    assert!(!key.spf_helo);
    assert_eq!(key.disposition, DmarcDisposition::None);
    assert_eq!(key.policy.p, DmarcDisposition::Reject);

    // A failure refused by the policy: nothing aligned, disposition reject.
    let fail = verdict(
        DmarcResult::Fail,
        DmarcPolicy::Reject,
        &[("remote.example", DkimResult::Fail)],
    );
    let key = dmarc_key(ip, "", &fail, true).unwrap();
    assert!(!key.dkim_aligned && !key.spf_aligned);
    assert_eq!(key.disposition, DmarcDisposition::Reject);
    assert_eq!(key.dkim_result, "fail");
    assert!(key.spf_helo);
    assert_eq!(key.envelope_from, "");

    // No signature at all: result none, no domain.
    let unsigned = verdict(DmarcResult::Fail, DmarcPolicy::None, &[]);
    let key = dmarc_key(ip, "x@remote.example", &unsigned, false).unwrap();
    assert_eq!(
        (key.dkim_domain.as_str(), key.dkim_result.as_str()),
        ("", "none")
    );

    // No policy, or none known: no row.
    for result in [
        DmarcResult::None,
        DmarcResult::TempError,
        DmarcResult::PermError,
    ] {
        assert!(
            dmarc_key(
                ip,
                "x@remote.example",
                &verdict(result, DmarcPolicy::None, &[]),
                false
            )
            .is_none()
        );
    }
    let mut no_from = pass.clone();
    no_from.from_domain = None;
    assert!(dmarc_key(ip, "", &no_from, false).is_none());
}

#[test]
fn report_addresses_are_the_two_local_parts_of_local_domains() {
    let ours = |d: &str| d == "example.org";
    assert_eq!(
        report_address("tls-reports@example.org", ours),
        Some(ReportKind::TlsRpt)
    );
    assert_eq!(
        report_address("DMARC-Reports@Example.ORG", ours),
        Some(ReportKind::Dmarc)
    );
    assert_eq!(report_address("tls-reports@example.net", ours), None);
    assert_eq!(report_address("reports@example.org", ours), None);
    assert_eq!(report_address("tls-reports", ours), None);
}
