//! The cluster (issue 20): three `mailstow serve` nodes on one machine, each on its own
//! loopback address, sharing a private PostgreSQL directory; real sockets, real clients.
//!
//! Users are placed one per node. Mail sent to any node reaches the owner exactly once,
//! IMAP, POP3 and ManageSieve logins on any node reach the owner (IDLE through the proxy too), a killed
//! or stopped node is an outage for its own users only, PostgreSQL down stops neither mail
//! nor logins, and a copy routed with a stale owner epoch is refused.

mod common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::cluster::*;
use common::{Imap, smtp_reply};

#[test]
fn mail_and_logins_on_any_node_reach_the_owner() {
    let mut cluster = Cluster::start(41);
    let users = ["u1@example.test", "u2@example.test", "u3@example.test"];
    for entry in 1..=3 {
        let code = send(
            &cluster.node(entry).addr(PORT_SMTP),
            &users,
            &format!("from-n{entry}"),
        );
        assert_eq!(code, 250);
    }
    let expected = vec!["from-n1", "from-n2", "from-n3"];
    for (i, user) in users.iter().enumerate() {
        let owner = cluster.node(i + 1);
        let got = wait_for(&owner.addr(PORT_POP3), user, 3, Duration::from_secs(30));
        if got != expected {
            for node in &cluster.nodes {
                eprintln!("{}: {:#?}", node.name, node.log_lines("event="));
            }
        }
        assert_eq!(got, expected, "{user} on its own node");
        // Through every node: the proxy reaches the owner, and every copy is there once.
        for entry in 1..=3 {
            let got = pop3_subjects(&cluster.node(entry).addr(PORT_POP3), user).unwrap();
            assert_eq!(got, expected, "{user} through n{entry}");
            let (mut imap, answer) = imap_login(&cluster.node(entry).addr(PORT_IMAP), user);
            assert!(
                answer.contains("OK"),
                "IMAP login of {user} at n{entry}: {answer}"
            );
            let select = imap.run("SELECT INBOX");
            assert!(
                select.iter().any(|l| l == "* 3 EXISTS"),
                "{user} through n{entry}: {select:?}"
            );
            imap.run("LOGOUT");
        }
    }
    // Only the owner stored a copy: the others handed theirs over.
    for (i, node) in cluster.nodes.iter().enumerate() {
        let stored: Vec<String> = node
            .log_lines("event=delivered")
            .into_iter()
            .filter(|l| l.contains("folder=INBOX"))
            .collect();
        let own = format!("to=u{}@example.test", i + 1);
        assert_eq!(stored.len(), 3, "{}: {stored:?}", node.name);
        assert!(stored.iter().all(|l| l.contains(&own)), "{stored:?}");
    }

    // IDLE through the proxy sees new mail: u2's session opened on n1, mail sent to n3.
    let (mut imap, answer) = imap_login(&cluster.node(1).addr(PORT_IMAP), users[1]);
    assert!(answer.contains("OK"));
    imap.run("SELECT INBOX");
    imap.reader.get_mut().write_all(b"i1 IDLE\r\n").unwrap();
    assert!(imap.line().starts_with("+"));
    assert_eq!(
        send(&cluster.node(3).addr(PORT_SMTP), &[users[1]], "idle"),
        250
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let line = imap.line();
        if line == "* 4 EXISTS" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no EXISTS through the proxy: {line}"
        );
    }
    imap.reader.get_mut().write_all(b"DONE\r\n").unwrap();
    // RFC 3501 7.3.2: the idling session was the first told of the message, so a RECENT
    // may come before the tagged answer.
    let mut line = imap.line();
    while line.starts_with("* ") && line.ends_with(" RECENT") {
        line = imap.line();
    }
    assert!(line.starts_with("i1 OK"), "{line}");

    // A copy routed with a stale epoch is refused (4xx); the right epoch is stored, and the
    // same origin message again is acknowledged without a second copy, also after the owner
    // was killed (SIGKILL) and restarted: its key is in its store's journal with the copy.
    let owner_lmtp = cluster.node(2).addr(PORT_LMTP);
    let lmtp = |epoch: i64, origin: &str| -> String {
        let stream = TcpStream::connect(&owner_lmtp).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        let read = |reader: &mut BufReader<TcpStream>| {
            let mut text = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                text.push_str(&line);
                if line.as_bytes().get(3) != Some(&b'-') {
                    return text;
                }
            }
        };
        read(&mut reader);
        writer.write_all(b"LHLO test\r\n").unwrap();
        assert!(read(&mut reader).contains("XMAILSTOW-ROUTE"));
        let content = b"Subject: handed\r\n\r\nhi\r\n";
        writer
            .write_all(
                format!(
                    "MAIL FROM:<s@example.org> XORIGIN={origin}\r\n\
                     RCPT TO:<u2@example.test> XEPOCH={epoch}\r\nBDAT {} LAST\r\n",
                    content.len()
                )
                .as_bytes(),
            )
            .unwrap();
        writer.write_all(content).unwrap();
        assert!(read(&mut reader).starts_with("250"));
        assert!(read(&mut reader).starts_with("250"));
        read(&mut reader)
    };
    let stale = lmtp(0, "n9:1.1");
    assert!(stale.starts_with("451 4.4.0"), "{stale}");
    assert!(lmtp(1, "n9:1.1").starts_with("250"));
    assert!(lmtp(1, "n9:1.1").starts_with("250"));
    let duplicates = |cluster: &Cluster| cluster.node(2).log_lines("event=duplicate").len();
    let before = duplicates(&cluster);
    drop(imap);
    cluster.nodes[1].kill();
    cluster.nodes[1].start();
    assert!(lmtp(1, "n9:1.1").starts_with("250"));
    let data = cluster._dir.path().join("n2");
    assert!(
        !data.join("cluster-delivered").exists(),
        "the keys live in the store, not in a file of their own"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while duplicates(&cluster) <= before {
        assert!(
            Instant::now() < deadline,
            "the restarted owner logged no duplicate"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = wait_for(
        &cluster.node(2).addr(PORT_POP3),
        users[1],
        5,
        Duration::from_secs(5),
    );
    assert_eq!(got.iter().filter(|s| *s == "handed").count(), 1, "{got:?}");
}

/// One ManageSieve command's answer: its lines up to the one starting OK, NO or BYE (no
/// literals in what this test asks).
fn sieve_answer(reader: &mut BufReader<TcpStream>) -> String {
    let mut all = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return all;
        }
        all.push_str(&line);
        if ["OK", "NO", "BYE"].iter().any(|s| line.starts_with(s)) {
            return all;
        }
    }
}

