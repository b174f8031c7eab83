//! A full disk is an ordinary, self-healing condition (issue 36 item 1), on a real, small file
//! system (tmpfs, mounted by the test as root): below `disk_reserve_bytes` SMTP answers 452
//! 4.3.1 at MAIL, before any data is sent, `/healthz` answers 503 naming the reason, and
//! both end by themselves within seconds of space coming back; no message answered 250 is
//! lost.

mod common;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A tmpfs of `bytes`, unmounted (lazily) when dropped.
struct SmallDisk {
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

impl SmallDisk {
    fn mount(bytes: u64) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("small");
        std::fs::create_dir(&mount).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .arg("tmpfs")
            .arg(&mount)
            .status()
            .expect("mount");
        assert!(status.success(), "mounting a tmpfs needs root");
        SmallDisk { _dir: dir, mount }
    }

    fn available(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.mount)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

struct Smtp {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Smtp {
    fn connect(address: &str) -> Smtp {
        let stream = TcpStream::connect(address).unwrap();
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

    fn send(&mut self, line: &str) -> u16 {
        self.writer
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        smtp_reply(&mut self.reader).unwrap()
    }

    /// One message to alice of about `size` bytes: `Ok` on 250, else which step refused it
    /// and its code.
    fn mail(&mut self, tag: usize, size: usize) -> Result<(), (&'static str, u16)> {
        match self.send("MAIL FROM:<sender@elsewhere.test>") {
            250 => {}
            code => return Err(("MAIL", code)),
        }
        match self.send("RCPT TO:<alice@example.test>") {
            250 => {}
            code => {
                self.send("RSET");
                return Err(("RCPT", code));
            }
        }
        assert_eq!(self.send("DATA"), 354);
        let line = "x".repeat(76);
        let mut body = format!("Subject: filler {tag}\r\n\r\n");
        while body.len() < size {
            body.push_str(&line);
            body.push_str("\r\n");
        }
        body.push_str(".\r\n");
        self.writer.write_all(body.as_bytes()).unwrap();
        match smtp_reply(&mut self.reader).unwrap() {
            250 => Ok(()),
            code => Err(("DATA", code)),
        }
    }
}

fn healthz(metrics: std::net::SocketAddr) -> String {
    let out = Command::new("curl")
        .args(["-s", "-w", " %{http_code}"])
        .arg(format!("http://{metrics}/healthz"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).replace('\n', " ")
}

fn inbox_count(server: &Server) -> usize {
    server
        .subjects("alice@example.test", "secret-pw")
        .lines()
        .count()
}

fn start(disk: &SmallDisk, reserve: u64) -> (Server, PathBuf) {
    let data = disk.mount.join("data");
    std::fs::create_dir_all(&data).unwrap();
    setup(&data);
    let config = disk.mount.join("mailstow.toml");
    std::fs::write(
        &config,
        format!("[server]\ndisk_reserve_bytes = {reserve}\n"),
    )
    .unwrap();
    let server = Server::start_opts(
        &data,
        Some(&config),
        Some("warn"),
        &["--metrics", "127.0.0.1:0"],
    );
    (server, data)
}

fn fill(path: &Path, bytes: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
}

#[test]
fn below_the_reserve_mail_is_refused_at_mail_and_taken_again_when_space_comes_back() {
    let disk = SmallDisk::mount(64 << 20);
    let reserve = 8 << 20;
    let (server, _data) = start(&disk, reserve);
    let metrics = server.metrics.expect("metrics");
    assert_eq!(healthz(metrics), "ok  200");
    // A fresh data directory is small (issue 36 item 2: at most 16 MiB).
    let used = (64 << 20) - disk.available();
    assert!(used <= 16 << 20, "a fresh data directory took {used} bytes");
    let mut smtp = Smtp::connect(&server.addr("smtp"));
    smtp.mail(0, 10_000).unwrap();
    // Something else fills the disk past the reserve.
    let filler = disk.mount.join("filler");
    fill(&filler, disk.available() - reserve + (1 << 20));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(smtp.mail(1, 10_000), Err(("MAIL", 452)));
    let health = healthz(metrics);
    assert!(
        health.starts_with("disk full") && health.ends_with("503"),
        "{health}"
    );
    // Space comes back: taken again within seconds, with no restart.
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    while smtp.mail(2, 10_000).is_err() {
        assert!(freed.elapsed() < Duration::from_secs(5), "still refused");
        std::thread::sleep(Duration::from_millis(50));
    }
    // `/healthz` follows within its watch interval (250 ms).
    while healthz(metrics) != "ok  200" {
        assert!(
            freed.elapsed() < Duration::from_secs(5),
            "{}",
            healthz(metrics)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while inbox_count(&server) < 2 {
        assert!(Instant::now() < deadline, "not delivered");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn mail_until_the_disk_fills_is_refused_before_its_data_and_none_accepted_is_lost() {
    let disk = SmallDisk::mount(96 << 20);
    let (server, data) = start(&disk, 4 << 20);
    // Something else on the disk the operator can delete later (old logs): more than the
    // mail can take, so that deleting it leaves room to deliver everything queued.
    let logs = disk.mount.join("old-logs");
    fill(&logs, 48 << 20);
    let mut smtp = Smtp::connect(&server.addr("smtp"));
    let mut accepted = 0;
    let refusal = loop {
        match smtp.mail(accepted, 100_000) {
            Ok(()) => accepted += 1,
            Err(refusal) => break refusal,
        }
        assert!(accepted < 2_000, "the disk never filled");
    };
    // Refused at the door (452 4.3.1), not after the data was sent.
    assert!(matches!(refusal, ("MAIL" | "RCPT", 452)), "{refusal:?}");
    assert!(accepted > 50, "{accepted} accepted");
    // Below the reserve delivery pauses, mail kept queued; the operator frees space and
    // every message answered 250 is delivered, with no restart.
    std::fs::remove_file(&logs).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while inbox_count(&server) < accepted {
        assert!(Instant::now() < deadline, "not all delivered");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(inbox_count(&server), accepted);
    server.stop_cleanly();
    // With 1 MiB left: a clean check, and a restart that takes mail again once there is room.
    let filler = disk.mount.join("filler");
    fill(&filler, disk.available().saturating_sub(1 << 20));
    must(mailstow(&data, &["store", "fsck"]));
    must(mailstow(&data, &["queue", "fsck"]));
    let config = disk.mount.join("mailstow.toml");
    let server = Server::start_opts(&data, Some(&config), Some("warn"), &[]);
    // Opening removed the queue's unused spare segment: fill again what that gave back.
    let more = disk.mount.join("more-filler");
    fill(&more, disk.available().saturating_sub(1 << 20));
    std::thread::sleep(Duration::from_millis(300));
    let mut smtp = Smtp::connect(&server.addr("smtp"));
    assert_eq!(smtp.mail(9_000, 1_000), Err(("MAIL", 452)));
    std::fs::remove_file(&filler).unwrap();
    std::fs::remove_file(&more).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    smtp.mail(9_001, 1_000).unwrap();
}
