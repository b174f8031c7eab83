//! Our domains cannot be forged and our mail is trusted: DKIM keys made by `mailstow dkim
//! generate` sign submitted mail (verified by an independent implementation, Python's
//! dkimpy), and mail on the MX port is checked with SPF, DKIM and DMARC against a loopback
//! DNS zone. The real binary over real sockets.

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{FakeDns, Server, base64, mailstow, must, set_up_data_dir, smtp_reply};

const HOSTNAME: &str = "mx.example.test";

/// `mailstow dkim generate`'s `name:` and `record:` lines.
fn generate(data: &Path, domain: &str, selector: &str, algorithm: &str) -> (String, String) {
    let out = must(mailstow(
        data,
        &[
            "dkim",
            "generate",
            domain,
            "--selector",
            selector,
            "--algorithm",
            algorithm,
        ],
    ));
    let field = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .to_string()
    };
    (field("name: "), field("record: "))
}

fn start(data: &Path, dns: &FakeDns) -> Server {
    let config = data.parent().unwrap().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nhostname = \"{HOSTNAME}\"\nauth_without_tls = true\n\
             dns_servers = [\"{}\"]\n",
            dns.address
        ),
    )
    .unwrap();
    Server::start_with(data, Some(&config))
}

/// One SMTP transaction on the MX port from 127.0.0.1; the code after the data (or the first
/// refusal).
fn mx(server: &Server, mail_from: &str, to: &str, message: &str) -> (u16, String) {
    let stream = TcpStream::connect(server.addr("smtp")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    assert_eq!(smtp_reply(&mut reader).unwrap(), 220);
    writer
        .write_all(
            format!(
                "EHLO client.remote.test\r\nMAIL FROM:<{mail_from}>\r\nRCPT TO:<{to}>\r\nDATA\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    for expected in [250, 250, 250, 354] {
        let code = smtp_reply(&mut reader).unwrap();
        if code != expected {
            return (code, String::new());
        }
    }
    writer.write_all(message.as_bytes()).unwrap();
    writer.write_all(b".\r\n").unwrap();
    // The last reply line, for its text.
    let last = loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.as_bytes().get(3) != Some(&b'-') {
            break line;
        }
    };
    let code = last.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, last)
}

