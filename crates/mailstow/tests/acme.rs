//! Certificates by ACME and the documents clients configure themselves from (issue 39), end to
//! end: a real ACME server (acme2certifier with its OpenSSL CA, `test_peers::Acme2Certifier`)
//! validates our HTTP-01 and TLS-ALPN-01 answers for names a real BIND resolves to our
//! loopback address; every TLS listener then presents the issued certificate without a
//! restart (checked with `openssl s_client` against the test CA), `acme renew` replaces it
//! in place, and the autoconfiguration documents served over that certificate name exactly
//! the ports and TLS modes the server answers.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, mailstow, must, set_up_data_dir};
use test_peers::{Acme2Certifier, AcmeOptions, Bind, Zone};

/// The names of the host and of the domain `set_up_data_dir` makes.
const HOST: &str = "mail.example.test";

struct World {
    _bind: Bind,
    acme: Acme2Certifier,
    address: Ipv4Addr,
    resolver: SocketAddr,
}

fn world() -> World {
    let address = test_peers::free_loopback_address(&[80, 443]).expect("a loopback address");
    let records =
        format!("mail A {address}\nmta-sts A {address}\nautoconfig A {address}\n@ MX 10 mail\n");
    let bind = Bind::start(&[Zone::unsigned("example.test.", &records)]).expect("BIND");
    let acme = Acme2Certifier::start(&AcmeOptions {
        dns: bind.resolver(),
        validity_days: 2,
    })
    .expect("acme2certifier");
    World {
        resolver: bind.resolver(),
        _bind: bind,
        acme,
        address,
    }
}

fn config_with(world: &World, challenge: &str, acme_extra: &str) -> String {
    let http = if challenge == "http-01" {
        format!("{}:80", world.address)
    } else {
        String::new()
    };
    format!(
        "[server]\nhostname = \"{HOST}\"\ndns_servers = [\"{resolver}\"]\n\
         https = \"{address}:443\"\nhttp = \"{http}\"\n\n\
         [acme]\ndirectory_url = \"{url}\"\ncontact = [\"mailto:admin@example.test\"]\n\
         ca_file = \"{ca}\"\nchallenge = \"{challenge}\"\n{acme_extra}",
        resolver = world.resolver,
        address = world.address,
        url = world.acme.directory_url(),
        ca = world.acme.ca_cert_path().display(),
    )
}

