//! The spam filter end to end (docs/spam.md): the real binary, real sockets, a real DNS
//! server on loopback. The built-in filter refuses GTUBE and files its junk variant to Junk
//! with its fields; training by IMAP MOVE into and out of Junk (and `spam train`) changes
//! the next verdict on similar mail, counting each message once; a blocklisted client is
//! refused naming the zone, a dead blocklist costs one bounded wait; Sieve's spamtest sees
//! the verdict; greylisting defers a first-time sender once; a user sending spam is refused
//! and then limited.

mod common;

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::mail::{log_lines, messages, send, send_from, start};
use common::{FakeDns, Imap, mailstow, must, set_up_data_dir};

const GTUBE: &str = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X";
const GTUBE_JUNK: &str =
    "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-ADD-HEADER*C.34X";

fn message(subject: &str, body: &str) -> String {
    format!(
        "From: Sender <sender@remote.test>\r\nTo: alice@example.test\r\nSubject: {subject}\r\n\
         Message-ID: <{}@remote.test>\r\n\r\n{body}\r\n",
        blake3::hash(format!("{subject}{body}").as_bytes()).to_hex()
    )
}

/// A generated corpus message, dot-stuffed and CRLF for DATA.
fn for_data(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw)
        .replace("\r\n", "\n")
        .replace('\n', "\r\n");
    let mut out = String::new();
    for line in text.split_inclusive("\r\n") {
        if line.starts_with('.') {
            out.push('.');
        }
        out.push_str(line);
    }
    if !out.ends_with("\r\n") {
        out.push_str("\r\n");
    }
    out
}

fn stats(data: &Path, user: &str) -> String {
    must(mailstow(data, &["spam", "stats", user]))
}

/// Waits until `spam stats` shows `needle` (the trainer works in the background).
fn wait_for_stats(data: &Path, user: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = stats(data, user);
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn gtube_is_refused_and_its_junk_variant_filed_to_junk_with_the_verdict() {
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(&data, "mx.example.test", "");
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("test", GTUBE),
    );
    assert_eq!(codes.last(), Some(&550), "{text}");
    assert!(text.contains("5.7.1") && text.contains("GTUBE"), "{text}");
    let (codes, text) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("junk test", GTUBE_JUNK),
    );
    assert_eq!(codes.last(), Some(&250), "{text}");
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("lunch", "Shall we meet for lunch on Thursday?"),
    );
    assert_eq!(codes.last(), Some(&250));
    let junk = messages(&server, "alice@example.test", "Junk", 1);
    assert_eq!(junk.len(), 1, "{junk:?}");
    assert!(junk[0].1.contains("X-Spam-Flag: YES"), "{}", junk[0].1);
    assert!(junk[0].1.contains("GTUBE_JUNK"), "{}", junk[0].1);
    let inbox = messages(&server, "alice@example.test", "INBOX", 1);
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert!(inbox[0].1.contains("X-Spam-Status: No"), "{}", inbox[0].1);
    assert!(!inbox[0].1.contains("X-Spam-Flag"), "{}", inbox[0].1);
    for action in ["reject", "junk", "accept"] {
        let lines = log_lines(&log, &["event=spam", &format!("action={action}")], 1);
        assert_eq!(lines.len(), 1, "{action}: {lines:?}");
        assert!(lines[0].contains("user=alice@example.test"), "{}", lines[0]);
        assert!(lines[0].contains("score="), "{}", lines[0]);
        assert!(lines[0].contains("reasons="), "{}", lines[0]);
    }
    // A sender cannot claim a verdict: its own fields are removed.
    let forged = message("forged", "X").replace(
        "Subject: forged",
        "X-Spam-Flag: NO\r\nX-Spam-Score: -100\r\nSubject: forged",
    );
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["bob@example.test"],
        &forged,
    );
    assert_eq!(codes.last(), Some(&250));
    let got = messages(&server, "bob@example.test", "INBOX", 1);
    assert!(!got[0].1.contains("X-Spam-Score: -100"), "{}", got[0].1);
    assert!(!got[0].1.contains("X-Spam-Flag: NO"), "{}", got[0].1);
    server.stop_cleanly();
}

