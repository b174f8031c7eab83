//! `HickoryLookup` against a real authoritative server: BIND's `named` on a loopback port,
//! serving the zone text we print. Every record type comes back in the presentation form
//! the check compares, so a zone published as printed checks clean.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dns_records::*;

/// How long `named` may take to load the zone and listen.
const NAMED_START_MAX: Duration = Duration::from_secs(20);

/// A `named` we started; killed (by its pid) when dropped.
struct Named {
    child: Child,
    address: SocketAddr,
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Named {
    /// Serves `zone` for `origin` on 127.0.0.1 at a free port, from files in `dir`.
    fn start(dir: &Path, origin: &str, zone: &str) -> Named {
        let port = free_port();
        let zone_path = dir.join("zone");
        std::fs::write(&zone_path, zone).unwrap();
        let d = dir.display();
        let conf = format!(
            "options {{ directory \"{d}\"; listen-on port {port} {{ 127.0.0.1; }}; \
             listen-on-v6 {{ none; }}; pid-file \"{d}/named.pid\"; \
             session-keyfile \"{d}/session.key\"; recursion no; dnssec-validation no; }};\n\
             controls {{ }};\n\
             zone \"{origin}\" {{ type primary; file \"{}\"; }};\n",
            zone_path.display()
        );
        let conf_path = dir.join("named.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let log_path = dir.join("named.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let program = ["/usr/sbin/named", "named"]
            .into_iter()
            .find(|p| !p.starts_with('/') || Path::new(p).exists())
            .unwrap();
        let child = Command::new(program)
            .arg("-g")
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("named (Debian package bind9) must be installed");
        let named = Named {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + NAMED_START_MAX;
        loop {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if log.contains("running") {
                return named;
            }
            assert!(
                Instant::now() < deadline && !log.contains("exiting"),
                "named did not start:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A port free for both UDP and TCP on 127.0.0.1 (at the moment of asking).
fn free_port() -> u16 {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn facts() -> Facts {
    Facts {
        domain: "example.org".into(),
        hostname: "mail.example.org".into(),
        addresses: vec![
            "192.0.2.10".parse().unwrap(),
            "2001:db8::10".parse().unwrap(),
        ],
        dkim: vec![
            DkimKey {
                selector: "ed".into(),
                txt_value: "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
                    .into(),
            },
            // Longer than one TXT string: published split, read back joined.
            DkimKey {
                selector: "rsa".into(),
                txt_value: format!("v=DKIM1; k=rsa; p={}", "MIIB".repeat(100)),
            },
        ],
        mta_sts: Some(MtaSts {
            id: "20260101".into(),
            mode: MtaStsMode::Testing,
        }),
        tls_rpt_rua: Some("mailto:tls-reports@example.org".into()),
        dmarc: Dmarc {
            policy: DmarcPolicy::Quarantine,
            rua: None,
        },
        services: vec![
            Service {
                name: ServiceName::Submissions,
                port: 465,
            },
            Service {
                name: ServiceName::Imaps,
                port: 993,
            },
        ],
        tlsa: vec![Tlsa {
            usage: 3,
            selector: 1,
            matching: 1,
            data_hex: "0123456789ABCDEF".repeat(4),
        }],
        autoconfig: true,
    }
}

fn zone(records_text: &str) -> String {
    format!(
        "$TTL 300\n\
         example.org. IN SOA ns.example.org. hostmaster.example.org. 1 3600 600 86400 300\n\
         example.org. IN NS ns.example.org.\n\
         ns.example.org. IN A 127.0.0.1\n\
         {records_text}"
    )
}

#[tokio::test]
async fn a_zone_published_as_printed_checks_clean() {
    let expected = records(&facts()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let named = Named::start(dir.path(), "example.org", &zone(&zone_text(&expected)));
    let lookup = HickoryLookup::new(&[named.address]).unwrap();

    let findings = check(&lookup, &expected).await;
    let report = render_findings(&findings);
    for finding in &findings {
        assert_eq!(finding.verdict, Verdict::Ok, "{report}");
    }
    assert!(
        report.ends_with(&format!(
            "{0} records: {0} ok, 0 missing, 0 wrong, 0 unavailable\n",
            expected.len()
        )),
        "{report}"
    );
    // The forms the comparison relies on, as hickory hands them over.
    let rsa = lookup.query("rsa._domainkey.example.org.", Kind::Txt).await;
    assert_eq!(
        rsa,
        Answer::Records(vec![facts().dkim[1].txt_value.clone()])
    );
    let tlsa = lookup.query("_25._tcp.mail.example.org.", Kind::Tlsa).await;
    let data = "0123456789abcdef".repeat(4);
    assert_eq!(tlsa, Answer::Records(vec![format!("3 1 1 {data}")]));
    let pop3 = lookup.query("_pop3._tcp.example.org.", Kind::Srv).await;
    assert_eq!(pop3, Answer::Records(vec!["0 0 0 .".into()]));
    let alias = lookup.query("autoconfig.example.org.", Kind::Cname).await;
    assert_eq!(alias, Answer::Records(vec!["mail.example.org.".into()]));
    let nothing = lookup.query("nothing.example.org.", Kind::Txt).await;
    assert_eq!(nothing, Answer::NoRecords);
    let no_mx_there = lookup.query("mail.example.org.", Kind::Mx).await;
    assert_eq!(no_mx_there, Answer::NoRecords);
}

#[tokio::test]
async fn a_name_server_that_does_not_answer_is_unavailable_not_missing() {
    // A port with nothing behind it: UDP is refused, and so is TCP.
    let port = free_port();
    let server = SocketAddr::from(([127, 0, 0, 1], port));
    let lookup = HickoryLookup::with_timeout(&[server], Duration::from_millis(300)).unwrap();
    let expected: Vec<Record> = records(&facts())
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == Kind::Mx)
        .collect();
    let findings = check(&lookup, &expected).await;
    assert!(
        matches!(findings[0].verdict, Verdict::Unavailable(_)),
        "{findings:?}"
    );
}
