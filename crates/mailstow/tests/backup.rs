//! `mailstow backup`, `backup verify` and `restore` (docs/operations.md, Backups), on the real
//! binary: a backup taken through a running server under SMTP load restores every message
//! acknowledged before it began, exactly once; later runs copy only what changed; verify
//! finds damage; restore refuses a data directory in use and a damaged backup.

mod common;

use std::collections::HashMap;
use std::io::{BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, mailstow, must, set_up_data_dir, smtp_reply as reply};

const SENDERS: usize = 4;

/// Sends `<tag>-<n>` messages to alice over one connection until `stop`; records each `n`
/// acknowledged with 250, in order.
fn sender(
    address: SocketAddr,
    tag: &str,
    next: &AtomicU64,
    acked: &Mutex<Vec<u64>>,
    stop: &AtomicBool,
) {
    let stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut step = |line: &str| {
        writer.write_all(line.as_bytes()).unwrap();
        reply(&mut reader).unwrap()
    };
    assert_eq!(step(""), 220);
    assert_eq!(step("EHLO load.test\r\n"), 250);
    while !stop.load(Ordering::Relaxed) {
        let n = next.fetch_add(1, Ordering::Relaxed);
        assert_eq!(step("MAIL FROM:<load@remote.test>\r\n"), 250);
        assert_eq!(step("RCPT TO:<alice@example.test>\r\n"), 250);
        assert_eq!(step("DATA\r\n"), 354);
        let message = format!(
            "From: load@remote.test\r\nTo: alice@example.test\r\nSubject: {tag}-{n}\r\n\r\n{}\r\n.\r\n",
            "x".repeat(1500)
        );
        assert_eq!(step(&message), 250, "message {n}");
        acked.lock().unwrap().push(n);
    }
}

