//! The real-file crash test: a child process (`crashload`) enqueues, delivers, appends and
//! expunges under load on a real data directory and is killed with SIGKILL at a random
//! moment, many times over the same directory. After each kill the parent reopens the queue
//! and the store and checks every promise the child printed: each acknowledged enqueue is
//! pending unless its finish may have happened, each acknowledged append is readable with
//! the exact bytes unless its expunge may have happened, acknowledged finishes and expunges
//! stay done, anything else present is whole, and both fscks are clean.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench::crashload::{content, queue_config, store_config};
use store::Mailstore as _;

#[derive(Default)]
struct Promises {
    enqueued: BTreeMap<u64, (u64, u64)>,
    finishing: BTreeSet<u64>,
    finished: BTreeSet<u64>,
    appended: BTreeMap<(String, u32), (u64, u64)>,
    expunging: BTreeSet<(String, u32)>,
    expunged: BTreeSet<(String, u32)>,
}

impl Promises {
    fn absorb(&mut self, line: &str) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f[i].parse::<u64>().expect("number");
        match f.first().copied() {
            Some("Q") => {
                self.enqueued.insert(num(1), (num(2), num(3)));
            }
            Some("f") => {
                self.finishing.insert(num(1));
            }
            Some("F") => {
                self.finished.insert(num(1));
            }
            Some("S") => {
                self.appended
                    .insert((f[1].to_string(), num(2) as u32), (num(3), num(4)));
            }
            Some("d") => {
                self.expunging.insert((f[1].to_string(), num(2) as u32));
            }
            Some("D") => {
                self.expunged.insert((f[1].to_string(), num(2) as u32));
            }
            _ => {}
        }
    }
}

/// (thread, serial) from a message's `Subject: K thread serial` line.
fn origin(kind: char, message: &[u8]) -> Option<(u64, u64)> {
    let text = String::from_utf8_lossy(&message[..message.len().min(400)]).into_owned();
    let line = text.lines().find(|l| l.starts_with("Subject: "))?;
    let mut parts = line["Subject: ".len()..].split(' ');
    if parts.next()? != kind.to_string() {
        return None;
    }
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn verify(dir: &Path, promises: &Promises, round: u64) {
    let disk: Arc<dyn disk::Disk> = Arc::new(disk::RealDisk);
    let report = queue::check(disk.clone(), &dir.join("queue"), false, &mut |_, _| {}).unwrap();
    assert!(report.is_clean(), "round {round}: queue fsck: {report}");

    let (q, _) = queue::Queue::open(disk.clone(), &dir.join("queue"), queue_config()).unwrap();
    let mut present = BTreeMap::new();
    loop {
        let batch = q.next_batch(u64::MAX, 4096, 1 << 30).unwrap();
        if batch.is_empty() {
            break;
        }
        for message in batch {
            let from = origin('Q', &message.content).expect("a whole queued message");
            assert_eq!(
                message.content,
                content('Q', from.0, from.1),
                "round {round}: torn content"
            );
            present.insert(message.id, from);
        }
    }
    for (id, from) in &promises.enqueued {
        if promises.finished.contains(id) {
            assert!(
                !present.contains_key(id),
                "round {round}: finished message {id} came back"
            );
        } else if !promises.finishing.contains(id) {
            assert_eq!(
                present.get(id),
                Some(from),
                "round {round}: acknowledged message {id} lost"
            );
        }
    }
    q.close().unwrap();

    let (store, _) = store::Store::open(disk.clone(), &dir.join("store"), store_config()).unwrap();
    let fsck = store.fsck(false, &mut |_, _| {}).unwrap();
    assert!(fsck.is_clean(), "round {round}: store fsck: {fsck}");
    for ((user, uid), (thread, serial)) in &promises.appended {
        let key = (user.clone(), *uid);
        let read = store.read(user, "INBOX", *uid);
        if promises.expunged.contains(&key) {
            assert!(
                read.is_err(),
                "round {round}: expunged {user}/{uid} came back"
            );
        } else if !promises.expunging.contains(&key) {
            let bytes = read.unwrap_or_else(|e| panic!("round {round}: {user}/{uid} lost: {e}"));
            assert_eq!(
                bytes,
                content('S', *thread, *serial),
                "round {round}: {user}/{uid} differs"
            );
        }
    }
    for user in store.list_users() {
        let view = store.open_folder(&user, "INBOX").unwrap();
        for info in view.messages {
            let bytes = store.read(&user, "INBOX", info.uid).unwrap();
            let from = origin('S', &bytes).expect("a whole stored message");
            assert_eq!(
                bytes,
                content('S', from.0, from.1),
                "round {round}: torn stored message"
            );
        }
    }
}

#[test]
fn sigkill_under_load_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let rounds: u64 = std::env::var("CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut promises = Promises::default();
    for round in 0..rounds {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crashload"))
            .arg(dir.path())
            .arg(round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            let first = lines.next();
            let _ = started_tx.send(first.clone());
            first.into_iter().chain(lines).collect::<Vec<String>>()
        });
        // The load starts after the child's recovery of the earlier rounds, which a loaded
        // machine can make take longer than the kill delay: the delay counts from READY.
        let first = started_rx.recv_timeout(Duration::from_secs(120));
        if first != Ok(Some("READY".to_string())) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("round {round}: child did not start: {first:?}");
        }
        // Kill at a pseudo-random moment 30..330 ms into the load.
        let delay = 30 + (round * 7919 + 13) % 300;
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        let acks = lines.len() - 1;
        for line in &lines {
            promises.absorb(line);
        }
        eprintln!(
            "round {round}: killed after {:?}, {acks} acknowledgements",
            start.elapsed()
        );
        verify(dir.path(), &promises, round);
    }
    assert!(
        !promises.enqueued.is_empty() && !promises.appended.is_empty(),
        "no load ran"
    );
}
