//! The reports against a real directory (an SQLite file in a temporary directory) and a
//! resolver answering from a table (the one mock: `tests/dns.rs` asks a real name server).
//! Sent reports are parsed back with mail-auth's own parsers and checked against the
//! sessions and messages that were counted; received ones are mail-auth's generated reports,
//! a hand-written RFC 7489 appendix C report, and hostile messages.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::sync::Mutex;

use base64::Engine as _;
use directory::{
    DAY_S, Directory, DmarcDisposition, DmarcKey, DmarcPolicyPublished, ReportKind, TlsPolicyType,
    TlsSessionKey,
};
use mail_auth::flate2::Compression;
use mail_auth::flate2::write::GzEncoder;
use mail_auth::report::tlsrpt::{
    DateRange, FailureDetails, Policy, PolicyDetails, PolicyType, ResultType, Summary, TlsReport,
};
use mail_auth::report::{ActionDisposition, DmarcResult, Record, Report};
use mail_parser::MessageParser;

use crate::{
    ATTACHMENTS_MAX, Config, DnsError, Error, MESSAGE_BYTES_MAX, Reporter, TxtResolver,
    ZIP_ENTRIES_MAX,
};

/// TXT records by name; a name not in the table does not exist.
#[derive(Default)]
struct Table(Mutex<HashMap<String, Result<Vec<String>, DnsError>>>);

impl Table {
    fn set(&self, name: &str, records: &[&str]) {
        let records = records.iter().map(|r| (*r).to_owned()).collect();
        self.0.lock().unwrap().insert(name.to_owned(), Ok(records));
    }

    fn fail(&self, name: &str) {
        let error = DnsError::Temporary("SERVFAIL".into());
        self.0.lock().unwrap().insert(name.to_owned(), Err(error));
    }
}

impl TxtResolver for Table {
    async fn txt(&self, name: &str) -> Result<Vec<String>, DnsError> {
        let table = self.0.lock().unwrap();
        table.get(name).cloned().unwrap_or(Err(DnsError::NotFound))
    }
}

/// Day 20,000 is 2024-10-04.
const DAY: i64 = 20_000;
/// Noon of that day, and an hour into the next.
const NOON: i64 = DAY * DAY_S + DAY_S / 2;
const NEXT_DAY: i64 = (DAY + 1) * DAY_S + 3_600;

struct Fixture {
    _temp: tempfile::TempDir,
    reporter: Reporter<Table>,
}

