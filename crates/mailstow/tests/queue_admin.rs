//! `mailstow queue list|show|retry|remove`: offline on a queue made here, and through the
//! admin socket of a running `mailstow serve`.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Server, mailstow, must, setup};
use queue::{Envelope, Outcome, Queue, QueueConfig, Recipient, RecipientStatus};

fn envelope(sender: &str, to: &[&str]) -> Envelope {
    Envelope {
        sender: sender.into(),
        recipients: to
            .iter()
            .map(|a| Recipient {
                address: a.to_string(),
                status: RecipientStatus::Pending,
                last_error: None,
            })
            .collect(),
        arrival_ms: 1_700_000_000_000,
    }
}

const D_CONTENT: &[u8] = b"Subject: deferred one\r\n\r\nbody d\r\n";
const B_CONTENT: &[u8] = b"Subject: bounced\r\n\r\nbody b\r\n";
const P_CONTENT: &[u8] = b"Subject: pending\r\n\r\nbody p\r\n";

/// A pending, a deferred and a bounced message in `<data>/queue`; returns their ids.
fn make_queue(data: &Path) -> (u64, u64, u64) {
    let dir = data.join("queue");
    std::fs::create_dir_all(&dir).unwrap();
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    let (q, _) = Queue::open(disk, &dir, QueueConfig::default()).unwrap();
    let d = q
        .enqueue(
            envelope("a@example.org", &["x@example.net", "y@example.net"]),
            D_CONTENT.to_vec(),
        )
        .unwrap();
    let b = q
        .enqueue(envelope("", &["z@example.net"]), B_CONTENT.to_vec())
        .unwrap();
    let batch = q.next_batch(0, 10, usize::MAX).unwrap();
    assert_eq!(batch.len(), 2);
    let later = Outcome::Deferred {
        retry_at_ms: u64::MAX / 2,
        reason: "451 4.4.0 try later".into(),
    };
    q.finish(d, &[(0, Outcome::Delivered), (1, later)]).unwrap();
    q.finish(
        b,
        &[(
            0,
            Outcome::Failed {
                reason: "550 5.1.1 no such user".into(),
            },
        )],
    )
    .unwrap();
    let p = q
        .enqueue(
            envelope("c@example.org", &["w@example.net"]),
            P_CONTENT.to_vec(),
        )
        .unwrap();
    q.close().unwrap();
    (p, d, b)
}

fn fails(output: std::process::Output) -> String {
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one error line: {stderr}");
    stderr
}