/// Training by IMAP MOVE into and out of Junk, and by `spam train`, changes the verdict on
/// the next similar message; each message counts once.
#[test]
fn training_by_moves_into_and_out_of_junk_changes_the_next_verdict() {
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(&data, "mx.example.test", "");
    let corpus = spam::corpus::generate(38, 120);
    let spam: Vec<&Vec<u8>> = corpus
        .iter()
        .filter(|(c, _)| *c == spam::Class::Spam)
        .map(|(_, m)| m)
        .collect();
    let ham: Vec<&Vec<u8>> = corpus
        .iter()
        .filter(|(c, _)| *c == spam::Class::Ham)
        .map(|(_, m)| m)
        .collect();
    assert!(
        spam.len() >= 30 && ham.len() >= 30,
        "{} {}",
        spam.len(),
        ham.len()
    );
    let deliver = |raw: &[u8]| {
        let (codes, text) = send(
            &server,
            "smtp",
            None,
            "list@remote.test",
            &["alice@example.test"],
            &for_data(raw),
        );
        assert_eq!(codes.last(), Some(&250), "{text}");
    };
    // Held out, sent before any training: the model is neutral, the spam arrives in INBOX.
    let probe = spam[25];
    deliver(probe);
    let before = log_lines(&log, &["event=spam", "user=alice@example.test"], 1);
    assert!(before[0].contains("action=accept"), "{before:?}");
    // 20 spam then 20 ham into INBOX: UIDs 2..=21 are spam.
    for m in &spam[..20] {
        deliver(m);
    }
    for m in &ham[..20] {
        deliver(m);
    }
    messages(&server, "alice@example.test", "INBOX", 41);
    let mut imap = Imap::connect(&server.addr("imap"));
    imap.run("LOGIN alice@example.test secret-pw");
    imap.run("CREATE Junk");
    imap.run("SELECT INBOX");
    let moved = imap.run("UID MOVE 2:21 Junk");
    assert!(moved.last().unwrap().contains("OK"), "{moved:?}");
    let trained = wait_for_stats(&data, "alice@example.test", "trained: 20 spam");
    assert!(trained.contains("trained: 20 spam, 0 ham"), "{trained}");
    // The rest of INBOX (the probe and 20 ham) as ham, by the CLI.
    let out = must(mailstow(
        &data,
        &["spam", "train", "alice@example.test", "--ham", "INBOX"],
    ));
    assert!(out.contains("21 messages"), "{out}");
    let trained = stats(&data, "alice@example.test");
    assert!(trained.contains("trained: 20 spam, 21 ham"), "{trained}");
    // Trained again as ham: nothing counted twice.
    let out = must(mailstow(
        &data,
        &["spam", "train", "alice@example.test", "--ham", "INBOX"],
    ));
    assert!(out.contains("0 messages, 21 already trained"), "{out}");
    // Similar spam now goes to Junk.
    for m in &spam[26..31] {
        deliver(m);
    }
    let junked = log_lines(&log, &["event=spam", "action=junk", "BAYES_"], 3);
    assert!(junked.len() >= 3, "{junked:?}");
    // The probe out of Junk's neighbour: moving one spam back to INBOX moves its counts
    // from spam to ham (not added).
    imap.run("SELECT Junk");
    imap.run("UID MOVE 1 INBOX");
    let after = wait_for_stats(&data, "alice@example.test", "trained: 19 spam, 22 ham");
    assert!(after.contains("trained: 19 spam, 22 ham"), "{after}");
    // Copied into Junk twice: one spam count back, not two.
    imap.run("SELECT INBOX");
    let uids = imap.run("UID SEARCH ALL");
    let search = uids
        .iter()
        .find(|l| l.starts_with("* SEARCH"))
        .unwrap()
        .clone();
    let last: u32 = search.split_whitespace().last().unwrap().parse().unwrap();
    let first: u32 = search.split_whitespace().nth(2).unwrap().parse().unwrap();
    imap.run(&format!("UID COPY {last} Junk"));
    imap.run(&format!("UID COPY {last} Junk"));
    let after = wait_for_stats(&data, "alice@example.test", "trained: 20 spam, 21 ham");
    assert!(after.contains("trained: 20 spam, 21 ham"), "{after}");
    // The web view's move into Junk trains too: a message trained as ham moves over.
    let out = std::process::Command::new("python3")
        .arg(common::script("web_junk.py"))
        .arg(server.addr("web"))
        .args(["INBOX", &first.to_string(), "Junk"])
        .output()
        .expect("python3");
    assert!(out.status.success(), "web_junk.py: {out:?}");
    let after = wait_for_stats(&data, "alice@example.test", "trained: 21 spam, 20 ham");
    assert!(after.contains("trained: 21 spam, 20 ham"), "{after}");
    let lines = log_lines(&log, &["event=spam_trained", "source=move"], 4);
    assert!(lines.len() >= 4, "{lines:?}");
    imap.run("LOGOUT");
    server.stop_cleanly();
}