async fn fixture(config: impl FnOnce(&mut Config)) -> Fixture {
    let temp = tempfile::tempdir().unwrap();
    let directory = Directory::open(&temp.path().join("directory.db"))
        .await
        .unwrap();
    directory.add_domain("example.org").await.unwrap();
    let mut settings = Config::new("Example Org", "mx.example.org", "reports@example.org");
    config(&mut settings);
    let reporter = Reporter::new(directory, Table::default(), settings).unwrap();
    Fixture {
        _temp: temp,
        reporter,
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn sts_session(mx: &str, address: &str, failure: Option<&str>) -> TlsSessionKey {
    TlsSessionKey {
        policy_domain: "example.com".into(),
        policy_type: TlsPolicyType::Sts,
        policy_strings: vec![
            "version: STSv1".into(),
            "mode: enforce".into(),
            "mx: *.example.com".into(),
            "max_age: 604800".into(),
        ],
        mx_host: mx.into(),
        receiving_ip: Some(ip(address)),
        failure: failure.map(str::to_owned),
    }
}

/// The sessions of one day: with example.com under MTA-STS (successes and two kinds of
/// failure, on two MX hosts), with a DANE host of it, and with example.net without policy.
fn sessions() -> Vec<TlsSessionKey> {
    let mut sessions = Vec::new();
    for _ in 0..5 {
        sessions.push(sts_session("mx1.example.com", "192.0.2.1", None));
    }
    for _ in 0..2 {
        let failure = Some("certificate-expired");
        sessions.push(sts_session("mx2.example.com", "192.0.2.2", failure));
    }
    let failure = Some("starttls-not-supported");
    sessions.push(sts_session("mx3.example.com", "2001:db8::3", failure));
    sessions.push(TlsSessionKey {
        policy_type: TlsPolicyType::Tlsa,
        policy_strings: vec!["3 1 1 0123456789abcdef".into()],
        ..sts_session("mx1.example.com", "192.0.2.1", None)
    });
    sessions.push(TlsSessionKey {
        policy_type: TlsPolicyType::Tlsa,
        policy_strings: vec!["3 1 1 0123456789abcdef".into()],
        ..sts_session("mx1.example.com", "192.0.2.1", Some("tlsa-invalid"))
    });
    for _ in 0..3 {
        sessions.push(TlsSessionKey {
            policy_domain: "example.net".into(),
            policy_type: TlsPolicyType::NoPolicyFound,
            policy_strings: Vec::new(),
            mx_host: "mx.example.net".into(),
            receiving_ip: Some(ip("198.51.100.1")),
            failure: None,
        });
    }
    sessions
}

fn policy_type(t: TlsPolicyType) -> PolicyType {
    match t {
        TlsPolicyType::Sts => PolicyType::Sts,
        TlsPolicyType::Tlsa => PolicyType::Tlsa,
        TlsPolicyType::NoPolicyFound => PolicyType::NoPolicyFound,
    }
}

/// A header field of a message as mail-parser reads it: the subject decoded (mail-builder
/// writes one this long as RFC 2047 encoded words), any other field raw.
fn header(message: &[u8], name: &str) -> String {
    let parsed = MessageParser::new().parse(message).unwrap();
    if name == "Subject" {
        return parsed.subject().unwrap_or_default().to_owned();
    }
    parsed
        .header_raw(name)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn a_tls_report_is_built_from_the_sessions_and_parses_back_to_their_counts() {
    let f = fixture(|_| {}).await;
    let sessions = sessions();
    for session in &sessions {
        f.reporter.record_tls(NOON, session).await.unwrap();
    }
    // Today's sessions are not due yet.
    f.reporter.record_tls(NEXT_DAY, &sessions[0]).await.unwrap();
    let dns = &f.reporter.resolver;
    dns.set(
        "_smtp._tls.example.com",
        &[
            "v=spf1 -all",
            "v=TLSRPTv1; rua=mailto:tls-reports@example.com,https://tlsrpt.example.com/v1",
        ],
    );
    let due = f.reporter.due(NEXT_DAY).await.unwrap();
    assert_eq!(due.len(), 1, "{due:?}");
    let report = &due[0];
    assert_eq!(
        (report.kind, report.domain.as_str(), report.day),
        (ReportKind::TlsRpt, "example.com", DAY)
    );
    assert_eq!(report.recipients, ["tls-reports@example.com"]);
    assert_eq!(report.from, "reports@example.org");
    assert_eq!(
        report.report_id,
        "2024-10-04.tlsrpt.example.com@mx.example.org"
    );

    // RFC 8460 5.3: the message's form.
    let message = &report.message;
    assert_eq!(
        header(message, "Subject"),
        "Report Domain: example.com Submitter: mx.example.org Report-ID: \
         <2024-10-04.tlsrpt.example.com@mx.example.org>"
    );
    assert_eq!(header(message, "TLS-Report-Domain"), "example.com");
    assert_eq!(header(message, "TLS-Report-Submitter"), "mx.example.org");
    let content_type = header(message, "Content-Type");
    assert!(
        content_type.starts_with("multipart/report")
            && content_type.contains("report-type=\"tlsrpt\"")
            || content_type.contains("report-type=tlsrpt"),
        "{content_type}"
    );

    // Parsed back by mail-auth: each policy's counts are the sessions'.
    let parsed = TlsReport::parse_rfc5322(message, 1 << 20).unwrap();
    assert_eq!(parsed.report_id, report.report_id);
    assert_eq!(parsed.organization_name.as_deref(), Some("Example Org"));
    assert_eq!(parsed.contact_info.as_deref(), Some("reports@example.org"));
    assert_eq!(parsed.date_range.start_datetime.to_timestamp(), DAY * DAY_S);
    assert_eq!(
        parsed.date_range.end_datetime.to_timestamp(),
        (DAY + 1) * DAY_S - 1
    );
    let counted: Vec<&TlsSessionKey> = sessions
        .iter()
        .filter(|s| s.policy_domain == "example.com")
        .collect();
    assert_eq!(parsed.policies.len(), 2);
    let mut reported_sessions = 0;
    for policy in &parsed.policies {
        assert_eq!(policy.policy.policy_domain, "example.com");
        let under: Vec<&&TlsSessionKey> = counted
            .iter()
            .filter(|s| {
                policy_type(s.policy_type) == policy.policy.policy_type
                    && s.policy_strings == policy.policy.policy_string
            })
            .collect();
        assert!(!under.is_empty());
        let failed = under.iter().filter(|s| s.failure.is_some()).count();
        assert_eq!(policy.summary.total_success as usize, under.len() - failed);
        assert_eq!(policy.summary.total_failure as usize, failed);
        reported_sessions += under.len();
        for detail in &policy.failure_details {
            let matching = under
                .iter()
                .filter(|s| {
                    s.failure.as_deref().map(crate::outgoing::result_type)
                        == Some(detail.result_type)
                        && Some(s.mx_host.as_str()) == detail.receiving_mx_hostname.as_deref()
                        && s.receiving_ip == detail.receiving_ip
                })
                .count();
            assert_eq!(detail.failed_session_count as usize, matching, "{detail:?}");
        }
        let detailed: u32 = policy
            .failure_details
            .iter()
            .map(|d| d.failed_session_count)
            .sum();
        assert_eq!(detailed, policy.summary.total_failure);
    }
    assert_eq!(reported_sessions, counted.len());

    // example.net publishes no TLS-RPT record: remembered as asking for nothing.
    let none = f
        .reporter
        .directory
        .report_sent(ReportKind::TlsRpt, "example.net", DAY)
        .await
        .unwrap()
        .unwrap();
    assert!(none.rua.is_empty());
    // Due again until marked sent, with the same report (its Message-ID and MIME boundary
    // new).
    let again = f.reporter.due(NEXT_DAY).await.unwrap();
    let without_message = |r: &crate::OutgoingReport| crate::OutgoingReport {
        message: Vec::new(),
        ..r.clone()
    };
    assert_eq!(again.len(), 1);
    assert_eq!(without_message(&again[0]), without_message(report));
    f.reporter.mark_sent(report, NEXT_DAY).await.unwrap();
    assert!(f.reporter.due(NEXT_DAY).await.unwrap().is_empty());
    let sent = f.reporter.sent(Some(ReportKind::TlsRpt), 10).await.unwrap();
    assert_eq!(sent.len(), 2);
    let to_com = sent.iter().find(|s| s.domain == "example.com").unwrap();
    assert_eq!(to_com.bytes, report.message.len() as u64);
}

fn message(source: &str, header_from: &str, aligned: bool) -> DmarcKey {
    DmarcKey {
        policy_domain: "example.com".into(),
        source_ip: ip(source),
        disposition: if aligned {
            DmarcDisposition::None
        } else {
            DmarcDisposition::Reject
        },
        dkim_aligned: aligned,
        spf_aligned: aligned && source.starts_with("192."),
        header_from: header_from.into(),
        envelope_from: "example.com".into(),
        dkim_domain: if aligned {
            "example.com".into()
        } else {
            String::new()
        },
        dkim_selector: if aligned {
            "s2024".into()
        } else {
            String::new()
        },
        dkim_result: if aligned { "pass" } else { "none" }.into(),
        spf_domain: "example.com".into(),
        spf_helo: false,
        spf_result: if source.starts_with("192.") {
            "pass"
        } else {
            "fail"
        }
        .into(),
        policy: DmarcPolicyPublished {
            p: DmarcDisposition::Reject,
            sp: DmarcDisposition::Quarantine,
            adkim_strict: false,
            aspf_strict: true,
            testing: false,
        },
    }
}

/// The messages of one day with example.com's policy: passing from its servers, failing
/// from elsewhere.
fn messages() -> Vec<DmarcKey> {
    let mut messages = Vec::new();
    for _ in 0..7 {
        messages.push(message("192.0.2.10", "example.com", true));
    }
    for _ in 0..2 {
        messages.push(message("2001:db8::10", "example.com", true));
    }
    for _ in 0..4 {
        messages.push(message("203.0.113.66", "example.com", false));
    }
    messages.push(message("203.0.113.67", "news.example.com", false));
    messages
}

#[tokio::test]
async fn a_dmarc_report_is_built_from_the_messages_and_parses_back_to_their_counts() {
    let f = fixture(|_| {}).await;
    let messages = messages();
    for message in &messages {
        f.reporter.record_dmarc(NOON, message).await.unwrap();
    }
    let dns = &f.reporter.resolver;
    // Three destinations: in the domain, outside it and authorized (RFC 7489 7.1), outside
    // it and not.
    dns.set(
        "_dmarc.example.com",
        &["v=DMARC1; p=reject; sp=quarantine; aspf=s; \
           rua=mailto:dmarc@example.com,mailto:agg@reports.example.net!10m,\
           mailto:nosy@elsewhere.example"],
    );
    dns.set(
        "example.com._report._dmarc.reports.example.net",
        &["v=DMARC1"],
    );
    let due = f.reporter.due(NEXT_DAY).await.unwrap();
    assert_eq!(due.len(), 1, "{due:?}");
    let report = &due[0];
    assert_eq!(report.kind, ReportKind::Dmarc);
    assert_eq!(
        report.recipients,
        ["dmarc@example.com", "agg@reports.example.net"]
    );
    // RFC 7489 7.2.1.1.
    assert_eq!(
        header(&report.message, "Subject"),
        "Report Domain: example.com Submitter: mx.example.org Report-ID: \
         <2024-10-04.dmarc.example.com@mx.example.org>"
    );

    let parsed = Report::parse_rfc5322(&report.message, 1 << 20).unwrap();
    assert_eq!(parsed.report_id(), report.report_id);
    assert_eq!(parsed.org_name(), "Example Org");
    assert_eq!(parsed.email(), "reports@example.org");
    assert_eq!(parsed.domain(), "example.com");
    assert_eq!(parsed.date_range_begin(), (DAY * DAY_S) as u64);
    assert_eq!(parsed.date_range_end(), ((DAY + 1) * DAY_S - 1) as u64);
    assert_eq!(parsed.p(), mail_auth::report::Disposition::Reject);
    assert_eq!(parsed.sp(), mail_auth::report::Disposition::Quarantine);
    assert_eq!(parsed.aspf(), mail_auth::report::Alignment::Strict);
    assert_eq!(parsed.adkim(), mail_auth::report::Alignment::Relaxed);
    // Each (source, disposition, DKIM, SPF, From) as many times as the messages had it.
    type Row = (IpAddr, ActionDisposition, DmarcResult, DmarcResult, String);
    let mut expected: HashMap<Row, u32> = HashMap::new();
    for m in &messages {
        let result = |pass: bool| {
            if pass {
                DmarcResult::Pass
            } else {
                DmarcResult::Fail
            }
        };
        let disposition = match m.disposition {
            DmarcDisposition::None => ActionDisposition::None,
            DmarcDisposition::Quarantine => ActionDisposition::Quarantine,
            DmarcDisposition::Reject => ActionDisposition::Reject,
        };
        let row = (
            m.source_ip,
            disposition,
            result(m.dkim_aligned),
            result(m.spf_aligned),
            m.header_from.clone(),
        );
        *expected.entry(row).or_default() += 1;
    }
    let mut reported: HashMap<Row, u32> = HashMap::new();
    for record in parsed.records() {
        let row = (
            record.source_ip().unwrap(),
            record.action_disposition(),
            record.dmarc_dkim_result(),
            record.dmarc_spf_result(),
            record.header_from().to_owned(),
        );
        *reported.entry(row).or_default() += record.count();
        // auth_results: the DKIM signature of aligned mail, the SPF check of all.
        assert_eq!(
            record.dkim_auth_result().len(),
            usize::from(record.dmarc_dkim_result() == DmarcResult::Pass)
        );
        assert_eq!(record.spf_auth_result()[0].domain(), "example.com");
    }
    assert_eq!(reported, expected);
    let total: u32 = parsed.records().iter().map(Record::count).sum();
    assert_eq!(total as usize, messages.len());
}

#[tokio::test]
async fn dns_decides_whether_and_when_a_report_goes() {
    let f = fixture(|_| {}).await;
    let dns = &f.reporter.resolver;
    f.reporter
        .record_dmarc(NOON, &message("192.0.2.10", "example.com", true))
        .await
        .unwrap();
    // DNS failing: nothing built, nothing recorded; tried again at the next call.
    dns.fail("_dmarc.example.com");
    assert!(f.reporter.due(NEXT_DAY).await.unwrap().is_empty());
    let sent = &f.reporter.directory;
    assert!(
        sent.report_sent(ReportKind::Dmarc, "example.com", DAY)
            .await
            .unwrap()
            .is_none()
    );
    // A destination whose size limit the report passes is not sent to (RFC 7489 6.2): no
    // recipient left, so nothing goes and that is remembered.
    dns.set(
        "_dmarc.example.com",
        &["v=DMARC1; p=none; rua=mailto:tiny@example.com!1"],
    );
    assert!(f.reporter.due(NEXT_DAY).await.unwrap().is_empty());
    let recorded = sent
        .report_sent(ReportKind::Dmarc, "example.com", DAY)
        .await
        .unwrap()
        .unwrap();
    assert!(recorded.rua.is_empty());
    // Two DMARC records are none (RFC 7489 6.6.3).
    f.reporter
        .record_dmarc(NEXT_DAY, &message("192.0.2.10", "example.com", true))
        .await
        .unwrap();
    dns.set(
        "_dmarc.example.com",
        &[
            "v=DMARC1; p=none; rua=mailto:a@example.com",
            "v=DMARC1; p=none; rua=mailto:b@example.com",
        ],
    );
    assert!(f.reporter.due(NEXT_DAY + DAY_S).await.unwrap().is_empty());
    // Counters older than COUNTERS_KEPT_DAYS go.
    let later = NEXT_DAY + crate::COUNTERS_KEPT_DAYS * DAY_S + DAY_S;
    f.reporter.due(later).await.unwrap();
    assert!(
        sent.report_days(ReportKind::Dmarc)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A report message as other senders write them: a text part and one attachment.
fn mail_with(content_type: &str, filename: &str, body: &[u8]) -> Vec<u8> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(body);
    let mut lines = String::new();
    for chunk in encoded.as_bytes().chunks(76) {
        lines.push_str(std::str::from_utf8(chunk).unwrap());
        lines.push_str("\r\n");
    }
    format!(
        "From: noreply-dmarc@big.example\r\nTo: dmarc@example.org\r\n\
         Subject: Report Domain: example.org Submitter: big.example Report-ID: <1>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n\
         --b1\r\nContent-Type: text/plain\r\n\r\nA report.\r\n\
         --b1\r\nContent-Type: {content_type}\r\nContent-Transfer-Encoding: base64\r\n\
         Content-Disposition: attachment; filename=\"{filename}\"\r\n\r\n{lines}--b1--\r\n"
    )
    .into_bytes()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A zip archive of `entries`, deflated.
fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use mail_auth::zip::write::{SimpleFileOptions, ZipWriter};
    let mut writer = ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(mail_auth::zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(data).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// A DMARC aggregate report as RFC 7489 appendix C's schema has it (no namespace, `pct`),
/// written by hand the way large receivers send them: 12 messages passing, 3 failing.
const APPENDIX_C: &str = r#"<?xml version="1.0" encoding="UTF-8" ?>
<feedback>
  <report_metadata>
    <org_name>big.example</org_name>
    <email>noreply-dmarc@big.example</email>
    <extra_contact_info>https://big.example/dmarc</extra_contact_info>
    <report_id>5717107811868587391</report_id>
    <date_range>
      <begin>1727913600</begin>
      <end>1727999999</end>
    </date_range>
  </report_metadata>
  <policy_published>
    <domain>example.org</domain>
    <adkim>r</adkim>
    <aspf>r</aspf>
    <p>reject</p>
    <sp>reject</sp>
    <pct>100</pct>
  </policy_published>
  <record>
    <row>
      <source_ip>192.0.2.25</source_ip>
      <count>12</count>
      <policy_evaluated>
        <disposition>none</disposition>
        <dkim>pass</dkim>
        <spf>pass</spf>
      </policy_evaluated>
    </row>
    <identifiers>
      <header_from>example.org</header_from>
    </identifiers>
    <auth_results>
      <dkim>
        <domain>example.org</domain>
        <selector>s1</selector>
        <result>pass</result>
      </dkim>
      <spf>
        <domain>example.org</domain>
        <result>pass</result>
      </spf>
    </auth_results>
  </record>
  <record>
    <row>
      <source_ip>203.0.113.5</source_ip>
      <count>3</count>
      <policy_evaluated>
        <disposition>reject</disposition>
        <dkim>fail</dkim>
        <spf>fail</spf>
        <reason>
          <type>local_policy</type>
          <comment>not ours</comment>
        </reason>
      </policy_evaluated>
    </row>
    <identifiers>
      <header_from>example.org</header_from>
    </identifiers>
    <auth_results>
      <spf>
        <domain>spoofer.example</domain>
        <result>softfail</result>
      </spf>
    </auth_results>
  </record>
</feedback>
"#;

#[tokio::test]
async fn a_hand_written_appendix_c_report_is_stored_gzipped_zipped_or_plain() {
    let f = fixture(|_| {}).await;
    let forms = [
        mail_with(
            "application/gzip",
            "big.example!example.org!1727913600!1727999999.xml.gz",
            &gzip(APPENDIX_C.as_bytes()),
        ),
        mail_with(
            "application/zip",
            "big.example!example.org!1727913600!1727999999.zip",
            &zip(&[("report.xml", APPENDIX_C.as_bytes())]),
        ),
        mail_with("text/xml", "report.xml", APPENDIX_C.as_bytes()),
    ];
    let first = f.reporter.ingest(&forms[0], NOON).await.unwrap().unwrap();
    assert_eq!(first.kind, ReportKind::Dmarc);
    assert_eq!(first.org, "big.example");
    assert_eq!(first.report_id, "5717107811868587391");
    assert_eq!(first.domain, "example.org");
    assert_eq!((first.begin, first.end), (1_727_913_600, 1_727_999_999));
    assert_eq!((first.total, first.failed), (15, 3));
    // The same report in another form is the same report: kept once.
    for form in &forms[1..] {
        assert_eq!(f.reporter.ingest(form, NOON + 1).await.unwrap(), None);
    }
    let text = f.reporter.show(first.id).await.unwrap().unwrap();
    assert!(text.contains("messages: 15, failed DMARC: 3"), "{text}");
    assert!(text.contains("192.0.2.25"), "{text}");
    assert!(text.contains("203.0.113.5"), "{text}");
    assert!(text.contains("reject"), "{text}");
    assert_eq!(f.reporter.show(first.id + 1).await.unwrap(), None);
    // A zipped one with another ID, and the plain one with a third: three reports.
    let other = APPENDIX_C.replace("5717107811868587391", "second");
    let zipped = mail_with(
        "application/zip",
        "r.zip",
        &zip(&[("r.xml", other.as_bytes())]),
    );
    assert!(f.reporter.ingest(&zipped, NOON).await.unwrap().is_some());
    let third = APPENDIX_C.replace("5717107811868587391", "third");
    let plain = mail_with("text/xml", "report.xml", third.as_bytes());
    assert!(f.reporter.ingest(&plain, NOON).await.unwrap().is_some());
    assert_eq!(
        f.reporter
            .list(Some(ReportKind::Dmarc), 10)
            .await
            .unwrap()
            .len(),
        3
    );
}

fn tls_report(id: &str, domain: &str) -> TlsReport {
    TlsReport {
        organization_name: Some("Big Mail".into()),
        date_range: DateRange::from_timestamps(DAY * DAY_S, (DAY + 1) * DAY_S - 1),
        contact_info: Some("tlsrpt@big.example".into()),
        report_id: id.into(),
        policies: vec![Policy {
            policy: PolicyDetails {
                policy_type: PolicyType::Sts,
                policy_string: vec!["version: STSv1".into(), "mode: testing".into()],
                policy_domain: domain.into(),
                mx_host: vec!["mx.example.org".into()],
            },
            summary: Summary {
                total_success: 40,
                total_failure: 2,
            },
            failure_details: vec![
                FailureDetails::new(ResultType::CertificateExpired)
                    .with_receiving_mx_hostname("mx.example.org")
                    .with_receiving_ip(ip("192.0.2.25")),
            ],
        }],
    }
}

#[tokio::test]
async fn reports_generated_by_mail_auth_are_stored_and_shown() {
    let f = fixture(|_| {}).await;
    let tls = tls_report("2024-10-04T00:00:00Z_big.example", "example.org")
        .to_rfc5322(
            "example.org",
            "big.example",
            "tlsrpt@big.example",
            ["tls@example.org"].into_iter(),
        )
        .unwrap();
    let stored = f
        .reporter
        .ingest(tls.as_bytes(), NOON)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.kind, ReportKind::TlsRpt);
    assert_eq!((stored.total, stored.failed), (42, 2));
    assert_eq!(stored.org, "Big Mail");
    assert_eq!(stored.domain, "example.org");
    let text = f.reporter.show(stored.id).await.unwrap().unwrap();
    assert!(text.contains("sessions: 42, failed: 2"), "{text}");
    assert!(text.contains("CertificateExpired"), "{text}");
    // A subdomain of ours is ours.
    let sub = tls_report("sub", "mail.example.org")
        .to_rfc5322(
            "mail.example.org",
            "big.example",
            "t@big.example",
            ["t@example.org"].into_iter(),
        )
        .unwrap();
    assert!(
        f.reporter
            .ingest(sub.as_bytes(), NOON)
            .await
            .unwrap()
            .is_some()
    );

    let dmarc = Report::new()
        .with_org_name("Big Mail")
        .with_email("dmarc@big.example")
        .with_report_id("dmarc-1")
        .with_date_range_begin((DAY * DAY_S) as u64)
        .with_date_range_end(((DAY + 1) * DAY_S - 1) as u64)
        .with_domain("example.org")
        .with_record(
            Record::new()
                .with_source_ip(ip("192.0.2.25"))
                .with_count(9)
                .with_action_disposition(ActionDisposition::None)
                .with_dmarc_dkim_result(DmarcResult::Pass)
                .with_dmarc_spf_result(DmarcResult::Fail)
                .with_header_from("example.org"),
        )
        .to_rfc5322(
            "big.example",
            "dmarc@big.example",
            ["d@example.org"].into_iter(),
        )
        .unwrap();
    let stored = f
        .reporter
        .ingest(dmarc.as_bytes(), NOON)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.kind, stored.total, stored.failed),
        (ReportKind::Dmarc, 9, 0)
    );
    let listed = f.reporter.list(None, 10).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(
        f.reporter
            .list(Some(ReportKind::TlsRpt), 10)
            .await
            .unwrap()
            .len(),
        2
    );
    // Not about our domains: refused.
    let theirs = tls_report("x", "example.net")
        .to_rfc5322(
            "example.net",
            "big.example",
            "t@big.example",
            ["t@example.org"].into_iter(),
        )
        .unwrap();
    assert!(matches!(
        f.reporter.ingest(theirs.as_bytes(), NOON).await,
        Err(Error::NotOurDomain(d)) if d == "example.net"
    ));
}

#[tokio::test]
async fn past_reports_kept_max_the_oldest_received_go() {
    let f = fixture(|config| config.reports_kept_max = 3).await;
    for n in 0..5 {
        let message = tls_report(&format!("r{n}"), "example.org")
            .to_rfc5322(
                "example.org",
                "big.example",
                "t@big.example",
                ["t@example.org"].into_iter(),
            )
            .unwrap();
        f.reporter
            .ingest(message.as_bytes(), NOON + n)
            .await
            .unwrap()
            .unwrap();
    }
    let listed = f.reporter.list(None, 100).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|r| r.report_id.as_str()).collect();
    assert_eq!(ids, ["r4", "r3", "r2"]);
}

#[tokio::test]
async fn hostile_messages_are_errors_and_store_nothing() {
    let f = fixture(|_| {}).await;
    // Refused, with an error that names `why`.
    let assert_refused = |result: Result<Option<_>, Error>, why: &str| match result {
        Err(e @ (Error::Unreadable(_) | Error::NotAReport(_) | Error::MessageTooLarge { .. }))
            if e.to_string().contains(why) => {}
        other => panic!("{why}: {other:?}"),
    };
    // A gzip bomb: 20 MiB of zeros in about 20 KiB, past DECOMPRESSED_BYTES_MAX.
    let zeros = vec![0u8; 20 << 20];
    let bomb = mail_with("application/gzip", "r.xml.gz", &gzip(&zeros));
    assert!(bomb.len() < 200 << 10, "{}", bomb.len());
    assert_refused(
        f.reporter.ingest(&bomb, NOON).await,
        "decompresses to more than",
    );
    // The same as a zip entry.
    let bomb = mail_with("application/zip", "r.zip", &zip(&[("r.xml", &zeros)]));
    assert_refused(
        f.reporter.ingest(&bomb, NOON).await,
        "decompresses to more than",
    );
    // A TLS-RPT gzip bomb.
    let bomb = mail_with("application/tlsrpt+gzip", "r.json.gz", &gzip(&zeros));
    assert_refused(
        f.reporter.ingest(&bomb, NOON).await,
        "decompresses to more than",
    );
    // More entries than a report has.
    let entry: &[u8] = b"<feedback></feedback>";
    let entries: Vec<(&str, &[u8])> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| (*n, entry))
        .collect();
    assert!(entries.len() > ZIP_ENTRIES_MAX);
    let many = mail_with("application/zip", "r.zip", &zip(&entries));
    assert_refused(
        f.reporter.ingest(&many, NOON).await,
        "a zip archive of 5 entries",
    );
    // More attachments than a report has.
    let mut parts = String::new();
    for n in 0..=ATTACHMENTS_MAX {
        parts.push_str(&format!(
            "--b\r\nContent-Type: application/gzip\r\nContent-Transfer-Encoding: base64\r\n\
             Content-Disposition: attachment; filename=\"{n}.xml.gz\"\r\n\r\nAAAA\r\n"
        ));
    }
    let attachments = format!(
        "From: a@b.example\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n{parts}--b--\r\n"
    );
    assert_refused(
        f.reporter.ingest(attachments.as_bytes(), NOON).await,
        "attachments",
    );
    // Too large, garbage, no attachment, broken compression, broken XML and JSON.
    let huge = vec![b'a'; MESSAGE_BYTES_MAX + 1];
    assert_refused(f.reporter.ingest(&huge, NOON).await, "more than the");
    let garbage: Vec<u8> = (0..4096u32)
        .map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert_refused(
        f.reporter.ingest(&garbage, NOON).await,
        "no DMARC or TLS-RPT report",
    );
    assert_refused(
        f.reporter.ingest(b"", NOON).await,
        "no DMARC or TLS-RPT report",
    );
    let plain = b"From: a@b.example\r\nSubject: hello\r\n\r\nJust mail.\r\n";
    assert_refused(f.reporter.ingest(plain, NOON).await, "no report attachment");
    let broken = mail_with("application/gzip", "r.xml.gz", b"\x1f\x8b\x08\x00garbage");
    assert_refused(f.reporter.ingest(&broken, NOON).await, "decompressing");
    let broken = mail_with("application/zip", "r.zip", b"PK\x03\x04garbage");
    assert_refused(f.reporter.ingest(&broken, NOON).await, "decompressing");
    let xml = mail_with(
        "text/xml",
        "r.xml",
        b"<feedback><report_metadata><org_name>x",
    );
    assert_refused(f.reporter.ingest(&xml, NOON).await, "unreadable report");
    let json = mail_with(
        "application/tlsrpt+gzip",
        "r.json.gz",
        &gzip(b"{\"policies\": [1, 2"),
    );
    assert_refused(f.reporter.ingest(&json, NOON).await, "unreadable report");
    assert!(f.reporter.list(None, 100).await.unwrap().is_empty());
}

#[test]
fn a_bad_configuration_is_refused() {
    let check = |org: &str, submitter: &str, from: &str| Config::new(org, submitter, from).check();
    assert!(check("Org", "mx.example.org", "reports@example.org").is_ok());
    assert!(check("", "mx.example.org", "reports@example.org").is_err());
    assert!(check("Org", "mx example", "reports@example.org").is_err());
    assert!(check("Org", "mx.example.org", "reports").is_err());
    assert!(check("Org", "mx.example.org", "a <b@c>").is_err());
    assert!(check("Org\r\n", "mx.example.org", "reports@example.org").is_err());
}