#[test]
fn offline_list_show_retry_remove() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (p, d, b) = make_queue(&data);
    // A socket file left by a killed server: nobody accepts, so the CLI opens the queue.
    drop(std::os::unix::net::UnixListener::bind(data.join("admin.sock")).unwrap());

    let list = must(mailstow(&data, &["queue", "list"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 4, "{list}");
    assert_eq!(
        lines[0],
        format!(
            "{d} deferred 2023-11-14T22:13:20Z {} 1 from=a@example.org \
             to=x@example.net:delivered,y@example.net:pending",
            D_CONTENT.len()
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "{b} bounce 2023-11-14T22:13:20Z {} 1 from=<> to=z@example.net:failed",
            B_CONTENT.len()
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "{p} pending 2023-11-14T22:13:20Z {} 0 from=c@example.org to=w@example.net:pending",
            P_CONTENT.len()
        )
    );
    assert_eq!(lines[3], "3 messages");

    let show = must(mailstow(&data, &["queue", "show", &d.to_string()]));
    let (head, content) = show.split_once("\n\n").expect("blank line");
    assert!(
        head.starts_with(&format!("id: {d}\nclass: deferred\n")),
        "{head}"
    );
    assert!(head.contains("\nto: y@example.net pending\n"), "{head}");
    assert!(
        head.contains("\nlast-error: y@example.net 451 4.4.0 try later"),
        "{head}"
    );
    assert_eq!(content, "Subject: deferred one\r\n\r\nbody d\r\n");

    assert_eq!(
        must(mailstow(&data, &["queue", "retry", &d.to_string()])),
        format!("retried {d}\n")
    );
    assert!(fails(mailstow(&data, &["queue", "retry", &b.to_string()])).contains("bounce"));
    assert_eq!(
        must(mailstow(&data, &["queue", "remove", &d.to_string()])),
        format!("removed {d}\n")
    );
    assert!(
        fails(mailstow(&data, &["queue", "remove", &d.to_string()]))
            .contains("is not in the queue")
    );
    fails(mailstow(&data, &["queue", "show", "999999"]));
    let list = must(mailstow(&data, &["queue", "list"]));
    assert!(
        list.lines().all(|l| !l.starts_with(&format!("{d} "))),
        "{list}"
    );
    assert!(list.ends_with("\n2 messages\n"), "{list}");
}

/// Submits one message from alice to a remote address (it stays deferred: no outbound SMTP).
fn submit_remote(server: &Server, subject: &str) {
    let (host, port) = server
        .addr("submission")
        .rsplit_once(':')
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .unwrap();
    let script = format!(
        "import smtplib\n\
         s = smtplib.SMTP('{host}', {port}, timeout=10)\n\
         s.ehlo('laptop')\n\
         s.login('alice@example.test', 'secret-pw')\n\
         s.sendmail('alice@example.test', ['friend@elsewhere.test'], \
         'From: alice@example.test\\r\\nTo: friend@elsewhere.test\\r\\nSubject: {subject}\\r\\n\\r\\nhello\\r\\n')\n\
         s.quit()\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
}

/// Polls `queue list` until `ok` holds for its output.
fn wait_list(data: &Path, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = must(mailstow(data, &["queue", "list"]));
        if ok(&list) {
            return list;
        }
        assert!(Instant::now() < deadline, "{what}; last list:\n{list}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn online_through_the_admin_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    setup(&data);
    let config = tmp.path().join("mailstow.toml");
    std::fs::write(&config, "[server]\nauth_without_tls = true\n").unwrap();
    let server = Server::start_with(&data, Some(&config));
    let socket = data.join("admin.sock");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    submit_remote(&server, "to-remote");
    // The first attempt defers it (no outbound route); the running server answers `list`.
    let list = wait_list(&data, "never deferred", |l| {
        l.contains(" deferred ") && l.contains(" 1 from=alice@example.test")
    });
    let id: u64 = list.split_whitespace().next().unwrap().parse().unwrap();
    assert!(list.contains("to=friend@elsewhere.test:pending"), "{list}");
    assert!(list.ends_with("\n1 messages\n"), "{list}");

    let show = must(mailstow(&data, &["queue", "show", &id.to_string()]));
    assert!(show.contains("no outbound route"), "{show}");
    assert!(show.contains("Subject: to-remote\r\n"), "{show}");

    // Retry makes the server try again at once (its backoff is a minute).
    assert_eq!(
        must(mailstow(&data, &["queue", "retry", &id.to_string()])),
        format!("retried {id}\n")
    );
    wait_list(&data, "retry did not lead to a second attempt", |l| {
        l.contains(&format!("{id} deferred ")) && l.contains(" 2 from=alice@example.test")
    });

    // Remove (a delivery agent may hold it for a moment: then the command says so).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = mailstow(&data, &["queue", "remove", &id.to_string()]);
        if out.status.success() {
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                format!("removed {id}\n")
            );
            break;
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("being delivered"), "{stderr}");
        assert!(Instant::now() < deadline, "always leased");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(must(mailstow(&data, &["queue", "list"])), "0 messages\n");
    assert!(
        fails(mailstow(&data, &["queue", "show", &id.to_string()])).contains("not in the queue")
    );

    server.stop_cleanly();
    assert!(!socket.exists(), "the socket is removed at shutdown");
    // The removal was durable: the queue opened offline agrees.
    assert_eq!(must(mailstow(&data, &["queue", "list"])), "0 messages\n");
}