/// alice@example.test submits `message` on the submission port (AUTH PLAIN).
fn submit(server: &Server, user: &str, to: &str, message: &str) {
    let stream = TcpStream::connect(server.addr("submission")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    assert_eq!(smtp_reply(&mut reader).unwrap(), 220);
    let plain = base64(format!("\0{user}\0secret-pw").as_bytes());
    writer
        .write_all(
            format!(
                "EHLO laptop\r\nAUTH PLAIN {plain}\r\nMAIL FROM:<{user}>\r\nRCPT TO:<{to}>\r\nDATA\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    for code in [250, 235, 250, 250, 354] {
        assert_eq!(smtp_reply(&mut reader).unwrap(), code);
    }
    writer.write_all(message.as_bytes()).unwrap();
    writer.write_all(b".\r\nQUIT\r\n").unwrap();
    assert_eq!(smtp_reply(&mut reader).unwrap(), 250);
}

/// The newest message in `user`'s INBOX, raw (IMAP FETCH BODY.PEEK[]), once it is there.
fn newest(server: &Server, user: &str, count: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stream = TcpStream::connect(server.addr("imap")).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        writer
            .write_all(
                format!("l LOGIN {user} secret-pw\r\ns SELECT INBOX\r\nf FETCH * BODY.PEEK[]\r\n")
                    .as_bytes(),
            )
            .unwrap();
        let mut exists = 0;
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                panic!("connection closed");
            }
            if let Some(n) = line
                .strip_prefix("* ")
                .and_then(|l| l.strip_suffix(" EXISTS\r\n"))
            {
                exists = n.parse().unwrap();
            }
            if line.contains("FETCH (BODY[] {") && exists >= count {
                let size: usize = line
                    .rsplit_once('{')
                    .and_then(|(_, n)| n.trim_end().strip_suffix('}'))
                    .and_then(|n| n.parse().ok())
                    .unwrap();
                let mut body = vec![0; size];
                reader.read_exact(&mut body).unwrap();
                return body;
            }
            if line.starts_with("f ") {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{user} never got {count} messages"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs dkimpy on `message` with the key record `record` at `name`.
fn dkimpy(name: &str, record: &str, message: &[u8]) -> String {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sender-auth/tests/dkimpy_verify.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args([name, record])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(message).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(2), "dkimpy missing: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn submitted_mail_is_dkim_signed_and_dkimpy_verifies_it() {
    let (_dir, data) = set_up_data_dir();
    must(mailstow(&data, &["domain", "add", "other.test"]));
    must(mailstow(
        &data,
        &["user", "add", "carol@other.test", "--password", "secret-pw"],
    ));
    let (ed_name, ed_record) = generate(&data, "example.test", "s1", "ed25519");
    let (rsa_name, rsa_record) = generate(&data, "other.test", "big", "rsa");
    assert!(
        ed_record.starts_with("v=DKIM1; k=ed25519; p="),
        "{ed_record}"
    );
    assert!(rsa_record.starts_with("v=DKIM1; k=rsa; p="), "{rsa_record}");
    let listed = must(mailstow(&data, &["dkim", "list"]));
    assert!(
        listed.contains("example.test s1 ed25519 signing v=DKIM1"),
        "{listed}"
    );
    let dns = FakeDns::start(&[]);
    let log = data.parent().unwrap().join("mail.log");
    let config = data.parent().unwrap().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nhostname = \"{HOSTNAME}\"\nauth_without_tls = true\n\
             dns_servers = [\"{}\"]\n[log]\nfile = \"{}\"\nlevel = \"info\"\n",
            dns.address,
            log.display()
        ),
    )
    .unwrap();
    let server = Server::start_opts(&data, Some(&config), None, &[]);

    let message = "From: Alice <alice@example.test>\r\nTo: bob@example.test\r\n\
                   Subject: signed\r\nDate: Wed, 25 Nov 2026 10:00:00 +0000\r\n\
                   Message-ID: <signed@example.test>\r\n\r\nThe body.\r\n";
    submit(&server, "alice@example.test", "bob@example.test", message);
    let delivered = newest(&server, "bob@example.test", 1);
    let text = String::from_utf8_lossy(&delivered);
    assert!(
        text.contains("DKIM-Signature: v=1; a=ed25519-sha256;") && text.contains("d=example.test"),
        "{text}"
    );
    assert_eq!(dkimpy(&ed_name, &ed_record, &delivered), "valid");
    // Changed in transit: dkimpy refuses it.
    let tampered = text.replace("The body.", "The b0dy.");
    let verdict = dkimpy(&ed_name, &ed_record, tampered.as_bytes());
    assert!(verdict.starts_with("invalid"), "{verdict}");

    let message = "From: carol@other.test\r\nTo: bob@example.test\r\nSubject: rsa\r\n\r\nhi\r\n";
    submit(&server, "carol@other.test", "bob@example.test", message);
    let delivered = newest(&server, "bob@example.test", 2);
    assert!(String::from_utf8_lossy(&delivered).contains("a=rsa-sha256"));
    assert_eq!(dkimpy(&rsa_name, &rsa_record, &delivered), "valid");
    // The mail log says which key signed each (`dkim=` is for checks of MX mail).
    let text = std::fs::read_to_string(&log).unwrap();
    let accepted: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("event=accepted") && l.contains("proto=submission"))
        .collect();
    assert_eq!(accepted.len(), 2, "{text}");
    assert!(
        accepted[0].contains(" dkim=- ") && accepted[0].contains(" dkim_signed=example.test:s1 "),
        "{}",
        accepted[0]
    );
    assert!(
        accepted[1].contains(" dkim_signed=other.test:big "),
        "{}",
        accepted[1]
    );
    server.stop_cleanly();
}