/// Runs `mailstow` with a config file too.
fn mailstow_with(data: &Path, config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .expect("run mailstow")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Waits until the running server's queue holds no pending mail.
fn drained(data: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = must(mailstow(data, &["queue", "stats"]));
        if stats.contains("messages: 0 pending, 0 deferred") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the queue did not drain: {stats}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many times each `Subject: <tag>-<n>` is in alice's mail (the server stopped).
fn subjects(data: &Path, tag: &str) -> HashMap<u64, usize> {
    let out = data.with_extension("export");
    let _ = std::fs::remove_dir_all(&out);
    must(mailstow(
        data,
        &[
            "mailbox",
            "export",
            "alice@example.test",
            out.to_str().unwrap(),
            "--format",
            "mbox",
        ],
    ));
    let mut counts = HashMap::new();
    let prefix = format!("Subject: {tag}-");
    let mut files = vec![out.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            if let Some(n) = line
                .strip_prefix(&prefix)
                .and_then(|n| n.trim().parse().ok())
            {
                *counts.entry(n).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// A message with one recipient delivered and one deferred for a day, and a bounce, put in
/// the queue of a stopped server (as `queue_admin.rs` does).
fn waiting_mail(data: &Path) {
    let recipient = |address: &str| queue::Recipient {
        address: address.into(),
        status: queue::RecipientStatus::Pending,
        last_error: None,
    };
    let envelope = |sender: &str, to: &[&str]| queue::Envelope {
        sender: sender.into(),
        recipients: to.iter().map(|a| recipient(a)).collect(),
        arrival_ms: 1_700_000_000_000,
    };
    let disk: std::sync::Arc<dyn disk::Disk> = std::sync::Arc::new(disk::RealDisk);
    let (q, _) =
        queue::Queue::open(disk, &data.join("queue"), queue::QueueConfig::default()).unwrap();
    let d = q
        .enqueue(
            envelope("a@example.org", &["x@example.net", "y@example.net"]),
            b"Subject: deferred\r\n\r\nd\r\n".to_vec(),
        )
        .unwrap();
    let b = q
        .enqueue(
            envelope("", &["z@example.net"]),
            b"Subject: bounced\r\n\r\nb\r\n".to_vec(),
        )
        .unwrap();
    let batch = q.next_batch(0, 10, usize::MAX).unwrap();
    assert_eq!(batch.len(), 2);
    let later = queue::Outcome::Deferred {
        retry_at_ms: u64::MAX / 2,
        reason: "451 4.4.0 try later".into(),
    };
    q.finish(d, &[(0, queue::Outcome::Delivered), (1, later)])
        .unwrap();
    let failed = queue::Outcome::Failed {
        reason: "550 5.1.1 no such user".into(),
    };
    q.finish(b, &[(0, failed)]).unwrap();
    q.close().unwrap();
}

/// The number before `label` in a summary line ("14 objects written" → 14).
fn number_before(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no '{label}' in {text}"));
    text[..at]
        .trim_end()
        .rsplit([' ', '('])
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before '{label}' in {text}"))
}

#[test]
fn a_backup_under_smtp_load_restores_each_acknowledged_message_once() {
    let (dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    // The file the server runs with (the harness's, naming its name server).
    let config = data.with_extension("server.toml");
    let address = server.addresses["smtp"];
    let next = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..SENDERS)
        .map(|_| {
            let (next, acked, stop) = (next.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || sender(address, "load", &next, &acked, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let before: Vec<u64> = acked.lock().unwrap().clone();
    let dest = dir.path().join("backup");
    let started = Instant::now();
    let output = mailstow_with(&data, &config, &["backup", dest.to_str().unwrap()]);
    let took = started.elapsed();
    let summary = must(output.clone());
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().unwrap();
    }
    let all: Vec<u64> = acked.lock().unwrap().clone();
    assert!(
        before.len() > 20,
        "the load was too light: {}",
        before.len()
    );
    assert!(
        all.len() > before.len(),
        "no mail was accepted during the backup"
    );
    // Progress on stderr, the summary on stdout.
    let progress = stderr(&output);
    assert!(
        progress.contains("backup: capture point taken"),
        "{progress}"
    );
    assert!(progress.contains(" bytes, "), "{progress}");
    assert!(summary.starts_with("backup: run 1,"), "{summary}");
    eprintln!(
        "backup under load: {} acknowledged before, {} in all; {summary} (wall {:.3} s)",
        before.len(),
        all.len(),
        took.as_secs_f64()
    );
    server.stop_cleanly();
    assert!(
        must(mailstow(
            &data,
            &["backup", "verify", dest.to_str().unwrap()]
        ))
        .contains("whole")
    );

    // The drill: restore into an empty directory, check it, serve it, count.
    let restored = dir.path().join("restored");
    let output = mailstow(&restored, &["restore", dest.to_str().unwrap()]);
    let text = must(output.clone());
    assert!(text.starts_with("restore: "), "{text}");
    assert!(
        stderr(&output).contains("restore: restoring the queue"),
        "{}",
        stderr(&output)
    );
    assert!(must(mailstow(&restored, &["store", "fsck"])).contains("clean"));
    must(mailstow(&restored, &["queue", "fsck"]));
    assert!(must(mailstow(&restored, &["user", "list"])).contains("alice@example.test"));
    // The configuration came from outside the data directory: set aside for the operator.
    let set_aside = restored.join("restored/config-data.server.toml");
    assert_eq!(
        std::fs::read(&set_aside).unwrap(),
        std::fs::read(&config).unwrap()
    );
    let server = Server::start(&restored);
    drained(&restored);
    server.stop_cleanly();
    let counts = subjects(&restored, "load");
    let missing: Vec<&u64> = before.iter().filter(|n| !counts.contains_key(n)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged before the backup, not restored: {missing:?}"
    );
    let twice: Vec<(&u64, &usize)> = counts.iter().filter(|(_, c)| **c > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
}

#[test]
fn later_runs_copy_only_new_mail_verify_finds_damage_and_restore_refuses() {
    let (dir, data) = set_up_data_dir();
    let dest = dir.path().join("backup");
    let send = |count: u64, first: u64| {
        let server = Server::start(&data);
        let next = AtomicU64::new(first);
        let acked = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let address = server.addresses["smtp"];
        std::thread::scope(|s| {
            s.spawn(|| sender(address, "mail", &next, &acked, &stop));
            while (acked.lock().unwrap().len() as u64) < count {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        });
        drained(&data);
        server.stop_cleanly();
        acked.into_inner().unwrap().len() as u64
    };
    let first_count = send(40, 0);
    // Stopped server: the CLI does the work itself.
    let first = must(mailstow(&data, &["backup", dest.to_str().unwrap()]));
    assert_eq!(number_before(&first, "new)"), first_count, "{first}");
    let later_count = send(3, 1000);
    // Mail the queue still holds: one recipient delivered and one deferred, and a bounce.
    waiting_mail(&data);
    let output = mailstow(&data, &["backup", dest.to_str().unwrap()]);
    let later = must(output.clone());
    assert!(
        stderr(&output).contains("backup: "),
        "progress lines on stderr"
    );
    assert!(later.contains("run 2,"), "{later}");
    assert_eq!(number_before(&later, "new)"), later_count, "{later}");
    let first_bytes = number_before(&first, "bytes), ");
    let later_bytes = number_before(&later, "bytes), ");
    // A pack of three messages and INBOX's state (the directory copy changes with logins).
    assert!(
        later_bytes < first_bytes / 2,
        "an incremental run wrote {later_bytes} bytes, the first {first_bytes}: {later}"
    );
    assert!(number_before(&later, "reused") >= 1, "{later}");
    let verified = must(mailstow(
        &data,
        &["backup", "verify", dest.to_str().unwrap()],
    ));
    assert!(verified.contains("whole"), "{verified}");
    // Every message is in the restored store, once.
    let restored = dir.path().join("restored");
    let output = mailstow(&restored, &["restore", dest.to_str().unwrap()]);
    assert!(
        stderr(&output).contains("was a bounce waiting"),
        "{}",
        stderr(&output)
    );
    must(output);
    let counts = subjects(&restored, "mail");
    assert_eq!(counts.len() as u64, first_count + later_count);
    assert!(counts.values().all(|&c| c == 1));
    // The queue's mail, each recipient as it was.
    let queued = must(mailstow(&restored, &["queue", "list"]));
    assert!(queued.ends_with("2 messages\n"), "{queued}");
    assert!(
        queued.contains("x@example.net:delivered,y@example.net:pending"),
        "{queued}"
    );
    // A bounce cannot be enqueued again as one: its recipient is tried once more.
    assert!(queued.contains("z@example.net:pending"), "{queued}");
    // A data directory that is not empty is refused, and says why.
    let refused = mailstow(&restored, &["restore", dest.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("restore needs an empty data directory"),
        "{}",
        stderr(&refused)
    );

    // Damage: one object with a flipped byte, another cut short.
    let mut objects: Vec<(u64, PathBuf)> = Vec::new();
    for sub in std::fs::read_dir(dest.join("objects")).unwrap() {
        for file in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            objects.push((std::fs::metadata(&path).unwrap().len(), path));
        }
    }
    objects.sort();
    let (_, largest) = objects.last().unwrap().clone();
    let mut bytes = std::fs::read(&largest).unwrap();
    bytes[100] ^= 0x20;
    std::fs::write(&largest, &bytes).unwrap();
    let output = mailstow(&data, &["backup", "verify", dest.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("damaged"), "{}", stderr(&output));
    let (_, second) = objects[objects.len() - 2].clone();
    let bytes = std::fs::read(&second).unwrap();
    std::fs::write(&second, &bytes[..bytes.len() / 2]).unwrap();
    let output = mailstow(&data, &["backup", "verify", dest.to_str().unwrap()]);
    assert!(stderr(&output).contains("cut short"), "{}", stderr(&output));
    // Nothing is restored from a damaged backup.
    let nowhere = dir.path().join("nowhere");
    let output = mailstow(&nowhere, &["restore", dest.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("nothing was restored"),
        "{}",
        stderr(&output)
    );
    assert!(!nowhere.exists());
}

/// The ACME account, certificate, key and state (docs/certificates.md) go into a backup and
/// come back to `<data_dir>/acme` on restore, byte for byte, so a restored server serves the
/// certificate and renews with the same account.
#[test]
fn a_backup_keeps_the_acme_account_and_certificate() {
    let (dir, data) = set_up_data_dir();
    must(mailstow(&data, &["init"]));
    let acme = data.join("acme");
    std::fs::create_dir_all(&acme).unwrap();
    let files = [
        ("account.json", "{\"account\": 1}\n"),
        (
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n",
        ),
        (
            "cert.pem",
            "-----BEGIN CERTIFICATE-----\ncert\n-----END CERTIFICATE-----\n",
        ),
        ("state.json", "{\"consecutive_failures\": 0}\n"),
    ];
    for (name, text) in files {
        std::fs::write(acme.join(name), text).unwrap();
    }
    let dest = dir.path().join("backup");
    must(mailstow(&data, &["backup", dest.to_str().unwrap()]));
    let restored = dir.path().join("restored");
    must(mailstow(&restored, &["restore", dest.to_str().unwrap()]));
    for (name, text) in files {
        let back = std::fs::read_to_string(restored.join("acme").join(name))
            .unwrap_or_else(|e| panic!("acme/{name} not restored: {e}"));
        assert_eq!(back, text, "acme/{name}");
    }
}
