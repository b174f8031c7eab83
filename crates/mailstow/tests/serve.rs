//! `mailstow serve` end to end: the real binary on loopback, driven by real clients (Python's
//! smtplib and poplib, curl), stopped with SIGTERM and restarted.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{FakeDns, Server, mailstow, must, script, set_up_data_dir, setup};

#[test]
fn python_clients_over_every_listener_then_restart() {
    let (dir, data) = set_up_data_dir();
    let listed = must(mailstow(&data, &["user", "list"]));
    assert!(listed.contains("alice@example.test") && listed.contains("bob@example.test"));

    let server = Server::start(&data);
    let uids_file = dir.path().join("uids");
    let run = Command::new("python3")
        .arg(script("smtp_pop3.py"))
        .args(
            ["smtp", "submission", "submissions", "lmtp", "pop3", "pop3s"].map(|s| server.addr(s)),
        )
        .arg(&uids_file)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("ALL OK"),
        "python e2e failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    server.stop_cleanly();

    // UIDL is stable across restarts (RFC 1939 7).
    let server = Server::start(&data);
    let check = Command::new("python3")
        .arg("-c")
        .arg(
            "import poplib,ssl,sys\n\
             c=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE\n\
             h,p=sys.argv[1].rsplit(':',1)\n\
             s=poplib.POP3_SSL(h,int(p),context=c);s.user('alice@example.test');s.pass_('secret-pw')\n\
             print(' '.join(l.split()[1].decode() for l in s.uidl()[1]));s.quit()",
        )
        .arg(server.addr("pop3s"))
        .output()
        .expect("python3");
    assert!(check.status.success(), "{check:?}");
    let before = std::fs::read_to_string(&uids_file).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&check.stdout).trim(),
        before.trim(),
        "UIDL changed across a restart"
    );
    server.stop_cleanly();
}

