//! Users' mail rules (Sieve, RFC 5228) at final delivery, end to end: the real binary, real
//! sockets. A rule files and flags, rejects before the 250 (SMTP, and LMTP per recipient),
//! discards, redirects to another server (SRS: SPF passes there), replies once per sender
//! while a vacation is on and never to a list; a rule that fails keeps the message in INBOX.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;

use common::mail::{fetch_all, log_lines, messages, send, start, start_args};
use common::{FakeDns, Server, mailstow, must, set_up_data_dir};

/// Stores `script` as `user`'s active script `rules` with the CLI.
fn put_script(data: &Path, user: &str, script: &str) {
    let file = data.parent().unwrap().join(format!("{user}.sieve"));
    std::fs::write(&file, script).unwrap();
    must(mailstow(
        data,
        &[
            "sieve",
            "put",
            user,
            "rules",
            file.to_str().unwrap(),
            "--activate",
        ],
    ));
}

fn message(from: &str, to: &str, subject: &str, extra: &str) -> String {
    format!(
        "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: <{}@test>\r\n{extra}\r\n\
         hello\r\n",
        subject.replace(' ', "-")
    )
}

#[test]
fn rules_file_flag_reject_discard_and_a_failing_rule_keeps_the_message() {
    let (_dir, data) = set_up_data_dir();
    put_script(
        &data,
        "alice@example.test",
        r#"require ["fileinto", "imap4flags", "reject", "mailbox"];
# Invoices go to their own folder, flagged.
if header :contains "subject" "invoice" {
    fileinto :create :flags "\\Flagged" "Invoices";
    stop;
}
if header :contains "subject" "unwanted" {
    reject "I do not want this.";
    stop;
}
if header :contains "subject" "trash" {
    discard;
    stop;
}
"#,
    );
    // A rule that fails at run time: the folder does not exist and is not created.
    put_script(
        &data,
        "bob@example.test",
        "require \"fileinto\";\nfileinto \"Nowhere\";\n",
    );
    let (server, log) = start_args(&data, "mx.example.test", "", &["--metrics", "127.0.0.1:0"]);

    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "x@remote.test",
        &["alice@example.test"],
        &message("x@remote.test", "alice@example.test", "invoice 42", ""),
    );
    assert_eq!(codes.last(), Some(&250), "{text}");
    let invoices = messages(&server, "alice@example.test", "Invoices", 1);
    assert_eq!(invoices.len(), 1, "filed into Invoices");
    assert!(invoices[0].0.contains("\\Flagged"), "{:?}", invoices[0].0);
    assert!(invoices[0].1.contains("Subject: invoice 42"));
    assert_eq!(
        log_lines(
            &log,
            &[
                "event=sieve",
                "action=fileinto",
                "folder=Invoices",
                "alice@example.test"
            ],
            1
        )
        .len(),
        1
    );

    // RFC 5429 2.1: refused at the end of the data, with the script's reason.
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "x@remote.test",
        &["alice@example.test"],
        &message("x@remote.test", "alice@example.test", "unwanted offer", ""),
    );
    assert_eq!(codes.last(), Some(&550), "{text}");
    assert!(
        text.contains("5.7.1") && text.contains("I do not want this."),
        "{text}"
    );
    // LMTP answers per recipient: alice refuses, bob (whose rule fails) takes it.
    let (codes, _) = send(
        &server,
        "lmtp",
        None,
        "x@remote.test",
        &["alice@example.test", "bob@example.test"],
        &message("x@remote.test", "alice@example.test", "unwanted again", ""),
    );
    assert_eq!(&codes[codes.len() - 2..], &[550, 250], "{codes:?}");

    // Discarded: accepted, stored nowhere.
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "x@remote.test",
        &["alice@example.test"],
        &message("x@remote.test", "alice@example.test", "trash this", ""),
    );
    assert_eq!(codes.last(), Some(&250));
    assert_eq!(
        log_lines(&log, &["event=sieve", "action=discard"], 1).len(),
        1
    );
    // Anything else: the implicit keep.
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "x@remote.test",
        &["alice@example.test"],
        &message("x@remote.test", "alice@example.test", "plain", ""),
    );
    assert_eq!(codes.last(), Some(&250));
    let inbox = messages(&server, "alice@example.test", "INBOX", 1);
    let subjects: Vec<&str> = inbox
        .iter()
        .filter_map(|(_, m)| m.lines().find(|l| l.starts_with("Subject: ")))
        .collect();
    assert_eq!(subjects, ["Subject: plain"], "only the kept message");

    // bob's rule failed on the LMTP copy: kept in INBOX, the reason logged.
    let bob = messages(&server, "bob@example.test", "INBOX", 1);
    assert_eq!(bob.len(), 1);
    let errors = log_lines(&log, &["event=sieve_error", "bob@example.test"], 1);
    assert!(errors.iter().any(|l| l.contains("Nowhere")), "{errors:?}");
    // The operator's counters: per action, and errors.
    let metrics = get_metrics(&server);
    for (series, at_least) in [
        ("mailstow_sieve_actions_total{action=\"fileinto\"}", 1),
        ("mailstow_sieve_actions_total{action=\"refused\"}", 2),
        ("mailstow_sieve_actions_total{action=\"discard\"}", 1),
        ("mailstow_sieve_errors_total", 1),
    ] {
        let value: u64 = metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(series)
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
            .unwrap_or_else(|| panic!("no {series} in {metrics}"));
        assert!(value >= at_least, "{series} = {value}");
    }
    server.stop_cleanly();
}