/// RFC 5782: a client listed in a zone that refuses is refused at connect with the zone
/// named; a listing in a scoring zone adds its weight; a dead zone costs one bounded wait.
#[test]
fn blocklisted_clients_are_refused_naming_the_zone_and_a_dead_list_costs_one_wait() {
    let dns = FakeDns::start(&[
        "2.0.0.127.bl.test A 127.0.0.2",
        "2.0.0.127.bl.test TXT listed for testing, see https://bl.test/",
        "3.0.0.127.score.test A 127.0.0.3",
        "spammy.test.dbl.test A 127.0.1.2",
        "2.0.0.127.dead.test SILENT",
        "3.0.0.127.dead.test SILENT",
        "4.0.0.127.dead.test SILENT",
        "5.0.0.127.dead.test SILENT",
    ]);
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(
        &data,
        "mx.example.test",
        &format!(
            "dns_servers = [\"{}\"]\nsender_checks = false\n\
             [spam]\ndnsbl_timeout_ms = 700\n\
             [[spam.dnsbl]]\nzone = \"bl.test\"\nreject = true\n\
             [[spam.dnsbl]]\nzone = \"score.test\"\nweight = 20.0\n\
             [[spam.dnsbl]]\nzone = \"dbl.test\"\nkind = \"domain\"\nweight = 6.0\n\
             [[spam.dnsbl]]\nzone = \"dead.test\"\nweight = 5.0\n",
            dns.address
        ),
    );
    let client = |last: u8| Some(IpAddr::from([127, 0, 0, last]));
    let (codes, text) = send_from(
        &server,
        client(2),
        "smtp",
        None,
        "a@remote.test",
        &["alice@example.test"],
        &message("hi", "hello"),
    );
    assert_eq!(codes, [554], "{text}");
    assert!(
        text.contains("bl.test") && text.contains("listed for testing"),
        "{text}"
    );
    // Scoring zone: refused after the data, the zone in the reasons.
    let (codes, text) = send_from(
        &server,
        client(3),
        "smtp",
        None,
        "a@remote.test",
        &["alice@example.test"],
        &message("hi", "hello"),
    );
    assert_eq!(codes.last(), Some(&550), "{text}");
    assert!(text.contains("DNSBL_score.test"), "{text}");
    // A link to a listed domain: junk.
    let (codes, _) = send_from(
        &server,
        client(4),
        "smtp",
        None,
        "a@remote.test",
        &["alice@example.test"],
        &message("offer", "Click https://spammy.test/buy now"),
    );
    assert_eq!(codes.last(), Some(&250));
    let junk = messages(&server, "alice@example.test", "Junk", 1);
    assert!(junk[0].1.contains("DNSBL_dbl.test"), "{}", junk[0].1);
    // The dead zone (it never answers) was waited for once, at most the timeout; then it
    // rests, and the next message does not wait for it.
    let timeouts = log_lines(&log, &["event=dnsbl_timeout", "zone=dead.test"], 1);
    assert_eq!(timeouts.len(), 1, "{timeouts:?}");
    let started = Instant::now();
    let (codes, _) = send_from(
        &server,
        client(5),
        "smtp",
        None,
        "a@remote.test",
        &["bob@example.test"],
        &message("quick", "no wait"),
    );
    assert_eq!(codes.last(), Some(&250));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    server.stop_cleanly();
}

/// RFC 5235: the verdict is what spamtest reads.
#[test]
fn sieve_spamtest_sees_the_verdict() {
    let (_dir, data) = set_up_data_dir();
    let (server, _log) = start(&data, "mx.example.test", "");
    let script = data.parent().unwrap().join("rules.sieve");
    std::fs::write(
        &script,
        "require [\"spamtest\", \"relational\", \"comparator-i;ascii-numeric\", \"fileinto\", \"mailbox\"];\n\
         if spamtest :value \"ge\" :comparator \"i;ascii-numeric\" \"5\" {\n\
           fileinto :create \"Suspicious\";\n\
         }\n",
    )
    .unwrap();
    must(mailstow(
        &data,
        &[
            "sieve",
            "put",
            "alice@example.test",
            "rules",
            script.to_str().unwrap(),
            "--activate",
        ],
    ));
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("junk test", GTUBE_JUNK),
    );
    assert_eq!(codes.last(), Some(&250));
    let (codes, _) = send(
        &server,
        "smtp",
        None,
        "sender@remote.test",
        &["alice@example.test"],
        &message("fine", "nothing to see"),
    );
    assert_eq!(codes.last(), Some(&250));
    let filed = messages(&server, "alice@example.test", "Suspicious", 1);
    assert_eq!(filed.len(), 1);
    assert!(filed[0].1.contains("GTUBE_JUNK"), "{}", filed[0].1);
    let inbox = messages(&server, "alice@example.test", "INBOX", 1);
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert!(inbox[0].1.contains("Subject: fine"));
    server.stop_cleanly();
}

