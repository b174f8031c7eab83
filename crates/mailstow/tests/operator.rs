//! Issue 19: what an operator runs the server with, against the real binary: the mail log,
//! metrics and health, SIGHUP reload, the admin commands while it runs, the refusal to make a
//! data directory in the wrong place, `config check`, the first start's certificate notice,
//! postmaster and the trace fields of local delivery, alias checks reaching a running server
//! at once, and the systemd unit.

mod common;

use std::io::{BufReader, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Imap, Server, mailstow, must, set_up_data_dir, smtp_reply};

/// A blocking SMTP client that checks every reply's code.
struct Smtp {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Smtp {
    fn connect(address: &str) -> Smtp {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut smtp = Smtp {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert_eq!(smtp_reply(&mut smtp.reader).unwrap(), 220);
        assert_eq!(smtp.send("EHLO client.test"), 250);
        smtp
    }

    /// Sends one command line; returns the reply's code.
    fn send(&mut self, line: &str) -> u16 {
        self.writer
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        smtp_reply(&mut self.reader).unwrap()
    }

    /// DATA with `body`; returns the final reply's code.
    fn data(&mut self, body: &str) -> u16 {
        assert_eq!(self.send("DATA"), 354);
        self.writer
            .write_all(format!("{body}\r\n.\r\n").as_bytes())
            .unwrap();
        smtp_reply(&mut self.reader).unwrap()
    }

    /// AUTH PLAIN (the server allows it without TLS in these tests).
    fn login(&mut self, user: &str, password: &str) -> u16 {
        use base64::Engine as _;
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        self.send(&format!("AUTH PLAIN {token}"))
    }
}

/// One mail, MAIL to DATA; every step must succeed.
fn send_mail(address: &str, from: &str, to: &[&str], subject: &str) {
    let mut smtp = Smtp::connect(address);
    assert_eq!(smtp.send(&format!("MAIL FROM:<{from}>")), 250);
    for rcpt in to {
        assert_eq!(smtp.send(&format!("RCPT TO:<{rcpt}>")), 250, "RCPT {rcpt}");
    }
    assert_eq!(smtp.data(&format!("Subject: {subject}\r\n\r\nbody")), 250);
    assert_eq!(smtp.send("QUIT"), 221);
}

/// Waits until `path` holds a line for which `wanted` is true; returns all its lines.
fn wait_for_line(path: &Path, what: &str, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.iter().any(|l| wanted(l)) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} line in the log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of `key=` in a logfmt line (unquoted values only, as ids and codes are).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|pair| pair.strip_prefix(&format!("{key}=")))
}

/// Lines with `event=<event>` and every `key=value` of `with`.
fn events<'a>(lines: &'a [String], event: &str, with: &[(&str, &str)]) -> Vec<&'a str> {
    lines
        .iter()
        .map(String::as_str)
        .filter(|l| field(l, "event") == Some(event))
        .filter(|l| with.iter().all(|(k, v)| field(l, k) == Some(*v)))
        .collect()
}

/// The remote server a relay test hands mail to: domain `remote.test` with user `ok`.
fn start_remote(dir: &Path) -> Server {
    let data = dir.join("remote");
    std::fs::create_dir_all(&data).unwrap();
    must(mailstow(&data, &["domain", "add", "remote.test"]));
    must(mailstow(
        &data,
        &["user", "add", "ok@remote.test", "--password", "secret-pw"],
    ));
    Server::start(&data)
}

fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Item 1: one logfmt line per event, from a real run: connections, acceptance, refusal,
/// local and relayed delivery, deferral, bounce, logins (ok, failed, throttled); the queue id
/// ties acceptance to each delivery line.
#[test]
fn the_mail_log_has_a_line_for_every_event() {
    let (dir, data) = set_up_data_dir();
    let remote = start_remote(dir.path());
    let log = dir.path().join("mail.log");
    let config = write_config(
        dir.path(),
        "a.toml",
        &format!(
            "[server]\nhostname = \"a.example.test\"\nauth_without_tls = true\n\
             auth_user_failures_max = 2\nrelay_host = \"{}\"\nrelay_tls = \"none\"\n\
             [log]\nfile = \"{}\"\nlevel = \"info\"\n",
            remote.addr("smtp"),
            log.display()
        ),
    );
    let server = Server::start_opts(&data, Some(&config), None, &[]);
    let smtp = server.addr("smtp");

    // MX mail for a local user: accepted, then delivered into INBOX.
    send_mail(&smtp, "x@elsewhere.test", &["alice@example.test"], "one");
    // An unknown recipient: refused at RCPT.
    let mut client = Smtp::connect(&smtp);
    assert_eq!(client.send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(client.send("RCPT TO:<nobody@example.test>"), 550);
    assert_eq!(client.send("QUIT"), 221);

    // Submission through the relay: one recipient delivered there, one refused (bounced,
    // and a notification for bob).
    let mut client = Smtp::connect(&server.addr("submission"));
    assert_eq!(client.login("bob@example.test", "secret-pw"), 235);
    assert_eq!(client.send("MAIL FROM:<bob@example.test>"), 250);
    assert_eq!(client.send("RCPT TO:<ok@remote.test>"), 250);
    assert_eq!(client.send("RCPT TO:<gone@remote.test>"), 250);
    assert_eq!(client.data("Subject: relayed\r\n\r\nbody"), 250);
    assert_eq!(client.send("QUIT"), 221);
    let lines = wait_for_line(&log, "bounced", |l| field(l, "event") == Some("bounced"));
    let relayed = events(&lines, "accepted", &[("proto", "submission")]);
    assert_eq!(relayed.len(), 1, "{lines:#?}");
    let relayed_id = field(relayed[0], "queue_id").unwrap();
    assert_eq!(field(relayed[0], "user"), Some("bob@example.test"));
    assert_eq!(field(relayed[0], "rcpts"), Some("2"));
    wait_for_line(&log, "dsn", |l| field(l, "event") == Some("dsn"));

    // The relay goes away: the next message is deferred, with the next attempt named.
    remote.stop_cleanly();
    let mut client = Smtp::connect(&server.addr("submission"));
    assert_eq!(client.login("bob@example.test", "secret-pw"), 235);
    assert_eq!(client.send("MAIL FROM:<bob@example.test>"), 250);
    assert_eq!(client.send("RCPT TO:<ok@remote.test>"), 250);
    assert_eq!(client.data("Subject: later\r\n\r\nbody"), 250);
    assert_eq!(client.send("QUIT"), 221);
    wait_for_line(&log, "deferred", |l| field(l, "event") == Some("deferred"));

    // IMAP logins: two wrong passwords, then the user is throttled from this address.
    let mut imap = Imap::connect(&server.addr("imap"));
    for _ in 0..2 {
        let answer = imap.run("LOGIN alice@example.test wrong");
        assert!(answer.last().unwrap().contains("NO"), "{answer:?}");
    }
    let answer = imap.run("LOGIN alice@example.test secret-pw");
    assert!(answer.last().unwrap().contains("NO"), "{answer:?}");
    let answer = imap.run("LOGIN bob@example.test secret-pw");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    imap.run("LOGOUT");
    drop(imap);
    wait_for_line(&log, "imap disconnect", |l| {
        field(l, "event") == Some("disconnect") && field(l, "proto") == Some("imap")
    });
    server.stop_cleanly();
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();

    // Every line is logfmt with a timestamp and a level; every info line names its event.
    for line in &lines {
        assert!(line.starts_with("ts=20"), "{line}");
        assert!(field(line, "level").is_some(), "{line}");
        if field(line, "level") == Some("info") {
            assert!(field(line, "event").is_some(), "no event= in {line}");
        }
    }
    let mx = events(&lines, "accepted", &[("proto", "smtp")]);
    assert_eq!(mx.len(), 1, "{lines:#?}");
    let mx_id = field(mx[0], "queue_id").unwrap();
    assert_eq!(field(mx[0], "from"), Some("<x@elsewhere.test>"));
    assert_eq!(field(mx[0], "to"), Some("alice@example.test"));
    assert_eq!(field(mx[0], "client"), Some("127.0.0.1"));
    assert!(field(mx[0], "size").is_some_and(|s| s.parse::<u64>().unwrap() > 0));
    // Local delivery: the same queue id, the folder and the UID.
    let delivered = events(
        &lines,
        "delivered",
        &[("queue_id", mx_id), ("to", "alice@example.test")],
    );
    assert_eq!(delivered.len(), 1, "{lines:#?}");
    assert_eq!(field(delivered[0], "folder"), Some("INBOX"));
    assert_eq!(field(delivered[0], "uid"), Some("1"));
    assert!(field(delivered[0], "delay").is_some());
    // The refusal: stage, code, enhanced code, recipient, client.
    let rejected = events(
        &lines,
        "rejected",
        &[("stage", "rcpt"), ("code", "550"), ("enhanced", "5.1.1")],
    );
    assert_eq!(rejected.len(), 1, "{lines:#?}");
    assert_eq!(field(rejected[0], "to"), Some("nobody@example.test"));
    assert_eq!(field(rejected[0], "client"), Some("127.0.0.1"));
    // Relayed: delivered there, bounced by it, the same queue id on both.
    let remote_delivered = events(
        &lines,
        "delivered",
        &[("queue_id", relayed_id), ("to", "ok@remote.test")],
    );
    assert_eq!(remote_delivered.len(), 1, "{lines:#?}");
    assert!(field(remote_delivered[0], "relay").is_some_and(|r| r.starts_with("127.0.0.1")));
    let bounced = events(
        &lines,
        "bounced",
        &[("queue_id", relayed_id), ("to", "gone@remote.test")],
    );
    assert_eq!(bounced.len(), 1, "{lines:#?}");
    assert!(bounced[0].contains("reply=\"550"), "{}", bounced[0]);
    let deferred = events(&lines, "deferred", &[("to", "ok@remote.test")]);
    assert!(!deferred.is_empty());
    assert!(field(deferred[0], "next_attempt").is_some_and(|t| t.starts_with("20")));
    assert!(field(deferred[0], "relay").is_some());
    // Logins: the protocol, the user, the mechanism, the result, the client.
    assert_eq!(
        events(
            &lines,
            "login",
            &[
                ("proto", "submission"),
                ("user", "bob@example.test"),
                ("mechanism", "PLAIN"),
                ("result", "ok"),
                ("client", "127.0.0.1"),
            ]
        )
        .len(),
        2
    );
    assert_eq!(
        events(
            &lines,
            "login",
            &[
                ("proto", "imap"),
                ("user", "alice@example.test"),
                ("mechanism", "LOGIN"),
                ("result", "failed")
            ]
        )
        .len(),
        2
    );
    assert_eq!(
        events(&lines, "throttled", &[("proto", "imap"), ("scope", "user")]).len(),
        1,
        "{lines:#?}"
    );
    assert_eq!(
        events(
            &lines,
            "login",
            &[
                ("proto", "imap"),
                ("user", "bob@example.test"),
                ("result", "ok")
            ]
        )
        .len(),
        1
    );
    // Connections opened and closed, per protocol, with TLS and the duration.
    for proto in ["smtp", "submission", "imap"] {
        let opened = events(&lines, "connect", &[("proto", proto), ("tls", "false")]);
        let closed = events(&lines, "disconnect", &[("proto", proto)]);
        assert!(!opened.is_empty(), "{proto}");
        assert_eq!(opened.len(), closed.len(), "{proto}");
        assert!(field(closed[0], "duration").is_some());
    }
    drop(dir);
}

/// Item 2: the counters move with real traffic, read with curl; `/healthz` answers `200 ok`.
#[test]
fn metrics_move_with_traffic_and_health_answers() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start_opts(&data, None, Some("warn"), &["--metrics", "127.0.0.1:0"]);
    let metrics = server.metrics.expect("metrics address");
    let curl = |path: &str| {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}"])
            .arg(format!("http://{metrics}{path}"))
            .output()
            .expect("curl");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(curl("/healthz"), "ok\n\n200");
    send_mail(
        &server.addr("smtp"),
        "x@elsewhere.test",
        &["alice@example.test"],
        "counted",
    );
    let mut client = Smtp::connect(&server.addr("smtp"));
    assert_eq!(client.send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(client.send("RCPT TO:<nobody@example.test>"), 550);
    drop(client);
    let mut imap = Imap::connect(&server.addr("imap"));
    // Plaintext login is refused without TLS here: a refused attempt is still no login, so
    // log in over IMAPS through Python's imaplib instead.
    drop(imap.run("CAPABILITY"));
    let login = Command::new("python3")
        .arg("-c")
        .arg(
            "import imaplib,ssl,sys;h,p=sys.argv[1].rsplit(':',1);\
             c=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE;\
             m=imaplib.IMAP4_SSL(h,int(p),ssl_context=c);m.login('alice@example.test','secret-pw');\
             m.logout()",
        )
        .arg(server.addr("imaps"))
        .output()
        .expect("python3");
    assert!(login.status.success(), "{login:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = curl("/metrics");
        if text.contains("mailstow_messages_delivered_total 1") {
            break text;
        }
        assert!(Instant::now() < deadline, "no delivery counted:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for line in [
        "mailstow_messages_accepted_total{protocol=\"smtp\"} 1",
        "mailstow_messages_rejected_total{protocol=\"smtp\",stage=\"rcpt\"} 1",
        "mailstow_logins_total{protocol=\"imap\",result=\"ok\"} 1",
        "mailstow_connections{protocol=\"imap\"} 1",
        "mailstow_data_reply_seconds_count 1",
        "mailstow_delivery_delay_seconds_count 1",
        "mailstow_queue_messages 0",
        "# TYPE mailstow_fsync counter",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    let fsyncs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("mailstow_fsync_total "))
        .expect("fsync counter")
        .parse()
        .unwrap();
    assert!(fsyncs >= 2, "the queue and the store synced: {fsyncs}");
    assert!(text.ends_with("# EOF\n\n200"), "OpenMetrics text, 200 OK");
    drop(imap);
    server.stop_cleanly();
}

/// A key and certificate for `name`, made with openssl.
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
        ])
        .arg(format!("/CN={name}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{out:?}");
    (cert, key)
}