#[test]
fn a_vacation_replies_once_per_sender_and_never_to_a_list() {
    let (_dir, data) = set_up_data_dir();
    must(mailstow(
        &data,
        &["dkim", "generate", "example.test", "--selector", "s1"],
    ));
    put_script(
        &data,
        "alice@example.test",
        "require \"vacation\";\nvacation :days 7 :subject \"Away\" \"I am away until Monday.\";\n",
    );
    let (server, log) = start(&data, "mx.example.test", "");
    // A list message: no reply (RFC 5230 4.5, RFC 3834 2).
    send(
        &server,
        "submission",
        Some("bob@example.test"),
        "bob@example.test",
        &["alice@example.test"],
        &message(
            "bob@example.test",
            "alice@example.test",
            "list post",
            "List-Id: <talk.example.test>\r\n",
        ),
    );
    assert_eq!(
        log_lines(&log, &["event=sieve", "action=vacation_skipped"], 1).len(),
        1
    );
    // Two messages from bob: one reply.
    for subject in ["first", "second"] {
        let (codes, text) = send(
            &server,
            "submission",
            Some("bob@example.test"),
            "bob@example.test",
            &["alice@example.test"],
            &message("bob@example.test", "alice@example.test", subject, ""),
        );
        assert_eq!(codes.last(), Some(&250), "{text}");
    }
    assert_eq!(
        log_lines(&log, &["event=sieve", "action=vacation_skipped"], 2).len(),
        2,
        "the second message is not answered"
    );
    let replies = messages(&server, "bob@example.test", "INBOX", 1);
    assert_eq!(replies.len(), 1, "one reply");
    let reply = &replies[0].1;
    assert!(reply.contains("Auto-Submitted: auto-replied"), "{reply}");
    assert!(reply.contains("Subject: Away"), "{reply}");
    assert!(reply.contains("I am away until Monday."), "{reply}");
    assert!(reply.contains("In-Reply-To: <first@test>"), "{reply}");
    assert!(reply.contains("DKIM-Signature:"), "signed: {reply}");
    assert!(reply.contains("Return-Path: <>"), "null sender: {reply}");
    server.stop_cleanly();
}