/// A ManageSieve login of u2 (owned by n2) at n1 is handed to n2: n1 checks the password and
/// logs `result=proxied`, n2 logs the login with n1 as the node that handed it over, the
/// session lists the script u2 has, and a change made through it is n2's.
#[test]
fn a_managesieve_login_at_another_node_reaches_the_owner() {
    let cluster = Cluster::start(47);
    let script = cluster._dir.path().join("rules.sieve");
    std::fs::write(&script, "keep;\n").unwrap();
    cluster.node(3).must(&[
        "sieve",
        "put",
        "u2@example.test",
        "rules",
        script.to_str().unwrap(),
    ]);
    let stream = TcpStream::connect(cluster.node(1).addr(PORT_MANAGESIEVE)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let greeting = sieve_answer(&mut reader);
    assert!(greeting.contains("\"SIEVE\""), "{greeting}");
    let mut run = |command: &str| -> String {
        writer
            .write_all(format!("{command}\r\n").as_bytes())
            .unwrap();
        sieve_answer(&mut reader)
    };
    use base64::Engine as _;
    let plain =
        base64::engine::general_purpose::STANDARD.encode(format!("\0u2@example.test\0{PASSWORD}"));
    let answer = run(&format!("AUTHENTICATE \"PLAIN\" \"{plain}\""));
    assert!(answer.starts_with("OK"), "{answer}");
    let listed = run("LISTSCRIPTS");
    assert_eq!(listed, "\"rules\"\r\nOK \"Listscripts completed\"\r\n");
    assert!(run("SETACTIVE \"rules\"").starts_with("OK"));
    assert!(run("LOGOUT").starts_with("OK"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let proxied = cluster
            .node(1)
            .log_lines("event=login proto=managesieve user=u2@example.test");
        let owner = cluster
            .node(2)
            .log_lines("event=login proto=managesieve user=u2@example.test");
        let changed = cluster
            .node(2)
            .log_lines("event=managesieve action=setactive");
        if proxied
            .iter()
            .any(|l| l.contains("result=proxied") && l.contains("node=n2"))
            && owner
                .iter()
                .any(|l| l.contains("result=ok") && l.contains("node=cluster:n1"))
            && changed.iter().any(|l| l.contains("script=rules"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "n1: {proxied:?}\nn2: {owner:?} {changed:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        cluster.node(1).log_lines("event=managesieve").is_empty(),
        "n1 changed nothing itself"
    );
    let listed = cluster.node(1).must(&["sieve", "list", "u2@example.test"]);
    assert!(listed.ends_with("\tactive\n"), "{listed}");
}

/// A user of node 2 reads mail in node 1's web view (forwarded to node 2, which logs the
/// browser's address, not node 1's); with node 2 killed, its user gets the "temporarily
/// unavailable" page on node 1 while node 3's user goes on (`tests/e2e/web_cluster.py`).
#[test]
fn a_user_of_one_node_uses_the_web_view_on_another() {
    let mut cluster = Cluster::start(46);
    let jar = cluster._dir.path().join("cookies.txt");
    let python = |args: &[&str]| {
        let out = Command::new("python3")
            .arg(common::script("web_cluster.py"))
            .args(args)
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "web_cluster.py {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let web = cluster.node(1).addr(PORT_WEB);
    python(&[
        "use",
        &web,
        &cluster.node(3).addr(PORT_SMTP),
        jar.to_str().unwrap(),
        "u2@example.test",
    ]);
    let logins = cluster.node(2).log_lines("event=login proto=web");
    assert!(
        logins
            .iter()
            .any(|l| l.contains("u2@example.test") && l.contains("client=127.0.0.1")),
        "the owner's login line with the browser's address: {logins:?}"
    );
    assert!(
        cluster
            .node(1)
            .log_lines("event=login proto=web")
            .is_empty(),
        "node 1 checked the password itself"
    );
    cluster.nodes[1].kill();
    python(&["down", &web, jar.to_str().unwrap(), "u3@example.test"]);
}

#[test]
fn a_killed_node_is_an_outage_for_its_own_users_only() {
    let mut cluster = Cluster::start(42);
    static USERS: [&str; 3] = ["u1@example.test", "u2@example.test", "u3@example.test"];
    let stop = Arc::new(AtomicBool::new(false));
    let sender = load(&cluster, &[1, 2], &USERS, stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    let killed_at = Instant::now();
    cluster.nodes[2].kill();
    // u3's logins answer UNAVAILABLE at once (after the lease runs out, or at the first
    // connection refused); u1's and u2's go on.
    let mut unavailable_after = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while unavailable_after.is_none() {
        let asked = Instant::now();
        let (_imap, answer) = imap_login(&cluster.node(1).addr(PORT_IMAP), "u3@example.test");
        let took = asked.elapsed();
        if answer.contains("NO [UNAVAILABLE]") {
            assert!(took < Duration::from_secs(4), "UNAVAILABLE took {took:?}");
            unavailable_after = Some(killed_at.elapsed());
        }
        assert!(Instant::now() < deadline, "no UNAVAILABLE for u3: {answer}");
        let (_imap, answer) = imap_login(&cluster.node(2).addr(PORT_IMAP), "u1@example.test");
        assert!(answer.contains(" OK"), "u1 during the outage: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pop3 = pop3_subjects(&cluster.node(2).addr(PORT_POP3), "u3@example.test");
    assert!(
        pop3.as_ref()
            .is_err_and(|e| e.starts_with("-ERR [SYS/TEMP]")),
        "{pop3:?}"
    );
    eprintln!("failover: u3 unavailable {unavailable_after:?} after SIGKILL");
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    assert!(
        sent.iter().all(|(_, _, code)| *code == 250),
        "a refusal under load"
    );
    let restarted_at = Instant::now();
    cluster.nodes[2].start();
    for (i, user) in USERS.iter().enumerate() {
        let mut want: Vec<String> = sent
            .iter()
            .filter(|(u, _, _)| u == user)
            .map(|(_, s, _)| s.clone())
            .collect();
        want.sort();
        let got = wait_for(
            &cluster.node(i + 1).addr(PORT_POP3),
            user,
            want.len(),
            Duration::from_secs(60),
        );
        assert_eq!(got, want, "{user}: every accepted message once");
    }
    eprintln!(
        "failover: u3's queued mail delivered {:?} after the restart",
        restarted_at.elapsed()
    );
}

/// Links cut with iptables `DROP` rules on the test's own loopback addresses; removed when
/// dropped.
struct Cut {
    rules: Vec<Vec<String>>,
}

impl Cut {
    /// Drops every packet to `ip` for these TCP ports. (A connection between two loopback
    /// addresses has 127.0.0.1 as its source whatever node makes it, so a link is cut by
    /// its destination.)
    fn to(ip: &str, ports: &[u16]) -> Cut {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let rule: Vec<String> = [
            "OUTPUT",
            "-d",
            ip,
            "-p",
            "tcp",
            "-m",
            "multiport",
            "--dports",
            &ports.join(","),
            "-j",
            "DROP",
        ]
        .map(String::from)
        .to_vec();
        let mut cut = Cut { rules: Vec::new() };
        let status = Command::new("iptables")
            .arg("-I")
            .args(&rule)
            .status()
            .expect("iptables (apt-get install iptables; the test runs as root)");
        assert!(status.success(), "iptables -I {rule:?}");
        cut.rules.push(rule);
        cut
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        for rule in self.rules.drain(..) {
            let _ = Command::new("iptables").arg("-D").args(&rule).status();
        }
    }
}

/// n1 cut off from n2 (its LMTP and IMAP listeners) for 10 s while n2's lease stays up and
/// mail for n2's user goes into n1: once the link heals, a prober that reaches n2 within a
/// fraction of a second hands every queued copy over at once (not on the retry schedule,
/// which had grown to 8 s and more), and proxied logins through n1 work again at once (not
/// after the 5 s of suspicion).
#[test]
fn a_healed_partition_delivers_its_queued_mail_within_two_seconds() {
    let cluster = Cluster::start(49);
    let user = "u2@example.test";
    // A pooled connection exists before the cut, as under load.
    assert_eq!(
        send(&cluster.node(1).addr(PORT_SMTP), &[user], "before"),
        250
    );
    assert_eq!(
        wait_for(
            &cluster.node(2).addr(PORT_POP3),
            user,
            1,
            Duration::from_secs(20)
        ),
        vec!["before"]
    );
    let cut = Cut::to(&cluster.node(2).ip, &[PORT_LMTP, PORT_IMAP]);
    let cut_at = Instant::now();
    let mut want = vec!["before".to_string()];
    let mut n = 0;
    while cut_at.elapsed() < Duration::from_secs(10) {
        let subject = format!("cut-{n}");
        assert_eq!(
            send(&cluster.node(1).addr(PORT_SMTP), &[user], &subject),
            250
        );
        want.push(subject);
        n += 1;
        if n % 10 == 0 {
            // A proxied login meets the cut (and makes n2 suspect on n1).
            let (_imap, answer) = imap_login(&cluster.node(1).addr(PORT_IMAP), user);
            assert!(answer.contains("NO [UNAVAILABLE]"), "{answer}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    want.sort();
    assert!(
        pop3_subjects(&cluster.node(2).addr(PORT_POP3), user)
            .unwrap()
            .len()
            < want.len(),
        "mail crossed the cut"
    );
    // n2 suspect on n1 at the moment the link heals.
    let (_imap, answer) = imap_login(&cluster.node(1).addr(PORT_IMAP), user);
    assert!(answer.contains("NO [UNAVAILABLE]"), "{answer}");
    drop(cut);
    let healed = Instant::now();
    let proxy = cluster.node(1).addr(PORT_IMAP);
    let login = std::thread::spawn(move || {
        loop {
            let (_imap, answer) = imap_login(&proxy, user);
            if answer.contains(" OK") {
                return healed.elapsed();
            }
            assert!(healed.elapsed() < Duration::from_secs(10), "{answer}");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let deadline = healed + Duration::from_secs(30);
    let got = loop {
        let got = pop3_subjects(&cluster.node(2).addr(PORT_POP3), user).unwrap_or_default();
        if got.len() >= want.len() || Instant::now() >= deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let delivered_after = healed.elapsed();
    assert_eq!(got, want, "every message once");
    let login_after = login.join().unwrap();
    eprintln!(
        "healed partition: {} messages delivered {delivered_after:?} after healing, a proxied \
         login worked {login_after:?} after",
        want.len() - 1
    );
    assert!(
        delivered_after < Duration::from_secs(2),
        "{delivered_after:?}"
    );
    assert!(login_after < Duration::from_secs(2), "{login_after:?}");
    // The mail log reaches us through the node's stderr, in batches: poll.
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster
        .node(1)
        .log_lines("event=node_reachable node=n2")
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the prober never logged reaching n2"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_stopped_node_is_an_outage_within_a_bounded_time() {
    let cluster = Cluster::start(43);
    cluster.node(3).signal("-STOP");
    let stopped_at = Instant::now();
    // An open socket that never answers: the proxy gives up within its open timeout, and
    // then at once while the node is suspect or its lease has run out.
    let (_imap, answer) = imap_login(&cluster.node(1).addr(PORT_IMAP), "u3@example.test");
    assert!(answer.contains("NO [UNAVAILABLE]"), "{answer}");
    assert!(stopped_at.elapsed() < Duration::from_secs(5));
    let asked = Instant::now();
    let (_imap, answer) = imap_login(&cluster.node(2).addr(PORT_IMAP), "u3@example.test");
    assert!(answer.contains("NO [UNAVAILABLE]"), "{answer}");
    assert!(asked.elapsed() < Duration::from_secs(4));
    // Mail for the stopped node's user is accepted and waits; others' is delivered.
    assert_eq!(
        send(
            &cluster.node(1).addr(PORT_SMTP),
            &["u3@example.test", "u2@example.test"],
            "while-stopped"
        ),
        250
    );
    let got = wait_for(
        &cluster.node(2).addr(PORT_POP3),
        "u2@example.test",
        1,
        Duration::from_secs(20),
    );
    assert_eq!(got, vec!["while-stopped"]);
    cluster.node(3).signal("-CONT");
    let got = wait_for(
        &cluster.node(3).addr(PORT_POP3),
        "u3@example.test",
        1,
        Duration::from_secs(60),
    );
    assert_eq!(got, vec!["while-stopped"]);
}

#[test]
fn postgresql_down_stops_neither_mail_nor_logins() {
    let mut cluster = Cluster::start(44);
    cluster.pg.stop_immediate();
    let stopped = Instant::now();
    for entry in 1..=3 {
        assert_eq!(
            send(
                &cluster.node(entry).addr(PORT_SMTP),
                &["u1@example.test", "u2@example.test", "u3@example.test"],
                &format!("pg-down-{entry}")
            ),
            250
        );
    }
    for i in 1..=3 {
        let user = format!("u{i}@example.test");
        let got = wait_for(
            &cluster.node(i % 3 + 1).addr(PORT_POP3),
            &user,
            3,
            Duration::from_secs(30),
        );
        assert_eq!(got, vec!["pg-down-1", "pg-down-2", "pg-down-3"], "{user}");
        let (_imap, answer) = imap_login(&cluster.node(i).addr(PORT_IMAP), &user);
        assert!(answer.contains(" OK"), "{answer}");
    }
    // A directory write fails, clearly.
    let out = cluster
        .node(1)
        .cli(&["user", "add", "late@example.test", "--password", PASSWORD]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().count() <= 2 && !stderr.contains("panicked"),
        "{stderr}"
    );
    // Away for longer than a lease (6 s): when it is back, every lease has lapsed by its
    // clock. For the 3 s after the restart, while the nodes reconnect and renew, every user
    // logs in through every node and mail to every user is handed over at once: no node is
    // down for another (or for itself) for a lease it could not renew.
    std::thread::sleep(
        (stopped + Duration::from_secs(8)).saturating_duration_since(Instant::now()),
    );
    cluster.pg.start().unwrap();
    let restarted = Instant::now();
    let mut logins = 0;
    let mut round = 0;
    while restarted.elapsed() < Duration::from_secs(3) {
        for entry in 1..=3 {
            let user = format!("u{}@example.test", (entry + round) % 3 + 1);
            let (_imap, answer) = imap_login(&cluster.node(entry).addr(PORT_IMAP), &user);
            assert!(
                answer.contains(" OK"),
                "{user} at n{entry} {:?} after PostgreSQL's restart: {answer}",
                restarted.elapsed()
            );
            logins += 1;
        }
        if round % 10 == 0 {
            let entry = round / 10 % 3 + 1;
            let to = ["u1@example.test", "u2@example.test", "u3@example.test"];
            assert_eq!(
                send(
                    &cluster.node(entry).addr(PORT_SMTP),
                    &to,
                    &format!("pg-back-{round}")
                ),
                250
            );
        }
        round += 1;
    }
    eprintln!("{logins} logins in the 3 s after PostgreSQL's restart");
    std::thread::sleep(Duration::from_secs(1));
    for node in &cluster.nodes {
        let down: Vec<String> = ["is down", "event=node_down"]
            .iter()
            .flat_map(|needle| node.log_lines(needle))
            .collect();
        assert!(down.is_empty(), "{}: {down:#?}", node.name);
    }
    cluster.node(1).must(&[
        "user",
        "add",
        "new@example.test",
        "--node",
        "n2",
        "--password",
        PASSWORD,
    ]);
    let added = Instant::now();
    let mut reached = Vec::new();
    for entry in 1..=3 {
        loop {
            let stream = TcpStream::connect(cluster.node(entry).addr(PORT_SMTP)).unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            smtp_reply(&mut reader).unwrap();
            writer
                .write_all(b"EHLO x\r\nMAIL FROM:<a@example.org>\r\nRCPT TO:<new@example.test>\r\n")
                .unwrap();
            smtp_reply(&mut reader).unwrap();
            smtp_reply(&mut reader).unwrap();
            let code = smtp_reply(&mut reader).unwrap();
            let _ = writer.write_all(b"QUIT\r\n");
            if code == 250 {
                reached.push(added.elapsed());
                break;
            }
            assert!(
                added.elapsed() < Duration::from_secs(5),
                "n{entry} never saw the new user"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!("directory change reached the nodes after {reached:?}");
    assert!(
        reached.iter().all(|t| *t < Duration::from_secs(2)),
        "{reached:?}"
    );
}

/// `UIDVALIDITY` and every message's `(UID, FLAGS)` of `folder`, through IMAP at `address`.
/// A folder as a CONDSTORE client sees it: UIDVALIDITY, HIGHESTMODSEQ, and per message
/// `"<uid> MODSEQ <modseq> <sorted flags>"`.
fn folder_state(address: &str, user: &str, folder: &str) -> (String, String, Vec<String>) {
    let (mut imap, answer) = imap_login(address, user);
    assert!(answer.contains(" OK"), "{answer}");
    let select = imap.run(&format!("SELECT {folder} (CONDSTORE)"));
    let code = |name: &str| {
        select
            .iter()
            .find_map(|l| l.split(&format!("[{name} ")).nth(1))
            .and_then(|rest| rest.split(']').next())
            .unwrap_or_else(|| panic!("no {name}: {select:?}"))
            .to_string()
    };
    let (uidvalidity, highest_modseq) = (code("UIDVALIDITY"), code("HIGHESTMODSEQ"));
    let mut messages: Vec<String> = imap
        .run("UID FETCH 1:* (UID FLAGS MODSEQ)")
        .into_iter()
        .filter(|l| l.starts_with("* "))
        .map(|l| {
            // "* 3 FETCH (UID 7 FLAGS (\Seen))" -> "UID 7 FLAGS (\Seen)", flags sorted.
            let inner = l.split_once("FETCH (").unwrap().1.trim_end_matches(')');
            let uid = inner
                .split("UID ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            let flags = inner
                .split("FLAGS (")
                .nth(1)
                .unwrap_or("")
                .split(')')
                .next()
                .unwrap();
            let mut flags: Vec<&str> = flags
                .split(' ')
                .filter(|f| !f.is_empty() && *f != "\\Recent")
                .collect();
            flags.sort();
            let modseq = inner
                .split("MODSEQ (")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .unwrap_or_else(|| panic!("no MODSEQ in {l}"));
            format!("{uid} MODSEQ {modseq} {}", flags.join(" "))
        })
        .collect();
    messages.sort();
    imap.run("LOGOUT");
    (uidvalidity, highest_modseq, messages)
}

#[test]
fn a_user_moved_under_load_keeps_its_uids_and_flags() {
    let cluster = Cluster::start(45);
    let user = "u1@example.test";
    for i in 0..6 {
        assert_eq!(
            send(
                &cluster.node(2).addr(PORT_SMTP),
                &[user],
                &format!("before-{i}")
            ),
            250
        );
    }
    assert_eq!(
        wait_for(
            &cluster.node(1).addr(PORT_POP3),
            user,
            6,
            Duration::from_secs(30)
        )
        .len(),
        6
    );
    // Flags, a keyword, an expunged message (a gap in the UIDs) and a second folder.
    let (mut imap, _) = imap_login(&cluster.node(1).addr(PORT_IMAP), user);
    imap.run("SELECT INBOX");
    assert!(
        imap.run("STORE 1 +FLAGS (\\Seen)")
            .last()
            .unwrap()
            .contains("OK")
    );
    assert!(
        imap.run("STORE 2 +FLAGS (\\Flagged $Label1)")
            .last()
            .unwrap()
            .contains("OK")
    );
    assert!(
        imap.run("STORE 3 +FLAGS (\\Deleted)")
            .last()
            .unwrap()
            .contains("OK")
    );
    assert!(imap.run("EXPUNGE").last().unwrap().contains("OK"));
    let created = imap.run("CREATE Saved");
    assert!(created.last().unwrap().contains("OK"), "{created:?}");
    assert!(
        imap.run("UID COPY 1:2 Saved")
            .last()
            .unwrap()
            .contains("OK")
    );
    imap.run("LOGOUT");
    let inbox_before = folder_state(&cluster.node(1).addr(PORT_IMAP), user, "INBOX");
    let kept_before = pop3_subjects(&cluster.node(1).addr(PORT_POP3), user).unwrap();
    assert_eq!(kept_before.len(), 5);
    let archive_before = folder_state(&cluster.node(1).addr(PORT_IMAP), user, "Saved");
    assert_eq!(inbox_before.2.len(), 5);

    // Sessions open through the move: one on the owner, one proxied through n3. The freeze
    // ends both, and each is told the mailbox is moving (not that the account is gone).
    let mut sessions: Vec<(&str, Imap)> = [("n1", 1), ("n3 (proxied)", 3)]
        .into_iter()
        .map(|(name, entry)| {
            let (mut imap, answer) = imap_login(&cluster.node(entry).addr(PORT_IMAP), user);
            assert!(answer.contains(" OK"), "{answer}");
            imap.run("SELECT INBOX");
            (name, imap)
        })
        .collect();

    // Mail keeps coming through the other nodes while the mailbox moves from n1 to n2.
    static MOVED: [&str; 1] = ["u1@example.test"];
    let stop = Arc::new(AtomicBool::new(false));
    let sender = load(&cluster, &[2, 3], &MOVED, stop.clone());
    std::thread::sleep(Duration::from_secs(1));
    let out = cluster
        .node(3)
        .must(&["user", "move", user, "--to", "n2", "--wait", "120"]);
    eprintln!("user move: {out}");
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    assert!(
        sent.iter().all(|(_, _, code)| *code == 250),
        "a refusal under load"
    );
    assert!(
        cluster
            .node(1)
            .must(&["user", "list"])
            .lines()
            .any(|l| l.starts_with(user) && l.ends_with(" node=n2"))
    );
    for (name, imap) in &mut sessions {
        let bye = loop {
            let line = imap.line();
            assert!(!line.is_empty(), "{name}: closed without BYE");
            if line.starts_with("* BYE") {
                break line;
            }
        };
        assert_eq!(
            bye, "* BYE [UNAVAILABLE] Mailbox moving, reconnect",
            "{name}"
        );
    }

    // Every message once, on the new owner, read through a third node.
    // Sequence number 3 is whichever message arrived third: the survivors, as POP3 saw them.
    let mut want = kept_before.clone();
    want.extend(sent.iter().map(|(_, s, _)| s.clone()));
    want.sort();
    let got = wait_for(
        &cluster.node(3).addr(PORT_POP3),
        user,
        want.len(),
        Duration::from_secs(60),
    );
    assert_eq!(got, want, "every message exactly once after the move");
    // The same UIDVALIDITY, UIDs, MODSEQs and flags for an IMAP client; HIGHESTMODSEQ too
    // where no mail arrived.
    let inbox_after = folder_state(&cluster.node(3).addr(PORT_IMAP), user, "INBOX");
    assert_eq!(inbox_after.0, inbox_before.0, "INBOX UIDVALIDITY");
    for message in &inbox_before.2 {
        assert!(
            inbox_after.2.contains(message),
            "{message} not in {:?}",
            inbox_after.2
        );
    }
    assert!(
        inbox_after.1.parse::<u64>().unwrap() >= inbox_before.1.parse::<u64>().unwrap(),
        "INBOX HIGHESTMODSEQ went back: {} then {}",
        inbox_before.1,
        inbox_after.1
    );
    assert_eq!(
        folder_state(&cluster.node(3).addr(PORT_IMAP), user, "Saved"),
        archive_before
    );
    // The old copy is gone from n1.
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster
        .node(1)
        .log_lines("event=user_moved_away")
        .is_empty()
    {
        assert!(Instant::now() < deadline, "n1 kept its copy");
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = &cluster.pg;
}

/// Users' rules run on the owner node, whichever node took the mail: a copy handed over
/// is filed by the owner's deposit; the script is the directory's, set from any node.
#[test]
fn the_owner_runs_its_users_rules_on_mail_any_node_takes() {
    let cluster = Cluster::start(48);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("rules.sieve");
    std::fs::write(
        &script,
        "require [\"fileinto\", \"mailbox\"];\n\
         if header :contains \"subject\" \"rule-me\" { fileinto :create \"Filed\"; }\n",
    )
    .unwrap();
    cluster.node(3).must(&[
        "sieve",
        "put",
        "u2@example.test",
        "rules",
        script.to_str().unwrap(),
        "--activate",
    ]);
    for entry in [1, 3] {
        assert_eq!(
            send(
                &cluster.node(entry).addr(PORT_SMTP),
                &["u2@example.test"],
                &format!("rule-me from n{entry}")
            ),
            250
        );
    }
    assert_eq!(
        send(
            &cluster.node(1).addr(PORT_SMTP),
            &["u2@example.test"],
            "plain"
        ),
        250
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (mut imap, answer) = imap_login(&cluster.node(2).addr(PORT_IMAP), "u2@example.test");
        assert!(answer.contains("OK"), "{answer}");
        let filed = imap.run("SELECT Filed");
        imap.run("LOGOUT");
        if filed.iter().any(|l| l == "* 2 EXISTS") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not filed on the owner: {filed:?}\n{:#?}",
            cluster.node(2).log_lines("event=")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        wait_for(
            &cluster.node(2).addr(PORT_POP3),
            "u2@example.test",
            1,
            Duration::from_secs(30)
        ),
        vec!["plain"],
        "INBOX keeps the rest"
    );
    // The mail log reaches us through the node's stderr, written in batches: wait for it.
    let filed_lines = || -> Vec<String> {
        cluster
            .node(2)
            .log_lines("event=sieve")
            .into_iter()
            .filter(|l| l.contains("action=fileinto") && l.contains("folder=Filed"))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while filed_lines().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let filed = filed_lines();
    assert_eq!(filed.len(), 2, "{filed:?}");
    assert!(
        filed.iter().all(|l| l.contains("origin=")),
        "handed over: {filed:?}"
    );
    for other in [1, 3] {
        assert!(
            cluster.node(other).log_lines("event=sieve").is_empty(),
            "n{other} ran no rule"
        );
    }
}
