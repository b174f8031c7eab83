//! Timings, not a test: `cargo test --release -p sender-auth --test measure -- --ignored
//! --nocapture`.

mod common;

use std::net::IpAddr;
use std::time::Instant;

use common::{FakeDns, MESSAGE, runtime, signed, signer};
use sender_auth::{Algorithm, CheckInput};

#[test]
#[ignore = "prints timings"]
fn measure() {
    let (_, ed, ed_zone) = signer(Algorithm::Ed25519, "example.org");
    let (_, rsa, _) = signer(Algorithm::Rsa, "example.org");
    for (name, signer) in [("ed25519", &ed), ("rsa-2048", &rsa)] {
        let rounds = 2000;
        let started = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(signer.sign(MESSAGE).expect("sign"));
        }
        println!("sign {name}: {:?} per message", started.elapsed() / rounds);
    }

    let dns = FakeDns::start(&[
        ed_zone,
        "example.org TXT v=spf1 ip4:192.0.2.1 -all".into(),
        "_dmarc.example.org TXT v=DMARC1; p=reject".into(),
        // The DMARC tree walk asks for _dmarc.org too. The fake server's NXDOMAIN has no SOA,
        // so hickory could not cache it (RFC 2308 5), and every check would ask again; a
        // record that is no DMARC policy is cached like a real server's NXDOMAIN would be.
        "_dmarc.org TXT not a policy".into(),
    ]);
    let rt = runtime();
    let checker = rt.block_on(async { dns.checker() });
    let message = signed(&ed, MESSAGE);
    let input = CheckInput {
        ip: IpAddr::from([192, 0, 2, 1]),
        helo: "client.example.org",
        mail_from: "alice@example.org",
        message: &message,
    };
    let started = Instant::now();
    let cold = rt.block_on(checker.check(&input));
    println!(
        "check, cold cache: {:?} ({} DNS queries)",
        started.elapsed(),
        dns.queries().len()
    );
    assert!(cold.header.contains("dmarc=pass"), "{}", cold.header);
    let rounds = 2000;
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(rt.block_on(checker.check(&input)));
    }
    println!(
        "check, warm cache: {:?} per message ({} DNS queries in all)",
        started.elapsed() / rounds,
        dns.queries().len()
    );
}