#[test]
fn a_redirect_reaches_another_server_with_spf_passing() {
    let dns = FakeDns::start(&[
        "example.test TXT v=spf1 ip4:127.0.0.0/8 -all",
        "remote.test TXT v=spf1 ip4:127.0.0.0/8 -all",
    ]);
    // The other server: other.test, checking SPF.
    let other_dir = tempfile::tempdir().unwrap();
    let other_data = other_dir.path().join("data");
    std::fs::create_dir_all(&other_data).unwrap();
    must(mailstow(&other_data, &["domain", "add", "other.test"]));
    must(mailstow(
        &other_data,
        &["user", "add", "carol@other.test", "--password", "secret-pw"],
    ));
    let (other, _) = start(
        &other_data,
        "mx.other.test",
        &format!("dns_servers = [\"{}\"]", dns.address),
    );

    let (_dir, data) = set_up_data_dir();
    put_script(
        &data,
        "alice@example.test",
        "redirect \"carol@other.test\";\n",
    );
    let (server, log) = start(
        &data,
        "mx.example.test",
        &format!(
            "dns_servers = [\"{}\"]\nrelay_host = \"{}\"\nrelay_tls = \"none\"",
            dns.address,
            other.addr("smtp")
        ),
    );
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "x@remote.test",
        &["alice@example.test"],
        &message("x@remote.test", "alice@example.test", "pass it on", ""),
    );
    assert_eq!(codes.last(), Some(&250), "{text}");
    let arrived = messages(&other, "carol@other.test", "INBOX", 1);
    assert_eq!(arrived.len(), 1, "the redirected copy arrived");
    let copy = &arrived[0].1;
    assert!(copy.contains("Subject: pass it on"), "{copy}");
    // The reverse path was rewritten into alice's domain (SRS), which authorises us.
    assert!(copy.contains("Return-Path: <SRS0="), "{copy}");
    // The other server's field, folded over several lines.
    let results = copy
        .split("\r\n")
        .skip_while(|l| !l.starts_with("Authentication-Results: mx.other.test"))
        .take_while(|l| l.starts_with("Authentication-Results") || l.starts_with('\t'))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(results.contains("spf=pass"), "{copy}");
    assert!(
        log_lines(
            &log,
            &["event=sieve", "action=redirect", "to=carol@other.test"],
            1
        )
        .len()
            == 1
    );
    // Not kept: redirect cancels the implicit keep (RFC 5228 4.2).
    assert!(fetch_all(&server, "alice@example.test", "INBOX").is_empty());

    // A bounce to the rewritten address goes back to the original sender (here remote:
    // accepted for relay to it).
    let srs = copy
        .lines()
        .find_map(|l| l.strip_prefix("Return-Path: <"))
        .and_then(|l| l.strip_suffix('>'))
        .unwrap()
        .to_string();
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "",
        &[srs.as_str()],
        "Subject: bounce\r\n\r\nundeliverable\r\n",
    );
    assert_eq!(codes[1], 250, "the SRS address is taken back: {codes:?}");
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "",
        &[&srs.replacen("SRS0=", "SRS0=x", 1)],
        "Subject: forged\r\n\r\nx\r\n",
    );
    assert_eq!(codes[1], 550, "a forged one is not: {codes:?}");
    server.stop_cleanly();
    other.stop_cleanly();
}

#[test]
fn an_import_goes_through_the_rules_only_when_asked() {
    let (dir, data) = set_up_data_dir();
    put_script(
        &data,
        "alice@example.test",
        "require [\"fileinto\", \"mailbox\"];\n\
         if header :contains \"subject\" \"invoice\" { fileinto :create \"Invoices\"; }\n",
    );
    let mbox = dir.path().join("old.mbox");
    std::fs::write(
        &mbox,
        "From x@remote.test Mon Jan  5 10:00:00 2026\nReturn-Path: <x@remote.test>\n\
         Subject: invoice 7\n\nold bill\n\n\
         From y@remote.test Mon Jan  5 11:00:00 2026\nSubject: other\n\nold note\n\n",
    )
    .unwrap();
    let (server, log) = start(&data, "mx.example.test", "");
    // Without --rules: both into INBOX, as they were.
    must(mailstow(
        &data,
        &[
            "mailbox",
            "import",
            "alice@example.test",
            mbox.to_str().unwrap(),
        ],
    ));
    assert_eq!(fetch_all(&server, "alice@example.test", "INBOX").len(), 2);
    assert!(fetch_all(&server, "alice@example.test", "Invoices").is_empty());
    // With --rules: filed as new mail would be.
    must(mailstow(
        &data,
        &[
            "mailbox",
            "import",
            "alice@example.test",
            mbox.to_str().unwrap(),
            "--rules",
        ],
    ));
    let invoices = fetch_all(&server, "alice@example.test", "Invoices");
    assert_eq!(invoices.len(), 1);
    assert!(invoices[0].1.contains("Subject: invoice 7"));
    assert_eq!(fetch_all(&server, "alice@example.test", "INBOX").len(), 3);
    assert_eq!(
        log_lines(
            &log,
            &["event=sieve", "action=fileinto", "folder=Invoices"],
            1
        )
        .len(),
        1
    );
    server.stop_cleanly();
    // With no server, --rules says what it needs.
    let out = mailstow(
        &data,
        &[
            "mailbox",
            "import",
            "alice@example.test",
            mbox.to_str().unwrap(),
            "--rules",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("running server"));
}

/// `GET /metrics` on the server's metrics listener.
fn get_metrics(server: &Server) -> String {
    let mut http = TcpStream::connect(server.metrics.expect("a metrics listener")).unwrap();
    http.write_all(b"GET /metrics HTTP/1.0\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    text
}