/// `mailstow acme status` as `key: value` pairs.
fn status(data: &Path) -> Vec<(String, String)> {
    must(mailstow(data, &["acme", "status"]))
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn status_of(data: &Path, key: &str) -> String {
    status(data)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// Waits until ACME has a certificate in place.
fn wait_for_certificate(data: &Path, server: &Server, world: &World) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while status_of(data, "names") == "-" || status_of(data, "names").is_empty() {
        assert!(
            Instant::now() < deadline,
            "no certificate in time: {:?}\n{}\nACME server:\n{}",
            status(data),
            server.output().join("\n"),
            world.acme.log_tail()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// What a TLS client sees at `address` (`starttls`: openssl's protocol name, or none for
/// implicit TLS), verifying against the test CA for `name`: the leaf's SHA-256 fingerprint,
/// or the verification failure.
fn presented(
    address: SocketAddr,
    starttls: Option<&str>,
    name: &str,
    ca: &Path,
) -> Result<String, String> {
    let mut command = Command::new("openssl");
    command
        .args([
            "s_client",
            "-connect",
            &address.to_string(),
            "-servername",
            name,
        ])
        .arg("-CAfile")
        .arg(ca)
        .args([
            "-verify_return_error",
            "-verify_hostname",
            name,
            "-showcerts",
        ]);
    if let Some(protocol) = starttls {
        command.args(["-starttls", protocol]);
    }
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() || !text.contains("Verify return code: 0 (ok)") {
        return Err(format!(
            "{text}\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let pem_start = text
        .find("-----BEGIN CERTIFICATE-----")
        .ok_or("no certificate")?;
    let pem_end = text[pem_start..]
        .find("-----END CERTIFICATE-----")
        .map(|e| pem_start + e + "-----END CERTIFICATE-----".len())
        .ok_or("no certificate end")?;
    let mut child = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl x509");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&text.as_bytes()[pem_start..pem_end])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim()
        .rsplit('=')
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Every TLS listener, with how a client starts TLS on it.
fn tls_listeners(server: &Server, world: &World) -> Vec<(SocketAddr, Option<&'static str>)> {
    let addr = |s: &str| server.addr(s).parse::<SocketAddr>().unwrap();
    vec![
        (addr("smtp"), Some("smtp")),
        (addr("submission"), Some("smtp")),
        (addr("submissions"), None),
        (addr("imap"), Some("imap")),
        (addr("imaps"), None),
        (addr("pop3"), Some("pop3")),
        (addr("pop3s"), None),
        (addr("managesieve"), Some("sieve")),
        (SocketAddr::from((world.address, 443)), None),
    ]
}

fn every_listener_presents(server: &Server, world: &World) -> String {
    let ca = world.acme.ca_cert_path();
    let mut seen = Vec::new();
    for (address, starttls) in tls_listeners(server, world) {
        let fingerprint = presented(address, starttls, HOST, ca)
            .unwrap_or_else(|e| panic!("{address} ({starttls:?}): {e}"));
        seen.push(fingerprint);
    }
    seen.dedup();
    assert_eq!(
        seen.len(),
        1,
        "listeners present different certificates: {seen:?}"
    );
    seen.pop().unwrap()
}

fn start(challenge: &str) -> (World, tempfile::TempDir, std::path::PathBuf, Server) {
    start_with(challenge, "")
}

fn start_with(
    challenge: &str,
    acme_extra: &str,
) -> (World, tempfile::TempDir, std::path::PathBuf, Server) {
    let world = world();
    let (dir, data) = set_up_data_dir();
    let config_path = dir.path().join("mailstow.toml");
    std::fs::write(&config_path, config_with(&world, challenge, acme_extra)).unwrap();
    let server = Server::start_with(&data, Some(&config_path));
    (world, dir, data, server)
}

#[test]
fn http_01_certificate_reaches_every_listener_and_renews_without_a_restart() {
    let (world, _dir, data, server) = start("http-01");
    wait_for_certificate(&data, &server, &world);
    let names = status_of(&data, "names");
    for name in [HOST, "mta-sts.example.test", "autoconfig.example.test"] {
        assert!(names.contains(name), "{names}");
    }
    let days: i64 = status_of(&data, "days_left").parse().unwrap();
    assert!((0..=2).contains(&days), "{days}");
    // By default renewed when a third of its 2 days remains: about 32 hours after issue.
    let issued: u64 = status_of(&data, "last_attempt").parse().unwrap();
    let next: u64 = status_of(&data, "next_attempt").parse().unwrap();
    assert!(
        (24 * 3600..40 * 3600).contains(&(next - issued)),
        "issued {issued}, next {next}"
    );
    let first = every_listener_presents(&server, &world);

    // The operator renews: a new certificate (same key), in force at the next handshake.
    let renewed = must(mailstow(&data, &["acme", "renew"]));
    assert!(renewed.contains("certificate issued"), "{renewed}");
    let second = every_listener_presents(&server, &world);
    assert_ne!(
        first, second,
        "the renewed certificate is not the one presented"
    );
    assert!(renewed.contains(&second), "{renewed} vs {second}");
    server.stop_cleanly();
}

#[test]
fn tls_alpn_01_certificate_is_obtained_on_the_https_listener_alone() {
    // A 2-day certificate asked to be renewed 3 days before its end: always due, so the
    // schedule says soon (the least interval between two issues), not in days.
    let (world, _dir, data, server) = start_with("tls-alpn-01", "renew_before_days = 3\n");
    wait_for_certificate(&data, &server, &world);
    every_listener_presents(&server, &world);
    let issued: u64 = status_of(&data, "last_attempt").parse().unwrap();
    let next: u64 = status_of(&data, "next_attempt").parse().unwrap();
    assert!(
        next >= issued && next - issued <= 3600,
        "a short-lived certificate is renewed within the hour: issued {issued}, next {next}"
    );
    let log = server.output().join("\n");
    assert!(
        !log.contains("http listening"),
        "no HTTP listener was asked for"
    );
    server.stop_cleanly();
}

fn curl(world: &World, args: &[&str]) -> String {
    let resolve: Vec<String> = [HOST, "autoconfig.example.test", "mta-sts.example.test"]
        .iter()
        .flat_map(|name| {
            [
                "--resolve".to_string(),
                format!("{name}:443:{}", world.address),
            ]
        })
        .chain([HOST, "autoconfig.example.test"].iter().flat_map(|name| {
            [
                "--resolve".to_string(),
                format!("{name}:80:{}", world.address),
            ]
        }))
        .collect();
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(world.acme.ca_cert_path())
        .args(&resolve)
        .args(args)
        .output()
        .expect("curl");
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `<tag>value</tag>` values in order.
fn values(xml: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    xml.match_indices(&open)
        .filter_map(|(at, _)| {
            let rest = &xml[at + open.len()..];
            rest.find(&close).map(|end| rest[..end].trim().to_string())
        })
        .collect()
}

/// Checks that `port` answers in `mode` (`SSL`/`STARTTLS` for the Thunderbird names,
/// implicit TLS or STARTTLS) with our certificate, for `protocol`.
fn answers(world: &World, port: u16, implicit: bool, protocol: &str) {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let starttls = (!implicit).then_some(match protocol {
        "imap" => "imap",
        "pop3" => "pop3",
        _ => "smtp",
    });
    presented(address, starttls, HOST, world.acme.ca_cert_path())
        .unwrap_or_else(|e| panic!("{protocol} port {port} implicit={implicit}: {e}"));
}

#[test]
fn clients_configure_themselves_from_what_the_server_really_offers() {
    let (world, _dir, data, server) = start("http-01");
    wait_for_certificate(&data, &server, &world);

    // Thunderbird, over HTTPS on the domain's autoconfig host, and over plain HTTP.
    let xml = curl(
        &world,
        &["https://autoconfig.example.test/mail/config-v1.1.xml?emailaddress=alice@example.test"],
    );
    let plain = curl(
        &world,
        &["http://autoconfig.example.test/mail/config-v1.1.xml?emailaddress=alice@example.test"],
    );
    assert_eq!(xml, plain);
    let well_known = curl(
        &world,
        &[&format!(
            "https://{HOST}/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=alice@example.test"
        )],
    );
    assert_eq!(xml, well_known);
    let hostnames = values(&xml, "hostname");
    let ports = values(&xml, "port");
    let modes = values(&xml, "socketType");
    assert!(!ports.is_empty(), "{xml}");
    assert!(hostnames.iter().all(|h| h == HOST), "{xml}");
    let types: Vec<String> = xml
        .match_indices("Server type=\"")
        .map(|(at, m)| xml[at + m.len()..].split('"').next().unwrap().to_string())
        .collect();
    assert_eq!(types.len(), ports.len(), "{xml}");
    for ((kind, port), mode) in types.iter().zip(&ports).zip(&modes) {
        answers(&world, port.parse().unwrap(), mode == "SSL", kind);
    }
    // Every client-facing listener is advertised.
    for service in [
        "imap",
        "imaps",
        "pop3",
        "pop3s",
        "submission",
        "submissions",
    ] {
        let port = server.addr(service).rsplit(':').next().unwrap().to_string();
        assert!(ports.contains(&port), "{service} {port} not in {xml}");
    }
    // An unknown domain learns nothing.
    let unknown = curl(
        &world,
        &[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "https://autoconfig.example.test/mail/config-v1.1.xml?emailaddress=x@elsewhere.test",
        ],
    );
    assert_eq!(unknown, "404");

    // Outlook's POX Autodiscover.
    let request = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\
        <Autodiscover xmlns=\"http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006\">\
        <Request><EMailAddress>alice@example.test</EMailAddress>\
        <AcceptableResponseSchema>http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a</AcceptableResponseSchema>\
        </Request></Autodiscover>";
    let pox = curl(
        &world,
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: text/xml",
            "--data-binary",
            request,
            &format!("https://{HOST}/autodiscover/autodiscover.xml"),
        ],
    );
    let kinds = values(&pox, "Type");
    let pox_ports = values(&pox, "Port");
    let encryption = values(&pox, "Encryption");
    assert_eq!(kinds.len(), pox_ports.len(), "{pox}");
    assert!(values(&pox, "Server").iter().all(|h| h == HOST), "{pox}");
    assert!(
        values(&pox, "LoginName")
            .iter()
            .all(|l| l == "alice@example.test"),
        "{pox}"
    );
    for ((kind, port), enc) in kinds.iter().zip(&pox_ports).zip(&encryption) {
        answers(
            &world,
            port.parse().unwrap(),
            enc == "SSL",
            &kind.to_ascii_lowercase().replace("smtp", "submission"),
        );
    }

    // The MTA-STS policy, on its own name.
    let policy = curl(
        &world,
        &["https://mta-sts.example.test/.well-known/mta-sts.txt"],
    );
    assert!(policy.contains("mode: enforce"), "{policy}");
    assert!(policy.contains(&format!("mx: {HOST}")), "{policy}");

    // The Apple profile, for a logged-in user.
    let jar = data.parent().unwrap().join("cookies");
    let jar = jar.to_str().unwrap();
    curl(
        &world,
        &[
            "-c",
            jar,
            "-o",
            "/dev/null",
            "--data",
            "username=alice@example.test&password=secret-pw",
            &format!("https://{HOST}/login"),
        ],
    );
    let profile = curl(
        &world,
        &["-b", jar, &format!("https://{HOST}/account/mobileconfig")],
    );
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import plistlib,sys; p=plistlib.loads(sys.stdin.buffer.read()); m=p['PayloadContent'][0]; \
             print(m['IncomingMailServerHostName'], m['IncomingMailServerPortNumber'], m['IncomingMailServerUseSSL'], \
             m['OutgoingMailServerHostName'], m['OutgoingMailServerPortNumber'], m['OutgoingMailServerUseSSL'], m['EmailAddress'])",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(profile.as_bytes())?;
            child.wait_with_output()
        })
        .expect("python3 plistlib");
    let line = String::from_utf8_lossy(&parsed.stdout).into_owned();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 7, "{line} {profile}");
    assert_eq!(fields[0], HOST);
    answers(
        &world,
        fields[1].parse().unwrap(),
        fields[2] == "True",
        "imap",
    );
    assert_eq!(fields[3], HOST);
    answers(
        &world,
        fields[4].parse().unwrap(),
        fields[5] == "True",
        "submission",
    );
    assert_eq!(fields[6], "alice@example.test");

    // Plain HTTP sends everything else to HTTPS.
    let redirect = curl(
        &world,
        &[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{redirect_url}",
            &format!("http://{HOST}/mail"),
        ],
    );
    assert_eq!(redirect, format!("308 https://{HOST}/mail"));
    server.stop_cleanly();
}