/// RFC 6647: a first-time sender scoring at least the greylist threshold is deferred once;
/// its retry after the delay passes.
#[test]
fn greylisting_defers_a_first_time_sender_once() {
    let dns = FakeDns::start(&["6.0.0.127.grey.test A 127.0.0.2"]);
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(
        &data,
        "mx.example.test",
        &format!(
            "dns_servers = [\"{}\"]\nsender_checks = false\n\
             [spam]\ngreylist = true\ngreylist_delay_seconds = 2\n\
             [[spam.dnsbl]]\nzone = \"grey.test\"\nweight = 3.5\n",
            dns.address
        ),
    );
    let attempt = || {
        send_from(
            &server,
            Some(IpAddr::from([127, 0, 0, 6])),
            "smtp",
            None,
            "new@remote.test",
            &["alice@example.test"],
            &message("first", "first contact"),
        )
    };
    let (codes, text) = attempt();
    assert_eq!(codes.last(), Some(&451), "{text}");
    assert!(
        text.contains("4.7.1") && text.contains("greylisted"),
        "{text}"
    );
    // Too early: still deferred.
    let (codes, _) = attempt();
    assert_eq!(codes.last(), Some(&451));
    std::thread::sleep(Duration::from_millis(2200));
    let (codes, text) = attempt();
    assert_eq!(codes.last(), Some(&250), "{text}");
    let lines = log_lines(&log, &["event=spam", "action=greylist"], 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    server.stop_cleanly();
}

/// docs/spam.md 5: our own users' spam is refused, and an account that keeps sending it
/// is limited; the operator is told and can release it.
#[test]
fn a_user_sending_spam_is_refused_then_limited() {
    let (_dir, data) = set_up_data_dir();
    let (server, log) = start(
        &data,
        "mx.example.test",
        "[spam]\noutbound_flagged_max = 2\noutbound_limited_per_hour = 1\n",
    );
    let submit = |body: &str| {
        send(
            &server,
            "submission",
            Some("alice@example.test"),
            "alice@example.test",
            &["someone@remote.test"],
            &message("out", body).replace("sender@remote.test", "alice@example.test"),
        )
    };
    let (codes, text) = submit(GTUBE);
    assert_eq!(codes.last(), Some(&550), "{text}");
    // A flagged (junk-level) submission passes; with the refused one it is the second
    // flagged this hour, and the account is limited.
    let (codes, _) = submit(GTUBE_JUNK);
    assert_eq!(codes.last(), Some(&250));
    let limited = log_lines(&log, &["event=outbound_spam", "action=limited"], 1);
    assert_eq!(limited.len(), 1, "{limited:?}");
    // One message an hour while limited; the next waits.
    let (codes, _) = submit("an ordinary note");
    assert_eq!(codes.last(), Some(&250));
    let (codes, text) = submit("another ordinary note");
    assert_eq!(codes.last(), Some(&451), "{text}");
    assert!(stats(&data, "alice@example.test").contains("outbound: limited"));
    let out = must(mailstow(&data, &["spam", "release", "alice@example.test"]));
    assert!(out.contains("released"), "{out}");
    let (codes, _) = submit("free again");
    assert_eq!(codes.last(), Some(&250));
    server.stop_cleanly();
}

/// Thresholds per user override the domain's, which override `[spam]`'s.
#[test]
fn thresholds_per_domain_and_user() {
    let (_dir, data) = set_up_data_dir();
    let (server, _log) = start(&data, "mx.example.test", "");
    // GTUBE_JUNK scores 10: under a reject threshold of 8 it is refused for alice only.
    must(mailstow(
        &data,
        &[
            "spam",
            "set",
            "example.test",
            "--reject",
            "30",
            "--junk",
            "20",
        ],
    ));
    must(mailstow(
        &data,
        &[
            "spam",
            "set",
            "alice@example.test",
            "--reject",
            "8",
            "--junk",
            "5",
        ],
    ));
    let deliver = |to: &str| {
        send(
            &server,
            "smtp",
            None,
            "sender@remote.test",
            &[to],
            &message("t", GTUBE_JUNK),
        )
    };
    let (codes, _) = deliver("alice@example.test");
    assert_eq!(codes.last(), Some(&550));
    // bob: the domain's thresholds: 10 < 20, accepted into INBOX.
    let (codes, _) = deliver("bob@example.test");
    assert_eq!(codes.last(), Some(&250));
    let inbox = messages(&server, "bob@example.test", "INBOX", 1);
    assert!(inbox[0].1.contains("X-Spam-Status: No"), "{}", inbox[0].1);
    assert!(stats(&data, "alice@example.test").contains("reject 8.0"));
    server.stop_cleanly();
}
