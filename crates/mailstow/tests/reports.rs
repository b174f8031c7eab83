//! TLS-RPT and DMARC aggregate reports through the real binary (issue 39): mail checked with
//! DMARC against a loopback DNS zone is counted, the day's reports are sent through the
//! queue to the `rua` the senders' domains publish, and a second mailstow, the MX of those
//! domains, takes them in at its report addresses and shows them (`mailstow report list|
//! show`) with the counts of the messages sent. A TLS-RPT report mailed to
//! `tls-reports@DOMAIN` is listed and shown too; a message that is no report is dropped.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{FakeDns, mail, mailstow, must};

/// A data directory with `domains` and no user, in its own temporary directory (the
/// configuration file and the mail log go next to it).
fn data_dir(domains: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    for domain in domains {
        must(mailstow(&data, &["domain", "add", domain]));
    }
    (dir, data)
}

/// `mailstow report list ARGS` once it prints at least `count` lines.
fn listed(data: &Path, args: &[&str], count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut command = vec!["report", "list"];
        command.extend_from_slice(args);
        let out = must(mailstow(data, &command));
        let lines: Vec<String> = out.lines().map(str::to_string).collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "report list {args:?} never had {count} lines: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn line_for<'a>(lines: &'a [String], domain: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.split(' ').nth(3) == Some(domain))
        .unwrap_or_else(|| panic!("no report about {domain}: {lines:#?}"))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn dmarc_reports_are_counted_sent_and_taken_in_by_the_domains_that_asked() {
    // The senders' MX: it takes reports for remote.test and strict.test.
    let (_remote_dir, remote_data) = data_dir(&["remote.test", "strict.test"]);
    let (remote, remote_log) = mail::start(&remote_data, "mx.remote.test", "");
    // The sending domains: one passes DMARC (SPF aligned), one fails it under p=reject.
    let dns = FakeDns::start(&[
        "remote.test TXT v=spf1 ip4:127.0.0.0/8 -all",
        "_dmarc.remote.test TXT v=DMARC1; p=none; rua=mailto:dmarc-reports@remote.test",
        "strict.test TXT v=spf1 ip4:192.0.2.1 -all",
        "_dmarc.strict.test TXT v=DMARC1; p=reject; rua=mailto:dmarc-reports@strict.test",
    ]);
    let (_dir, data) = data_dir(&["example.test"]);
    must(mailstow(
        &data,
        &["user", "add", "bob@example.test", "--password", "secret-pw"],
    ));
    let (server, log) = mail::start(
        &data,
        "mx.example.test",
        &format!(
            "dns_servers = [\"{}\"]\nrelay_host = \"{}\"\nrelay_tls = \"none\"",
            dns.address,
            remote.addr("smtp")
        ),
    );

    for n in 0..3 {
        let (codes, last) = mail::send(
            &server,
            "smtp",
            None,
            "x@remote.test",
            &["bob@example.test"],
            &format!("From: x@remote.test\r\nTo: bob@example.test\r\nSubject: {n}\r\n\r\nhi\r\n"),
        );
        assert_eq!(codes, [250, 250, 354, 250], "{last}");
    }
    let (codes, last) = mail::send(
        &server,
        "smtp",
        None,
        "x@strict.test",
        &["bob@example.test"],
        "From: x@strict.test\r\nTo: bob@example.test\r\nSubject: forged\r\n\r\nhi\r\n",
    );
    assert_eq!(codes.last(), Some(&550), "{last}");

    // Today's messages are reported once the day is over: send as if it were tomorrow.
    let tomorrow = (unix_now() + 86_400).to_string();
    let sent = must(mailstow(&data, &["report", "send", "--now", &tomorrow]));
    assert_eq!(sent.lines().count(), 2, "{sent}");
    assert!(
        sent.contains("sent dmarc remote.test ") && sent.contains(" to dmarc-reports@remote.test"),
        "{sent}"
    );
    assert!(sent.contains("sent dmarc strict.test "), "{sent}");
    // Claimed: a second round sends nothing.
    let again = must(mailstow(&data, &["report", "send", "--now", &tomorrow]));
    assert_eq!(again.trim(), "no report due");
    let ours = listed(&data, &["--sent"], 2);
    assert!(
        line_for(&ours, "remote.test").contains(" to=dmarc-reports@remote.test "),
        "{ours:#?}"
    );
    assert_eq!(
        mail::log_lines(&log, &["event=report ", "direction=sent", "kind=dmarc"], 2).len(),
        2
    );

    // The reports travel through the queue and the relay to the senders' MX, which parses
    // them: the counts are the messages sent.
    let received = listed(&remote_data, &["--kind", "dmarc"], 2);
    let passed = line_for(&received, "remote.test");
    assert!(
        passed.contains(" dmarc mx.example.test remote.test ")
            && passed.contains(" messages=3 failed=0 "),
        "{passed}"
    );
    let failed = line_for(&received, "strict.test");
    assert!(failed.contains(" messages=1 failed=1 "), "{failed}");
    let id = failed.split(' ').next().unwrap();
    let shown = must(mailstow(&remote_data, &["report", "show", id]));
    assert!(shown.contains("domain: strict.test"), "{shown}");
    assert!(shown.contains("messages: 1, failed DMARC: 1"), "{shown}");
    assert!(
        shown.contains("127.0.0.1") && shown.contains("reject"),
        "{shown}"
    );
    assert_eq!(
        mail::log_lines(
            &remote_log,
            &["event=report ", "direction=received", "kind=dmarc"],
            2
        )
        .len(),
        2
    );
    server.stop_cleanly();
    remote.stop_cleanly();
}

/// RFC 8460 4's form: one STS policy, five sessions that succeeded, two that failed.
const TLS_REPORT: &str = r#"{
  "organization-name": "Sender Org",
  "date-range": {
    "start-datetime": "2026-01-01T00:00:00Z",
    "end-datetime": "2026-01-01T23:59:59Z"
  },
  "contact-info": "tlsrpt@sender.test",
  "report-id": "2026-01-01T00:00:00Z_example.test",
  "policies": [{
    "policy": {
      "policy-type": "sts",
      "policy-string": ["version: STSv1", "mode: testing", "mx: mx.example.test", "max_age: 86400"],
      "policy-domain": "example.test",
      "mx-host": ["mx.example.test"]
    },
    "summary": {
      "total-successful-session-count": 5,
      "total-failure-session-count": 2
    },
    "failure-details": [{
      "result-type": "certificate-expired",
      "sending-mta-ip": "192.0.2.1",
      "receiving-mx-hostname": "mx.example.test",
      "receiving-ip": "198.51.100.2",
      "failed-session-count": 2
    }]
  }]
}"#;

