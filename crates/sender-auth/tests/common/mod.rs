//! Shared by the integration tests: the repository's loopback DNS server, and messages.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sender_auth::{Algorithm, Checker, GeneratedKey, Signer, dns_record, generate};

/// The tiny authoritative DNS server of the end-to-end tests (UDP and TCP on one port).
pub struct FakeDns {
    child: Child,
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl FakeDns {
    /// Serves `zone` lines ("name TXT text", "name A ip", "name SILENT", ...).
    pub fn start<S: AsRef<str>>(zone: &[S]) -> FakeDns {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mailstow/tests/e2e/fake_dns.py");
        let dir = tempfile::tempdir().expect("tempdir");
        let port_file = dir.path().join("dns.port");
        let mut child = Command::new("python3")
            .env("FAKE_DNS_LOG", dir.path().join("queries"))
            .arg(script)
            .arg(&port_file)
            .args(zone.iter().map(AsRef::as_ref))
            .spawn()
            .expect("python3");
        let deadline = Instant::now() + Duration::from_secs(10);
        let port: u16 = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file)
                && let Ok(port) = port.trim().parse()
            {
                break port;
            }
            assert!(Instant::now() < deadline, "fake DNS did not start");
            assert!(
                child.try_wait().expect("try_wait").is_none(),
                "fake DNS exited"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeDns {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        }
    }

    /// The questions asked so far, as "name TYPE-NUMBER".
    pub fn queries(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("queries"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn checker(&self) -> Checker {
        Checker::new(&[self.addr], "mx.receiver.test").expect("checker")
    }
}

impl Drop for FakeDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub const MESSAGE: &[u8] = b"From: Alice <alice@example.org>\r\n\
To: Bob <bob@receiver.test>\r\n\
Subject: Lunch on  Friday?\r\n\
Date: Fri, 05 Jun 2026 10:00:00 +0000\r\n\
Message-ID: <lunch-1@example.org>\r\n\
MIME-Version: 1.0\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
\r\n\
Hi Bob,\r\n\
\r\n\
shall we have lunch on Friday?  At noon.\r\n\
\r\n\
Alice\r\n";

/// A key, its signer for `domain` with selector `s1`, and its zone line.
pub fn signer(algorithm: Algorithm, domain: &str) -> (GeneratedKey, Signer, String) {
    let key = generate(algorithm).expect("generate");
    let signer = Signer::new(domain, "s1", algorithm, &key.private_key_pem).expect("signer");
    let zone = format!(
        "s1._domainkey.{domain} TXT {}",
        dns_record(algorithm, &key.public_key_b64)
    );
    (key, signer, zone)
}

/// `message` with `signer`'s DKIM-Signature on top.
pub fn signed(signer: &Signer, message: &[u8]) -> Vec<u8> {
    let mut out = signer.sign(message).expect("sign").into_bytes();
    out.extend_from_slice(message);
    out
}