#[test]
fn mx_mail_is_checked_with_spf_dkim_and_dmarc() {
    let (_dir, data) = set_up_data_dir();
    let (name, record) = generate(&data, "example.test", "s1", "ed25519");
    let key = format!("{name} TXT {record}");
    let dns = FakeDns::start(&[
        // Our own domain: only 192.0.2.1 may send as it.
        "example.test TXT v=spf1 ip4:192.0.2.1 -all",
        &key,
        // A remote domain that authorises loopback.
        "remote.test TXT v=spf1 ip4:127.0.0.0/8 -all",
        // One that does not, and asks receivers to reject what fails.
        "strict.test TXT v=spf1 ip4:192.0.2.1 -all",
        "_dmarc.strict.test TXT v=DMARC1; p=reject",
        // One that does not either, but only asks for quarantine.
        "lax.test TXT v=spf1 ip4:192.0.2.1 -all",
        "_dmarc.lax.test TXT v=DMARC1; p=quarantine",
    ]);
    let server = start(&data, &dns);

    // SPF passes: accepted, with our Authentication-Results on top; a forged one claiming
    // our host is gone, another host's stays.
    let message = format!(
        "Authentication-Results: {HOSTNAME}; dkim=pass header.d=example.test\r\n\
         Authentication-Results: relay.remote.test; spf=pass\r\n\
         From: x@remote.test\r\nTo: bob@example.test\r\nSubject: fine\r\n\r\nhello\r\n"
    );
    let (code, text) = mx(&server, "x@remote.test", "bob@example.test", &message);
    assert_eq!(code, 250, "{text}");
    let delivered = String::from_utf8_lossy(&newest(&server, "bob@example.test", 1)).into_owned();
    // Our Authentication-Results comes first after the delivery's own trace.
    let first = delivered
        .lines()
        .find(|l| !l.starts_with("Return-Path: ") && !l.starts_with("Delivered-To: "))
        .unwrap_or_default();
    assert!(
        first.starts_with(&format!("Authentication-Results: {HOSTNAME};")),
        "{delivered}"
    );
    assert!(delivered.contains("spf=pass"), "{delivered}");
    assert!(delivered.contains("dmarc=none"), "{delivered}");
    assert_eq!(
        delivered
            .matches(&format!("Authentication-Results: {HOSTNAME}"))
            .count(),
        1,
        "the forged field is removed: {delivered}"
    );
    assert!(delivered.contains("Authentication-Results: relay.remote.test; spf=pass"));

    // DMARC fails under p=reject: refused.
    let (code, text) = mx(
        &server,
        "x@strict.test",
        "bob@example.test",
        "From: x@strict.test\r\nSubject: forged\r\n\r\nhi\r\n",
    );
    assert_eq!(code, 550, "{text}");
    assert!(text.contains("5.7.1") && text.contains("DMARC"), "{text}");
    // Under p=quarantine: delivered, marked.
    let (code, text) = mx(
        &server,
        "x@lax.test",
        "bob@example.test",
        "From: x@lax.test\r\nSubject: marked\r\n\r\nhi\r\n",
    );
    assert_eq!(code, 250, "{text}");
    let delivered = String::from_utf8_lossy(&newest(&server, "bob@example.test", 2)).into_owned();
    assert!(delivered.contains("dmarc=fail"), "{delivered}");

    // Our own domain from an unauthenticated client: SPF fails, no DKIM, refused.
    let (code, text) = mx(
        &server,
        "alice@example.test",
        "bob@example.test",
        "From: alice@example.test\r\nSubject: forged\r\n\r\nhi\r\n",
    );
    assert_eq!(code, 550, "{text}");
    assert!(text.contains("example.test is a local domain"), "{text}");
    // ... also when only the From: header names it.
    let (code, text) = mx(
        &server,
        "x@remote.test",
        "bob@example.test",
        "From: alice@example.test\r\nSubject: forged\r\n\r\nhi\r\n",
    );
    assert_eq!(code, 550, "{text}");

    // But a message signed with our key (it came back through a forwarder) passes DKIM.
    must(mailstow(
        &data,
        &[
            "user",
            "add",
            "carol@example.test",
            "--password",
            "secret-pw",
        ],
    ));
    std::thread::sleep(Duration::from_secs(3)); // the server's directory cache
    submit(
        &server,
        "alice@example.test",
        "carol@example.test",
        "From: alice@example.test\r\nTo: carol@example.test\r\nSubject: round trip\r\n\r\nsigned\r\n",
    );
    let signed = newest(&server, "carol@example.test", 1);
    let text = String::from_utf8_lossy(&signed);
    let (_, from_dkim) = text.split_once("DKIM-Signature:").expect("signed");
    let resent = format!("DKIM-Signature:{from_dkim}");
    let (code, reply) = mx(&server, "alice@example.test", "bob@example.test", &resent);
    assert_eq!(code, 250, "{reply}");
    let delivered = String::from_utf8_lossy(&newest(&server, "bob@example.test", 3)).into_owned();
    assert!(delivered.contains("dkim=pass"), "{delivered}");
    server.stop_cleanly();
}