#[test]
fn a_tls_report_mailed_to_tls_reports_is_listed_and_shown() {
    let (_dir, data) = data_dir(&["example.test"]);
    let (server, log) = mail::start(&data, "mx.example.test", "");
    let report: mail_auth::report::tlsrpt::TlsReport = serde_json::from_str(TLS_REPORT).unwrap();
    let message = report
        .to_rfc5322(
            "example.test",
            "mail.sender.test",
            "tlsrpt@sender.test",
            ["tls-reports@example.test"].into_iter(),
        )
        .unwrap();
    let message = if message.ends_with("\r\n") {
        message
    } else {
        format!("{message}\r\n")
    };
    let (codes, last) = mail::send(
        &server,
        "smtp",
        None,
        "tlsrpt@sender.test",
        &["tls-reports@example.test"],
        &message,
    );
    assert_eq!(codes, [250, 250, 354, 250], "{last}");
    let lines = listed(&data, &[], 1);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with("1 tlsrpt Sender_Org example.test 2026-01-01T00:00:00Z 2026-01-01T23:59:59Z sessions=7 failed=2 "),
        "{}",
        lines[0]
    );
    let shown = must(mailstow(&data, &["report", "show", "1"]));
    assert!(
        shown.contains("5 successful, 2 failed sessions")
            && shown
                .contains("CertificateExpired: 2 sessions, mx mx.example.test, ip 198.51.100.2"),
        "{shown}"
    );
    assert_eq!(
        mail::log_lines(
            &log,
            &["event=report ", "direction=received", "kind=tlsrpt"],
            1
        )
        .len(),
        1
    );

    // Not a report: accepted (a report is never bounced), logged, kept nowhere.
    let (codes, last) = mail::send(
        &server,
        "smtp",
        None,
        "someone@sender.test",
        &["dmarc-reports@example.test"],
        "From: someone@sender.test\r\nSubject: hello\r\n\r\nnot a report\r\n",
    );
    assert_eq!(codes, [250, 250, 354, 250], "{last}");
    assert_eq!(mail::log_lines(&log, &["event=report_refused"], 1).len(), 1);
    assert_eq!(listed(&data, &[], 1).len(), 1);
    // Another domain's report address is an ordinary (unknown) one.
    let (codes, _) = mail::send(
        &server,
        "smtp",
        None,
        "someone@sender.test",
        &["tls-reports@elsewhere.test"],
        "Subject: x\r\n\r\nx\r\n",
    );
    assert_eq!(codes[1], 554);
    assert!(mailstow(&data, &["report", "show", "99"]).status.code() != Some(0));
    server.stop_cleanly();
}
