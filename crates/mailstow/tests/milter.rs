//! Milters in front of the MX port (docs/spam.md 4), end to end: the real binary, real
//! rspamd 3.4 (its proxy in milter mode, its controller) and clamav-milter 1.4 in front of
//! clamd, from Debian's packages (test-peers). rspamd refuses GTUBE and its header fields
//! are in the delivered message; clamav-milter refuses EICAR; moves into Junk train rspamd
//! too; a filter that never answers costs its timeout, then its default action.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use common::mail::{log_lines, messages, send, start};
use common::{Imap, Server, set_up_data_dir};

const GTUBE: &str = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X";
/// The EICAR test file (not a virus; every scanner flags it by agreement).
const EICAR: &str = r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

fn message(subject: &str, body: &str) -> String {
    format!(
        "From: Sender <sender@remote.test>\r\nTo: alice@example.test\r\nSubject: {subject}\r\n\
         Date: Sat, 28 Nov 2026 12:00:00 +0000\r\nMessage-ID: <{}@remote.test>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n{body}\r\n",
        blake3::hash(format!("{subject}{body}").as_bytes()).to_hex()
    )
}

fn milter(name: &str, address: &str, extra: &str) -> String {
    format!("[[spam.milters]]\nname = \"{name}\"\naddress = \"{address}\"\n{extra}\n")
}

fn metrics(server: &Server) -> String {
    let out = Command::new("curl")
        .args(["-s", &format!("http://{}/metrics", server.metrics.unwrap())])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// rspamd's controller's `/stat` answer (its Password header given).
fn rspamd_stat(controller: &str, password: &str) -> String {
    let mut stream = TcpStream::connect(controller).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /stat HTTP/1.0\r\nHost: localhost\r\nPassword: {password}\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

#[test]
fn rspamd_through_milter_refuses_gtube_adds_its_fields_and_learns_from_junk() {
    let rspamd = test_peers::Rspamd::start().expect("rspamd (apt-get install rspamd redis-server)");
    let (_dir, data) = set_up_data_dir();
    // The built-in filter off: rspamd alone decides.
    let (server, log) = start(
        &data,
        "mx.example.test",
        &format!(
            "[spam]\nenabled = false\nrspamd_controller = \"{}\"\nrspamd_password = \"{}\"\n{}",
            rspamd.controller_address(),
            rspamd.password(),
            milter("rspamd", &rspamd.milter_address(), "timeout_ms = 10000")
        ),
    );
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("test", GTUBE),
    );
    assert_eq!(
        codes.last().map(|c| c / 100),
        Some(5),
        "{text}\n{}",
        rspamd.log_tail()
    );
    assert!(text.to_ascii_lowercase().contains("gtube"), "{text}");
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message(
            "lunch",
            "Shall we meet for lunch on Thursday? The usual place.",
        ),
    );
    assert_eq!(codes.last(), Some(&250), "{text}\n{}", rspamd.log_tail());
    let inbox = messages(&server, "alice@example.test", "INBOX", 1);
    assert_eq!(inbox.len(), 1);
    assert!(
        inbox[0].1.contains("X-Spamd-Result") || inbox[0].1.contains("X-Rspamd-Server"),
        "rspamd's fields missing:\n{}",
        inbox[0].1
    );
    // Filed into Junk: rspamd's controller learns it as spam too.
    let mut imap = Imap::connect(&server.addr("imap"));
    imap.run("LOGIN alice@example.test secret-pw");
    imap.run("CREATE Junk");
    imap.run("SELECT INBOX");
    let moved = imap.run("UID MOVE 1 Junk");
    assert!(moved.last().unwrap().contains("OK"), "{moved:?}");
    let trained = log_lines(&log, &["event=spam_trained", "class=spam"], 1);
    assert_eq!(trained.len(), 1, "{trained:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let stat = loop {
        let stat = rspamd_stat(&rspamd.controller_address(), rspamd.password());
        if stat.contains("\"learned\":1") || Instant::now() > deadline {
            break stat;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        stat.contains("\"learned\":1"),
        "{stat}\n{}",
        rspamd.log_tail()
    );
    imap.run("LOGOUT");
    server.stop_cleanly();
}

#[test]
fn clamav_milter_refuses_eicar_and_marks_clean_mail() {
    let clamav = test_peers::ClamAv::start()
        .expect("clamav-milter (apt-get install clamav-daemon clamav-milter)");
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(
        &data,
        "mx.example.test",
        &milter("clamav", &clamav.milter_address(), ""),
    );
    let attachment = format!(
        "From: Sender <sender@remote.test>\r\nTo: alice@example.test\r\nSubject: invoice\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n\
         --b\r\nContent-Type: application/octet-stream; name=\"eicar.com\"\r\n\
         Content-Disposition: attachment; filename=\"eicar.com\"\r\n\r\n{EICAR}\r\n--b--\r\n"
    );
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &attachment,
    );
    assert_eq!(
        codes.last().map(|c| c / 100),
        Some(5),
        "{text}\n{}",
        clamav.log_tail()
    );
    let refused = log_lines(&log, &["event=rejected", "stage=data"], 1);
    assert_eq!(refused.len(), 1, "{refused:?}");
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("clean", "nothing bad here"),
    );
    assert_eq!(codes.last(), Some(&250), "{text}");
    let inbox = messages(&server, "alice@example.test", "INBOX", 1);
    assert!(inbox[0].1.contains("X-Virus-Scanned"), "{}", inbox[0].1);
    server.stop_cleanly();
}

/// A listener that accepts connections and never says anything (a hung filter).
fn silent_listener() -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    (address, handle)
}

fn greeting_from(address: &str) -> (String, Duration) {
    let started = Instant::now();
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    (line, started.elapsed())
}

#[test]
fn a_filter_that_never_answers_costs_its_timeout_then_its_default_action() {
    let (silent, _keep) = silent_listener();
    // Default tempfail: the connection is refused for now, after at most the timeout.
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(
        &data,
        "mx.example.test",
        &format!(
            "metrics = \"127.0.0.1:0\"\n{}",
            milter(
                "hung",
                &silent,
                "timeout_ms = 500\nconnect_timeout_ms = 500"
            )
        ),
    );
    let (greeting, took) = greeting_from(&server.addr("smtp"));
    assert!(greeting.starts_with("421 4.7.1"), "{greeting}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let errors = log_lines(
        &log,
        &["event=milter_error", "filter=hung", "applied=tempfail"],
        1,
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics(&server);
        if text.contains("mailstow_milter_errors_total{filter=\"hung\"} 1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no milter error counted:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server.stop_cleanly();
    // Default accept: the mail goes through, late by at most the timeout.
    let (_dir2, data2) = set_up_data_dir();
    let (server, _log) = start(
        &data2,
        "mx.example.test",
        &milter(
            "hung",
            &silent,
            "timeout_ms = 500\nconnect_timeout_ms = 500\ndefault_action = \"accept\"",
        ),
    );
    let started = Instant::now();
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("through", "despite the filter"),
    );
    assert_eq!(codes.last(), Some(&250), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(messages(&server, "alice@example.test", "INBOX", 1).len(), 1);
    server.stop_cleanly();
}