#[test]
fn curl_speaks_smtp_and_pop3_with_tls() {
    let (dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    // The running server owns the engines: a command that needs them to itself is refused,
    // in one line (`store stats` and `store fsck` go through the server instead).
    let refused = mailstow(&data, &["store", "defrag"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("needs the engines to itself and a server holds them; stop it first")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    let mail = dir.path().join("mail.eml");
    std::fs::write(
        &mail,
        "From: carol@remote.test\r\nTo: bob@example.test\r\nSubject: via curl\r\n\r\nbody line\r\n",
    )
    .unwrap();
    let sent = Command::new("curl")
        .args(["-sS", "--ssl-reqd", "-k", "--max-time", "20"])
        .arg(format!("smtp://{}", server.addr("smtp")))
        .args([
            "--mail-from",
            "carol@remote.test",
            "--mail-rcpt",
            "bob@example.test",
        ])
        .arg("-T")
        .arg(&mail)
        .output()
        .expect("curl");
    assert!(sent.status.success(), "curl smtp: {sent:?}");

    // Delivery is asynchronous: poll the maildrop over POP3S until the message is there.
    let deadline = Instant::now() + Duration::from_secs(20);
    let fetched = loop {
        let out = Command::new("curl")
            .args([
                "-sS",
                "-k",
                "--max-time",
                "20",
                "-u",
                "bob@example.test:secret-pw",
            ])
            .arg(format!("pop3s://{}/1", server.addr("pop3s")))
            .output()
            .expect("curl");
        if out.status.success() {
            break String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(Instant::now() < deadline, "message never arrived: {out:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(fetched.contains("Subject: via curl"), "{fetched}");
    assert!(fetched.contains("body line"), "{fetched}");

    // STARTTLS-upgraded POP3 listing.
    let listed = Command::new("curl")
        .args([
            "-sS",
            "--ssl-reqd",
            "-k",
            "--max-time",
            "20",
            "-u",
            "bob@example.test:secret-pw",
        ])
        .arg(format!("pop3://{}/", server.addr("pop3")))
        .output()
        .expect("curl");
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).starts_with("1 "));
    server.stop_cleanly();
}

/// Postfix's `lmtp` transport (Debian's postfix, installed by `.ci/run`) relays into our LMTP
/// listener: one message to two users, one to an unknown user (Postfix must bounce it, not
/// retry it: our per-recipient 550 after RCPT).
#[test]
fn postfix_relays_into_mailstow_over_lmtp() {
    let (dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let root = dir.path().join("postfix");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port().to_string()
    };
    let lmtp = server.addr("lmtp");
    let postfix = |args: &[&str]| {
        Command::new("bash")
            .arg(script("postfix_lmtp.sh"))
            .arg(&root)
            .args([port.as_str(), lmtp.as_str(), "example.test"])
            .args(args)
            .output()
            .expect("bash")
    };
    let started = postfix(&["start"]);
    assert!(started.status.success(), "postfix start: {started:?}");
    // Stop the private Postfix however the test ends.
    struct Stop<F: Fn(&[&str]) -> std::process::Output>(F);
    impl<F: Fn(&[&str]) -> std::process::Output> Drop for Stop<F> {
        fn drop(&mut self) {
            let _ = (self.0)(&["stop"]);
        }
    }
    let postfix = Stop(postfix);
    let postfix = |args: &[&str]| (postfix.0)(args);
    let sent_alice = postfix(&["send", "via-postfix-alice", "alice@example.test"]);
    let sent_bob = postfix(&["send", "via-postfix-bob", "bob@example.test"]);
    let subjects = |user: &str| server.subjects(user, "secret-pw");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if subjects("alice@example.test").contains("via-postfix-alice")
            && subjects("bob@example.test").contains("via-postfix-bob")
        {
            break;
        }
        if Instant::now() > deadline {
            let log = postfix(&["log"]);
            panic!(
                "postfix never delivered over LMTP ({sent_alice:?} {sent_bob:?}):\n{}",
                String::from_utf8_lossy(&log.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let log = String::from_utf8_lossy(&postfix(&["log"]).stdout).into_owned();
    assert!(
        log.contains("status=sent") && log.contains("lmtp"),
        "postfix log shows no LMTP delivery:\n{log}"
    );
    server.stop_cleanly();
}

/// Connections beyond the per-address limit get `421` and are closed, and a freed place is
/// reused (RFC 5321 3.1: a server may refuse a connection with 421).
#[test]
fn connections_over_the_per_address_limit_get_421() {
    use std::io::{BufRead as _, BufReader};
    let (dir, data) = set_up_data_dir();
    let config = dir.path().join("mailstow.toml");
    std::fs::write(&config, "[server]\nconnections_per_ip_max = 2\n").unwrap();
    let server = Server::start_with(&data, Some(&config));
    let address = server.addresses["smtp"];
    let greet = || {
        let stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut line = String::new();
        BufReader::new(stream.try_clone().unwrap())
            .read_line(&mut line)
            .unwrap();
        (stream, line)
    };
    let (first, line) = greet();
    assert!(line.starts_with("220 "), "{line}");
    let (_second, line) = greet();
    assert!(line.starts_with("220 "), "{line}");
    let (_third, line) = greet();
    assert!(line.starts_with("421 4.7.0"), "{line}");
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_again, line) = greet();
        if line.starts_with("220 ") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the freed place was never reused"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server.stop_cleanly();
}

/// SIGTERM sent the moment the listeners are announced stops the server in order (exit 0),
/// never by the signal's default action: a supervisor may stop it as soon as it is up.
#[test]
fn sigterm_right_after_the_listeners_are_announced_stops_in_order() {
    let (_dir, data) = set_up_data_dir();
    for _ in 0..5 {
        Server::start(&data).stop_cleanly();
    }
}

/// Outbound through a smarthost: server A relays mail for another domain to server B (another
/// mailstow, with its self-signed certificate: opportunistic STARTTLS). B's user receives it;
/// B's 550 for an unknown user comes back to the sender as a DSN in A's INBOX.
#[test]
fn relays_remote_mail_to_a_smarthost_and_bounces_its_refusals() {
    let dir = tempfile::tempdir().unwrap();
    // B: the remote domain.
    let b = start_remote(dir.path());
    // A: our domain, relaying through B.
    let a_data = dir.path().join("a");
    std::fs::create_dir_all(&a_data).unwrap();
    setup(&a_data);
    let config = dir.path().join("a.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nrelay_host = \"{}\"\nrelay_tls = \"may\"\n",
            b.addr("smtp")
        ),
    )
    .unwrap();
    let a = Server::start_with(&a_data, Some(&config));
    submit_as_alice(
        &a,
        &["carol@remote.test", "nobody@remote.test"],
        "From: alice@example.test\r\nSubject: over the relay\r\n\r\n.leading dot line\r\nhello carol\r\n",
    );
    wait_for_delivery_and_bounce(&a, &b, "over the relay");
    // The dot-stuffed line arrived intact.
    let body = Command::new("python3")
        .arg("-c")
        .arg(
            "import poplib,ssl,sys\n\
             c=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE\n\
             h,p=sys.argv[1].rsplit(':',1)\n\
             s=poplib.POP3_SSL(h,int(p),context=c);s.user('carol@remote.test');s.pass_('secret-pw')\n\
             print(b'\\n'.join(s.retr(1)[1]).decode());s.quit()",
        )
        .arg(b.addr("pop3s"))
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&body.stdout);
    assert!(text.contains("\n.leading dot line"), "{text}");
    a.stop_cleanly();
    b.stop_cleanly();
}

/// Quotas (set with the CLI while the server runs): a message declared larger than the quota
/// gets 552 5.2.2 at RCPT, and once the mailbox is full further mail gets 452 4.2.2.
#[test]
fn quota_is_enforced_at_rcpt() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    must(mailstow(
        &data,
        &["user", "quota", "bob@example.test", "20000"],
    ));
    let listed = must(mailstow(&data, &["user", "list"]));
    let bob: Vec<&str> = listed
        .lines()
        .find(|l| l.starts_with("bob@example.test "))
        .expect("bob listed")
        .split_whitespace()
        .collect();
    assert_eq!(
        bob[..4],
        ["bob@example.test", "0", "0", "19.5K"],
        "{listed}"
    );
    let run = Command::new("python3")
        .arg("-c")
        .arg(
            "import smtplib,sys,time\n\
             h,p=sys.argv[1].rsplit(':',1)\n\
             body=b'Subject: q\\r\\n\\r\\n'+b'z'*8000+b'\\r\\n'\n\
             time.sleep(3)  # the server's directory cache sees the new quota within 2 s\n\
             s=smtplib.SMTP(h,int(p),timeout=20);s.ehlo('q')\n\
             assert s.docmd('MAIL FROM:<a@remote.test> SIZE=30000')[0]==250\n\
             c,t=s.docmd('RCPT TO:<bob@example.test>');assert (c,t[:5])==(552,b'5.2.2'),(c,t)\n\
             s.rset()\n\
             for i in range(40):\n\
             \x20   s.mail('a@remote.test');c,t=s.rcpt('bob@example.test')\n\
             \x20   if c==452: assert t.startswith(b'4.2.2'),t;print('full after',i);break\n\
             \x20   assert c==250,(c,t);s.data(body);time.sleep(0.2)\n\
             else: raise SystemExit('quota never enforced')\n\
             s.quit()",
        )
        .arg(server.addr("smtp"))
        .output()
        .expect("python3");
    assert!(
        run.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    server.stop_cleanly();
}

/// Direct delivery: no relay; the recipient domain's MX (from a DNS server on loopback, a stub
/// zone) points at server B. A null-MX domain bounces at once (RFC 7505).
#[test]
fn delivers_to_the_recipient_domains_mx() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_remote(dir.path());
    let dns = FakeDns::start(&[
        "remote.test MX mx1.remote.test",
        "mx1.remote.test A 127.0.0.1",
        "nomail.test NULLMX",
    ]);
    let dns_port = dns.address.port();
    let a_data = dir.path().join("a");
    std::fs::create_dir_all(&a_data).unwrap();
    setup(&a_data);
    let config = dir.path().join("a.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\ndirect_delivery = true\ndns_servers = [\"127.0.0.1:{dns_port}\"]\nmx_port = {}\n",
            b.addresses["smtp"].port()
        ),
    )
    .unwrap();
    let a = Server::start_with(&a_data, Some(&config));
    submit_as_alice(&a, &["carol@remote.test"], "Subject: via mx\r\n\r\nhi\r\n");
    submit_as_alice(
        &a,
        &["bob@nomail.test"],
        "Subject: to null mx\r\n\r\nhi\r\n",
    );
    wait_for_delivery_and_bounce(&a, &b, "via mx");
    a.stop_cleanly();
    b.stop_cleanly();
}

/// Server B of the outbound tests: domain `remote.test` with carol (password `secret-pw`).
fn start_remote(dir: &std::path::Path) -> Server {
    let data = dir.join("b");
    std::fs::create_dir_all(&data).unwrap();
    must(mailstow(&data, &["domain", "add", "remote.test"]));
    must(mailstow(
        &data,
        &[
            "user",
            "add",
            "carol@remote.test",
            "--password",
            "secret-pw",
        ],
    ));
    Server::start(&data)
}

/// alice@example.test submits `message` to `recipients` on `server`'s submission listener
/// (STARTTLS, AUTH; Python's smtplib).
fn submit_as_alice(server: &Server, recipients: &[&str], message: &str) {
    let submit = Command::new("python3")
        .arg("-c")
        .arg(
            "import smtplib,ssl,sys\n\
             c=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE\n\
             h,p=sys.argv[1].rsplit(':',1)\n\
             s=smtplib.SMTP(h,int(p),timeout=20);s.starttls(context=c);s.login('alice@example.test','secret-pw')\n\
             print(s.sendmail('alice@example.test',sys.argv[2].split(','),sys.argv[3].encode()));s.quit()",
        )
        .arg(server.addr("submission"))
        .arg(recipients.join(","))
        .arg(message)
        .output()
        .expect("python3");
    assert!(submit.status.success(), "{submit:?}");
}

/// Waits until carol on `b` has a message with `subject` and alice on `a` has a bounce.
fn wait_for_delivery_and_bounce(a: &Server, b: &Server, subject: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let carol = b.subjects("carol@remote.test", "secret-pw");
        let alice = a.subjects("alice@example.test", "secret-pw");
        if carol.contains(subject) && alice.contains("Undelivered Mail Returned") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "carol: {carol:?}, alice: {alice:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
