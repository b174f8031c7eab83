//! Where reports go, asked of a real name server: BIND's `named` (Debian's `bind9` package)
//! serving zones on loopback, through hickory's resolver as the server uses it. Skipped, with
//! a message, when `named` is not installed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use directory::{
    DAY_S, Directory, DmarcDisposition, DmarcKey, DmarcPolicyPublished, ReportKind, TlsPolicyType,
    TlsSessionKey,
};
use hickory_resolver::Resolver;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use reports::{Config, Reporter};

const NAMED: &str = "/usr/sbin/named";

/// A `named` serving `zones` (name, records after the SOA and NS) on 127.0.0.1; stopped when
/// dropped.
struct Named {
    _dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Named {
    fn start(zones: &[(&str, &str)]) -> Option<Named> {
        if !Path::new(NAMED).exists() {
            eprintln!("skipping: {NAMED} is not installed (Debian package bind9)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let root = dir.path().display();
        let mut conf = format!(
            "options {{ directory \"{root}\"; pid-file \"{root}/named.pid\"; \
             listen-on port {port} {{ 127.0.0.1; }}; listen-on-v6 {{ none; }}; \
             recursion no; dnssec-validation no; }};\n"
        );
        for (name, records) in zones {
            let file = dir.path().join(format!("{name}.zone"));
            let zone = format!(
                "$TTL 60\n@ IN SOA ns.{name}. hostmaster.{name}. 1 60 60 600 60\n\
                 @ IN NS ns.{name}.\nns IN A 127.0.0.1\n{records}\n"
            );
            std::fs::write(&file, zone).unwrap();
            conf.push_str(&format!(
                "zone \"{name}\" {{ type primary; file \"{}\"; }};\n",
                file.display()
            ));
        }
        let conf_path = dir.path().join("named.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(NAMED)
            .args(["-g", "-n", "1", "-c"])
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let named = Named {
            _dir: dir,
            child,
            port,
        };
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let start = Instant::now();
        while TcpStream::connect(address).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "named did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(named)
    }

    /// A resolver asking only this server, as `sender_auth::resolver` builds one.
    fn resolver(&self) -> hickory_resolver::TokioResolver {
        let mut udp = ConnectionConfig::udp();
        udp.port = self.port;
        let mut tcp = ConnectionConfig::tcp();
        tcp.port = self.port;
        let server = NameServerConfig::new(IpAddr::V4(Ipv4Addr::LOCALHOST), true, vec![udp, tcp]);
        let mut builder = Resolver::builder_with_config(
            ResolverConfig::from_name_servers(vec![server]),
            TokioRuntimeProvider::default(),
        );
        builder.options_mut().timeout = Duration::from_secs(2);
        builder.build().unwrap()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const DAY: i64 = 20_000;
const NOON: i64 = DAY * DAY_S + DAY_S / 2;
const NEXT_DAY: i64 = (DAY + 1) * DAY_S + 60;

fn session(domain: &str) -> TlsSessionKey {
    TlsSessionKey {
        policy_domain: domain.into(),
        policy_type: TlsPolicyType::NoPolicyFound,
        policy_strings: Vec::new(),
        mx_host: format!("mx.{domain}"),
        receiving_ip: Some("192.0.2.1".parse().unwrap()),
        failure: None,
    }
}

fn message(domain: &str) -> DmarcKey {
    DmarcKey {
        policy_domain: domain.into(),
        source_ip: "192.0.2.9".parse().unwrap(),
        disposition: DmarcDisposition::None,
        dkim_aligned: true,
        spf_aligned: true,
        header_from: domain.into(),
        envelope_from: domain.into(),
        dkim_domain: domain.into(),
        dkim_selector: "s1".into(),
        dkim_result: "pass".into(),
        spf_domain: domain.into(),
        spf_helo: false,
        spf_result: "pass".into(),
        policy: DmarcPolicyPublished {
            p: DmarcDisposition::Reject,
            sp: DmarcDisposition::Reject,
            adkim_strict: false,
            aspf_strict: false,
            testing: false,
        },
    }
}

#[tokio::test]
async fn recipients_come_from_the_records_a_name_server_publishes() {
    let Some(named) = Named::start(&[
        (
            "example.com",
            "_smtp._tls IN TXT \"v=TLSRPTv1; rua=mailto:tls@example.com\"\n\
             _dmarc IN TXT \"v=DMARC1; p=reject; \" \"rua=mailto:dmarc@example.com,\
             mailto:agg@reports.example.net,mailto:nosy@elsewhere.example\"",
        ),
        (
            "reports.example.net",
            "example.com._report._dmarc IN TXT \"v=DMARC1\"",
        ),
        ("elsewhere.example", "www IN A 192.0.2.80"),
        ("example.net", "www IN A 192.0.2.81"),
    ]) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let directory = Directory::open(&temp.path().join("directory.db"))
        .await
        .unwrap();
    let config = Config::new("Example Org", "mx.example.org", "reports@example.org");
    let reporter = Reporter::new(directory.clone(), named.resolver(), config).unwrap();
    for domain in ["example.com", "example.net"] {
        reporter.record_tls(NOON, &session(domain)).await.unwrap();
        reporter.record_dmarc(NOON, &message(domain)).await.unwrap();
    }
    let mut due = reporter.due(NEXT_DAY).await.unwrap();
    due.sort_by_key(|r| r.kind);
    let recipients: Vec<(ReportKind, &str, Vec<String>)> = due
        .iter()
        .map(|r| (r.kind, r.domain.as_str(), r.recipients.clone()))
        .collect();
    // The TXT record's two strings are one (RFC 7489 6.6.3); the destination outside the
    // domain with an authorization record is kept, the one without is not (RFC 7489 7.1).
    assert_eq!(
        recipients,
        [
            (
                ReportKind::TlsRpt,
                "example.com",
                vec!["tls@example.com".to_owned()]
            ),
            (
                ReportKind::Dmarc,
                "example.com",
                vec![
                    "dmarc@example.com".to_owned(),
                    "agg@reports.example.net".to_owned()
                ]
            ),
        ]
    );
    // example.net publishes neither record: remembered as asking for nothing.
    for kind in [ReportKind::TlsRpt, ReportKind::Dmarc] {
        let sent = directory
            .report_sent(kind, "example.net", DAY)
            .await
            .unwrap();
        assert!(sent.unwrap().rua.is_empty(), "{kind}");
    }
    for report in &due {
        reporter.mark_sent(report, NEXT_DAY).await.unwrap();
    }
    assert!(reporter.due(NEXT_DAY).await.unwrap().is_empty());
}
