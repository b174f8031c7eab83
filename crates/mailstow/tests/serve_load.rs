//! Load: 1,000 connections held open while 32 senders deliver for a while; every message gets
//! its 250, every idle connection is still served, and the server's memory stays bounded.
//!
//! `SERVE_LOAD_SECONDS` sets how long the senders run (default 60).

mod common;

use std::io::{BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Server, set_up_data_dir, smtp_reply as reply};

const IDLE_CONNECTIONS: usize = 1000;
const SENDERS: usize = 32;
/// Resident memory the server may use under this load.
const SERVER_RSS_MAX_KIB: u64 = 512 * 1024;

fn connect(address: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_thousand_idle_connections_and_32_senders() {
    let seconds: u64 = std::env::var("SERVE_LOAD_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    // This process holds a thousand sockets too: lift its soft limit like the server does.
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(hard) = limit.maximum {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            },
        );
    }
    let (dir, data) = set_up_data_dir();
    // Every connection comes from 127.0.0.1: raise the per-address limit above the load.
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        "[server]\nconnections_per_ip_max = 2000\nconnections_max = 4096\n",
    )
    .unwrap();
    let server = Server::start_with(&data, Some(&config));
    let address = server.addresses["smtp"];
    let pid = server.child.id();

    let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
    for _ in 0..IDLE_CONNECTIONS {
        let (stream, mut reader) = connect(address);
        assert_eq!(reply(&mut reader).unwrap(), 220, "greeting");
        idle.push((stream, reader));
    }
    let rss_idle = rss_kib(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let senders: Vec<_> = (0..SENDERS)
        .map(|n| {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let (mut stream, mut reader) = connect(address);
                assert_eq!(reply(&mut reader).unwrap(), 220);
                let mut step = |line: &str| {
                    stream.write_all(line.as_bytes()).unwrap();
                    reply(&mut reader).unwrap()
                };
                assert_eq!(step("EHLO load.test\r\n"), 250);
                let body = "y".repeat(8000);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    assert_eq!(step("MAIL FROM:<load@remote.test>\r\n"), 250);
                    let rcpt = if i.is_multiple_of(2) { "alice" } else { "bob" };
                    assert_eq!(step(&format!("RCPT TO:<{rcpt}@example.test>\r\n")), 250);
                    assert_eq!(step("DATA\r\n"), 354);
                    let message = format!("Subject: load {n}-{i}\r\n\r\n{body}\r\n.\r\n");
                    assert_eq!(step(&message), 250, "message {n}-{i} not accepted");
                    sent.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
                assert_eq!(step("QUIT\r\n"), 221);
            })
        })
        .collect();
    let start = Instant::now();
    let mut rss_peak = rss_idle;
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(500));
        rss_peak = rss_peak.max(rss_kib(pid));
    }
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().expect("a sender failed");
    }
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent > 1000, "only {sent} messages in {seconds} s");

    // Every idle connection is still served.
    for (stream, reader) in idle.iter_mut() {
        stream.write_all(b"NOOP\r\n").unwrap();
        assert_eq!(
            reply(reader).unwrap(),
            250,
            "an idle connection was dropped"
        );
    }
    eprintln!(
        "{sent} messages from {SENDERS} senders in {seconds} s beside {IDLE_CONNECTIONS} idle \
         connections; server RSS {rss_idle} KiB idle, {rss_peak} KiB peak"
    );
    assert!(
        rss_peak < SERVER_RSS_MAX_KIB,
        "server RSS {rss_peak} KiB over {SERVER_RSS_MAX_KIB} KiB"
    );
    drop(idle);
    server.stop_cleanly();
}
