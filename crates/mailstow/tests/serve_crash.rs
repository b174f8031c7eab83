//! Guarantee 1 through the whole server: concurrent SMTP senders, the server killed with SIGKILL
//! at random moments and restarted; every message that got `250` after DATA ends up in the
//! mailbox, and duplicates are bounded by what was in flight.
//!
//! `SERVE_CRASH_ROUNDS` sets the number of kills (default 4).

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, set_up_data_dir, smtp_reply as reply};

const SENDERS: usize = 8;

/// Sends messages `crash-<n>` over one connection until an error; records each `n` whose DATA
/// got 250 in `acked`, and the one in flight at the failure in `in_flight`.
fn sender(
    address: SocketAddr,
    next: Arc<AtomicU64>,
    acked: Arc<Mutex<HashSet<u64>>>,
    in_flight: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
) {
    let Ok(stream) = TcpStream::connect(address) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let step = |writer: &mut TcpStream, reader: &mut BufReader<TcpStream>, line: &str| {
        writer.write_all(line.as_bytes())?;
        reply(reader)
    };
    if reply(&mut reader).ok() != Some(220) {
        return;
    }
    if step(&mut writer, &mut reader, "EHLO crash.test\r\n").ok() != Some(250) {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        let n = next.fetch_add(1, Ordering::Relaxed);
        in_flight.lock().unwrap().push(n);
        let result = (|| -> std::io::Result<bool> {
            if step(&mut writer, &mut reader, "MAIL FROM:<load@remote.test>\r\n")? != 250
                || step(&mut writer, &mut reader, "RCPT TO:<alice@example.test>\r\n")? != 250
                || step(&mut writer, &mut reader, "DATA\r\n")? != 354
            {
                return Ok(false);
            }
            let message = format!(
                "From: load@remote.test\r\nTo: alice@example.test\r\nSubject: crash-{n}\r\n\r\n{}\r\n.\r\n",
                "x".repeat(2000)
            );
            Ok(step(&mut writer, &mut reader, &message)? == 250)
        })();
        match result {
            Ok(true) => {
                acked.lock().unwrap().insert(n);
                in_flight.lock().unwrap().retain(|&m| m != n);
            }
            Ok(false) => {
                in_flight.lock().unwrap().retain(|&m| m != n);
                return;
            }
            // The connection died with n unanswered: it may or may not have been queued.
            Err(_) => return,
        }
    }
}

#[test]
fn every_acknowledged_message_survives_sigkill() {
    let rounds: u64 = std::env::var("SERVE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let (_dir, data) = set_up_data_dir();
    let next = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let in_flight = Arc::new(Mutex::new(Vec::new()));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..rounds {
        let server = Server::start(&data);
        let address = server.addresses["smtp"];
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..SENDERS)
            .map(|_| {
                let (next, acked, in_flight, stop) =
                    (next.clone(), acked.clone(), in_flight.clone(), stop.clone());
                std::thread::spawn(move || sender(address, next, acked, in_flight, stop))
            })
            .collect();
        // xorshift: a kill somewhere between 0.3 and 1.5 s into the load.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(300 + seed % 1200));
        server.kill();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
    }
    let acked: HashSet<u64> = acked.lock().unwrap().clone();
    let in_flight: Vec<u64> = in_flight.lock().unwrap().clone();
    assert!(
        acked.len() > 50,
        "the load hardly ran: {} acked",
        acked.len()
    );

    // Restart and wait until delivery has put every acknowledged message in the mailbox.
    let server = Server::start(&data);
    let deadline = Instant::now() + Duration::from_secs(120);
    let counts = loop {
        let subjects = server.subjects("alice@example.test", "secret-pw");
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for line in subjects.lines() {
            if let Some(n) = line.strip_prefix("crash-").and_then(|n| n.parse().ok()) {
                *counts.entry(n).or_default() += 1;
            }
        }
        if acked.iter().all(|n| counts.contains_key(n)) {
            break counts;
        }
        let missing = acked.iter().filter(|n| !counts.contains_key(n)).count();
        assert!(
            Instant::now() < deadline,
            "{missing} of {} acknowledged messages never arrived",
            acked.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // Nothing appears that was never sent, and duplicates (delivered, then the server died
    // before the queue recorded it) are bounded by a delivery batch per kill.
    let sent_max = next.load(Ordering::Relaxed);
    assert!(counts.keys().all(|&n| n < sent_max));
    let duplicates: usize = counts.values().map(|&c| c - 1).sum();
    assert!(
        duplicates <= 256 * rounds as usize,
        "{duplicates} duplicates after {rounds} kills"
    );
    let unacked_arrived = counts.keys().filter(|n| !acked.contains(n)).count();
    eprintln!(
        "{rounds} kills: {} sent, {} acknowledged, all arrived; {duplicates} duplicates, \
         {unacked_arrived} unacknowledged arrived ({} were in flight)",
        sent_max,
        acked.len(),
        in_flight.len()
    );
    assert!(
        unacked_arrived <= in_flight.len(),
        "{unacked_arrived} unacknowledged messages arrived, only {} were in flight",
        in_flight.len()
    );
    server.stop_cleanly();
}