/// The SHA-256 fingerprint (`AB:CD:…`) of a PEM certificate file, as openssl prints it.
fn openssl_fingerprint(cert: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .rsplit_once('=')
        .unwrap()
        .1
        .to_string()
}

/// The fingerprint of the certificate the server presents at `address`.
fn served_fingerprint(address: &str) -> String {
    let (host, port) = address.rsplit_once(':').unwrap();
    let out = Command::new("python3")
        .arg(common::script("tls_fingerprint.py"))
        .args([host, port])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Item 4: SIGHUP re-reads the file and the certificate: new connections get the new one,
/// a session opened before keeps working, limits change, settings that need a restart are
/// named, and a broken file keeps the configuration in force.
#[test]
fn sighup_reloads_the_certificate_and_keeps_sessions() {
    let (dir, data) = set_up_data_dir();
    let (cert, key) = certificate(dir.path(), "first");
    let log = dir.path().join("mail.log");
    let text = |recipients_max: u32, smtp: &str| {
        format!(
            "[server]\nauth_without_tls = true\ntls_cert = \"{}\"\ntls_key = \"{}\"\n\
             recipients_max = {recipients_max}\n{smtp}[log]\nfile = \"{}\"\n",
            cert.display(),
            key.display(),
            log.display()
        )
    };
    let config = write_config(dir.path(), "server.toml", &text(100, ""));
    let server = Server::start_opts(&data, Some(&config), None, &[]);
    let first = openssl_fingerprint(&cert);
    assert_eq!(served_fingerprint(&server.addr("imaps")), first);

    // A session logged in before the reload.
    let mut imap = Imap::connect(&server.addr("imap"));
    let answer = imap.run("LOGIN alice@example.test secret-pw");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");

    // A new certificate in the same files, a lower recipients_max, and a new host name (which
    // needs a restart).
    let (new_cert, new_key) = certificate(dir.path(), "second");
    std::fs::rename(&new_cert, &cert).unwrap();
    std::fs::rename(&new_key, &key).unwrap();
    let second = openssl_fingerprint(&cert);
    assert_ne!(first, second);
    server.rewrite_config(&text(1, "hostname = \"renamed.example.test\"\n"));
    server.hangup();
    let lines = wait_for_line(&log, "reload", |l| field(l, "event") == Some("reload"));
    let reload = events(&lines, "reload", &[("result", "ok")]);
    assert_eq!(reload.len(), 1, "{lines:#?}");
    assert_eq!(
        field(reload[0], "certificate_sha256"),
        Some(second.as_str())
    );
    assert!(
        field(reload[0], "changed").is_some_and(|c| c.contains("recipients_max")),
        "{}",
        reload[0]
    );
    assert_eq!(field(reload[0], "restart_needed"), Some("hostname"));
    assert_eq!(served_fingerprint(&server.addr("imaps")), second);
    assert_eq!(served_fingerprint(&server.addr("pop3s")), second);
    // The old session is alive.
    let answer = imap.run("NOOP");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    // The new limit holds for new sessions.
    let mut client = Smtp::connect(&server.addr("smtp"));
    assert_eq!(client.send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(client.send("RCPT TO:<alice@example.test>"), 250);
    assert_eq!(client.send("RCPT TO:<bob@example.test>"), 452);
    drop(client);

    // A broken file: the configuration in force stays, and the log says why.
    server.rewrite_config("[server\nbroken");
    server.hangup();
    let lines = wait_for_line(&log, "failed reload", |l| {
        field(l, "event") == Some("reload") && field(l, "result") == Some("failed")
    });
    let failed = events(&lines, "reload", &[("result", "failed")]);
    assert!(failed[0].contains("config file"), "{}", failed[0]);
    assert_eq!(served_fingerprint(&server.addr("imaps")), second);
    // A certificate that does not load is refused the same way.
    server.rewrite_config(&text(100, ""));
    std::fs::write(&cert, "not a certificate").unwrap();
    server.hangup();
    wait_for_line(&log, "second failed reload", |l| {
        field(l, "result") == Some("failed") && l.contains("certificate")
    });
    assert_eq!(served_fingerprint(&server.addr("imaps")), second);
    let answer = imap.run("NOOP");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    imap.run("LOGOUT");
    server.stop_cleanly();
}

/// Item 3: the engines' commands work while the server owns them, through the admin socket.
#[test]
fn queue_and_store_commands_work_while_the_server_runs() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    send_mail(
        &server.addr("smtp"),
        "x@elsewhere.test",
        &["alice@example.test"],
        "stats",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let stats = loop {
        let stats = must(mailstow(&data, &["store", "stats"]));
        if stats.contains("alice@example.test") {
            break stats;
        }
        assert!(Instant::now() < deadline, "{stats}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(stats.contains("INBOX"), "{stats}");
    assert!(stats.contains("volume:"), "{stats}");
    let queue = must(mailstow(&data, &["queue", "stats"]));
    assert!(queue.contains("messages: 0 pending"), "{queue}");
    let fsck = must(mailstow(&data, &["store", "fsck"]));
    assert!(fsck.trim_end().ends_with(": clean"), "{fsck}");
    assert!(fsck.contains("1 messages"), "{fsck}");
    // What needs the engines alone says so instead of failing obscurely.
    let defrag = mailstow(&data, &["store", "defrag"]);
    assert!(!defrag.status.success());
    let message = String::from_utf8_lossy(&defrag.stderr);
    assert!(message.contains("stop it first"), "{message}");
    server.stop_cleanly();
    // And offline, the same commands answer the same way.
    let offline = must(mailstow(&data, &["store", "stats"]));
    assert!(offline.contains("alice@example.test"), "{offline}");
    assert!(must(mailstow(&data, &["queue", "stats"])).contains("messages: 0 pending"));
}

/// Item 3: a command run where there is no data directory names the path and makes none.
#[test]
fn commands_refuse_to_create_a_missing_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    for args in [
        &["user", "list"][..],
        &["domain", "add", "example.test"],
        &["queue", "stats"],
        &["store", "stats"],
        &["alias", "list"],
    ] {
        let out = mailstow(&missing, args);
        assert!(!out.status.success(), "{args:?}");
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(
            message.contains("no data directory at") && message.contains("nothing-here"),
            "{args:?}: {message}"
        );
        assert!(!missing.exists(), "{args:?} created it");
    }
    // In the current folder, with no flag: the default path, shown absolute.
    let out = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .args(["user", "list"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains(&format!("{}", dir.path().join("mailstow-data").display())),
        "{message}"
    );
    assert!(!dir.path().join("mailstow-data").exists());
    // `init` makes one.
    must(mailstow(&missing, &["init"]));
    assert!(missing.join("store").is_dir());
    must(mailstow(&missing, &["domain", "add", "example.test"]));
}

/// Item 3: `config check` prints every key with its value, and refuses a bad file naming
/// the line.
#[test]
fn config_check_prints_the_effective_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "ok.toml",
        "[server]\nhostname = \"mx.example.test\"\nrecipients_max = 7\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .unwrap();
    let text = must(out);
    assert!(text.contains("ok; the effective configuration"), "{text}");
    for line in [
        "hostname = \"mx.example.test\"",
        "recipients_max = 7",
        "connections_max = 4096",
        "smtp = \"0.0.0.0:2525\"",
        "managesieve = \"0.0.0.0:4190\"",
        "managesieves = \"\"",
        "[queue]",
        "[log]",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    // The printed configuration is itself a valid file.
    let printed = write_config(dir.path(), "printed.toml", &text);
    let again = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--config")
        .arg(&printed)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");

    for (bad, expected) in [
        ("[server]\nrecipients_max = \"x\"\n", "line 2"),
        ("[server]\nbogus = 1\n", "bogus"),
        ("[server]\nsmtp = \"nowhere\"\n", "nowhere"),
        (
            "[server]\ninflight_bytes_max = 10\nmessage_bytes_max = 20\n",
            "inflight_bytes_max",
        ),
        (
            "[server]\ntls_cert = \"/nonexistent.crt\"\ntls_key = \"/nonexistent.key\"\n",
            "/nonexistent.crt",
        ),
        ("[log]\nlevel = \"loud\"\n", "loud"),
    ] {
        let config = write_config(dir.path(), "bad.toml", bad);
        let out = Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&config)
            .args(["config", "check"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad}");
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(message.contains(expected), "{bad}: {message}");
    }
}

/// Item 8: the first start says where the data and the certificate are and gives the
/// certificate's fingerprint; the self-signed certificate names `[server] hostname` and is
/// made again when that changes.
#[test]
fn the_first_start_prints_the_certificate_and_follows_the_hostname() {
    let (dir, data) = set_up_data_dir();
    let config = write_config(
        dir.path(),
        "one.toml",
        "[server]\nhostname = \"one.example.test\"\n",
    );
    let server = Server::start_with(&data, Some(&config));
    let banner = server.banner.join("\n");
    let cert = data.join("tls/cert.pem");
    assert!(
        banner.contains(&format!("data directory: {}", data.display())),
        "{banner}"
    );
    assert!(
        banner.contains(&format!(
            "certificate: {} (self-signed for one.example.test, generated now)",
            cert.display()
        )),
        "{banner}"
    );
    let first = openssl_fingerprint(&cert);
    assert!(
        banner.contains(&format!("certificate sha256: {first}")),
        "{banner}"
    );
    assert_eq!(served_fingerprint(&server.addr("imaps")), first);
    let subject = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&subject.stdout).contains("DNS:one.example.test"),
        "{subject:?}"
    );
    server.stop_cleanly();

    // The same name: the same certificate.
    let server = Server::start_with(&data, Some(&config));
    assert!(
        server
            .banner
            .iter()
            .any(|l| l.ends_with("(self-signed for one.example.test)")),
        "{:?}",
        server.banner
    );
    assert_eq!(openssl_fingerprint(&cert), first);
    server.stop_cleanly();

    // A new name: a new certificate for it.
    let config = write_config(
        dir.path(),
        "two.toml",
        "[server]\nhostname = \"two.example.test\"\n",
    );
    let server = Server::start_with(&data, Some(&config));
    let second = openssl_fingerprint(&cert);
    assert_ne!(first, second);
    assert_eq!(served_fingerprint(&server.addr("imaps")), second);
    server.stop_cleanly();

    // A configured certificate is never touched.
    let (own_cert, own_key) = certificate(dir.path(), "own");
    let config = write_config(
        dir.path(),
        "own.toml",
        &format!(
            "[server]\nhostname = \"three.example.test\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
            own_cert.display(),
            own_key.display()
        ),
    );
    let own = openssl_fingerprint(&own_cert);
    let server = Server::start_with(&data, Some(&config));
    assert!(
        server
            .banner
            .contains(&format!("certificate sha256: {own}")),
        "{:?}",
        server.banner
    );
    server.stop_cleanly();
    assert_eq!(openssl_fingerprint(&own_cert), own);
    assert_eq!(openssl_fingerprint(&cert), second);
}

/// The messages in `user`'s INBOX, whole, through Python's poplib over POP3S.
fn messages(server: &Server, user: &str) -> Vec<String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import poplib,ssl,sys;h,p=sys.argv[1].rsplit(':',1);\
             c=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE;\
             m=poplib.POP3_SSL(h,int(p),context=c);m.user(sys.argv[2]);m.pass_('secret-pw');\
             n=len(m.list()[1]);\
             [print(b'\\n'.join(m.retr(i+1)[1]).decode()+'\\n=====') for i in range(n)];m.quit()",
        )
        .arg(server.addr("pop3s"))
        .arg(user)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split("\n=====\n")
        .filter(|m| !m.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Item 9: `postmaster@` of a local domain (and a bare `<Postmaster>`) is delivered without
/// any configuration, to the domain's first user; local delivery adds `Return-Path` and
/// `Delivered-To`.
#[test]
fn postmaster_is_delivered_and_local_mail_carries_its_trace() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let smtp = server.addr("smtp");
    send_mail(
        &smtp,
        "x@elsewhere.test",
        &["postmaster@example.test"],
        "pm",
    );
    let mut client = Smtp::connect(&smtp);
    assert_eq!(client.send("MAIL FROM:<>"), 250);
    assert_eq!(client.send("RCPT TO:<Postmaster>"), 250);
    assert_eq!(client.data("Subject: bare\r\n\r\nbody"), 250);
    drop(client);
    send_mail(&smtp, "y@elsewhere.test", &["bob@example.test"], "traced");
    let deadline = Instant::now() + Duration::from_secs(30);
    let alice = loop {
        let alice = messages(&server, "alice@example.test");
        if alice.len() == 2 {
            break alice;
        }
        assert!(Instant::now() < deadline, "{alice:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(alice[0].contains("Subject: pm"), "{}", alice[0]);
    assert!(
        alice[0]
            .starts_with("Return-Path: <x@elsewhere.test>\r\nDelivered-To: alice@example.test\r\n")
            || alice[0]
                .starts_with("Return-Path: <x@elsewhere.test>\nDelivered-To: alice@example.test\n"),
        "{}",
        alice[0]
    );
    assert!(alice[1].contains("Subject: bare"), "{}", alice[1]);
    assert!(alice[1].starts_with("Return-Path: <>"), "{}", alice[1]);
    let bob = messages(&server, "bob@example.test");
    assert_eq!(bob.len(), 1);
    let first_lines: Vec<&str> = bob[0].lines().take(2).collect();
    assert_eq!(first_lines[0].trim_end(), "Return-Path: <y@elsewhere.test>");
    assert_eq!(first_lines[1].trim_end(), "Delivered-To: bob@example.test");
    // Then the trace this server added at acceptance (Authentication-Results, Received).
    assert!(
        bob[0].lines().any(|l| l.starts_with("Received: from ")),
        "{}",
        bob[0]
    );
    server.stop_cleanly();

    // A configured postmaster takes it instead.
    let config = data.with_extension("pm.toml");
    std::fs::write(&config, "[server]\npostmaster = \"bob@example.test\"\n").unwrap();
    let server = Server::start_with(&data, Some(&config));
    send_mail(
        &server.addr("smtp"),
        "x@elsewhere.test",
        &["postmaster@example.test"],
        "pm2",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while messages(&server, "bob@example.test").len() < 2 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    server.stop_cleanly();
}

/// Item 5: an alias must point at a user or an address elsewhere; a change made by the CLI
/// reaches the running server at once (the CLI tells it through the admin socket).
#[test]
fn aliases_are_checked_and_reach_the_running_server_at_once() {
    let (_dir, data) = set_up_data_dir();
    let out = mailstow(
        &data,
        &["alias", "add", "sales@example.test", "nobody@example.test"],
    );
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("neither a user nor an alias"), "{message}");
    must(mailstow(
        &data,
        &[
            "alias",
            "add",
            "team@example.test",
            "partner@elsewhere.test",
        ],
    ));

    let server = Server::start(&data);
    let smtp = server.addr("smtp");
    let mut client = Smtp::connect(&smtp);
    assert_eq!(client.send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(client.send("RCPT TO:<sales@example.test>"), 550);
    drop(client);
    // The server polls the directory every 2 s; the CLI's notice must beat that by far.
    let started = Instant::now();
    must(mailstow(
        &data,
        &["alias", "add", "sales@example.test", "alice@example.test"],
    ));
    let mut client = Smtp::connect(&smtp);
    assert_eq!(client.send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(client.send("RCPT TO:<sales@example.test>"), 250);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    drop(client);
    // A new user can log in at once, too.
    let password = data.with_extension("carol.pass");
    std::fs::write(&password, "carol-secret\n").unwrap();
    must(mailstow(
        &data,
        &[
            "user",
            "add",
            "carol@example.test",
            "--password-file",
            password.to_str().unwrap(),
        ],
    ));
    let mut client = Smtp::connect(&smtp);
    assert_eq!(client.send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(client.send("RCPT TO:<carol@example.test>"), 250);
    drop(client);
    server.stop_cleanly();
}

/// `--password-file -` reads the password from standard input.
#[test]
fn the_password_can_come_from_standard_input() {
    let (_dir, data) = set_up_data_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--data-dir")
        .arg(&data)
        .args(["user", "add", "dave@example.test", "--password-file", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from-stdin\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let server = Server::start(&data);
    let login = Command::new("python3")
        .arg("-c")
        .arg(
            "import imaplib,ssl,sys;h,p=sys.argv[1].rsplit(':',1);\
             c=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE;\
             m=imaplib.IMAP4_SSL(h,int(p),ssl_context=c);m.login('dave@example.test','from-stdin');\
             m.logout()",
        )
        .arg(server.addr("imaps"))
        .output()
        .expect("python3");
    assert!(login.status.success(), "{login:?}");
    server.stop_cleanly();
}

/// Item 11: the unit in `contrib/` passes `systemd-analyze verify` with nothing to say.
#[test]
fn the_systemd_unit_verifies() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/mailstow.service");
    let text = std::fs::read_to_string(&unit).expect("contrib/mailstow.service");
    for wanted in [
        "ExecReload=/bin/kill -HUP $MAINPID",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "User=mailstow",
    ] {
        assert!(text.contains(wanted), "{wanted}");
    }
    // verify wants ExecStart's binary to exist: point it at the one just built.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mailstow.service");
    std::fs::write(
        &copy,
        text.replace("/usr/local/bin/mailstow", env!("CARGO_BIN_EXE_mailstow")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .expect("systemd-analyze (package systemd)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

/// Issue 36 item 5: a message's `accepted` line comes before its `deferred` line. Mail to a
/// remote domain with no relay and no direct delivery is deferred at once, racing the
/// session's acceptance; `accepted` is logged at the queue's commit, before delivery is
/// woken for the message.
#[test]
fn accepted_is_logged_before_the_same_messages_deferred() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let config = write_config(
        dir.path(),
        "a.toml",
        &format!(
            "[server]\nauth_without_tls = true\n[log]\nfile = \"{}\"\nlevel = \"info\"\n",
            log.display()
        ),
    );
    let server = Server::start_opts(&data, Some(&config), None, &[]);
    let messages = 20;
    let mut client = Smtp::connect(&server.addr("submission"));
    assert_eq!(client.login("bob@example.test", "secret-pw"), 235);
    for n in 0..messages {
        assert_eq!(client.send("MAIL FROM:<bob@example.test>"), 250);
        assert_eq!(client.send("RCPT TO:<someone@nowhere.test>"), 250);
        assert_eq!(client.data(&format!("Subject: later {n}\r\n\r\nbody")), 250);
    }
    assert_eq!(client.send("QUIT"), 221);
    let deadline = Instant::now() + Duration::from_secs(30);
    let lines = loop {
        let lines = wait_for_line(&log, "deferred", |_| true);
        if events(&lines, "deferred", &[]).len() >= messages || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let deferred = events(&lines, "deferred", &[("to", "someone@nowhere.test")]);
    assert_eq!(deferred.len(), messages, "{lines:#?}");
    for line in deferred {
        let id = field(line, "queue_id").unwrap();
        let at = |event: &str| {
            lines
                .iter()
                .position(|l| field(l, "event") == Some(event) && field(l, "queue_id") == Some(id))
        };
        let accepted = at("accepted").unwrap_or_else(|| panic!("no accepted for {id}"));
        assert!(
            accepted < at("deferred").unwrap(),
            "queue_id={id}: {lines:#?}"
        );
    }
    server.stop_cleanly();
}
