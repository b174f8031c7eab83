//! Hostile input: `check` (with a real resolver and loopback DNS that knows the signing keys),
//! `strip_our_authentication_results` and `from_domain` must take any bytes without
//! panicking, and `check` must always produce a well-formed Authentication-Results field.

mod common;

use std::net::IpAddr;

use common::{FakeDns, MESSAGE, runtime, signed, signer};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use sender_auth::{Algorithm, CheckInput, Checker, from_domain, strip_our_authentication_results};

/// Bytes that make header and signature parsers take their rarer paths.
const PIECES: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"\r\n\t",
    b"\r\n\r\n",
    b" ",
    b":",
    b";",
    b"=",
    b"@",
    b"\"",
    b"(",
    b"\0",
    b"\xff\xfe",
    b"From: ",
    b"From: a@b.c, d@e.f\r\n",
    b"DKIM-Signature: ",
    b"DKIM-Signature: v=1; a=rsa-sha256; d=example.org; s=s1; c=relaxed/relaxed; h=from; bh=; b=\r\n",
    b"DKIM-Signature: v=1; a=ed25519-sha256; d=example.org; s=s1; l=5; x=1; t=2; h=From:From:From; bh=AAAA; b=AAAA\r\n",
    b"Authentication-Results: mx.receiver.test; spf=pass\r\n",
    b"; b=",
    b"; h=",
    b"=?utf-8?b?w6k=?=",
];

#[derive(Clone, Debug)]
enum Mutation {
    Insert(Index, Vec<u8>),
    InsertPiece(Index, Index),
    Delete(Index, u8),
    Replace(Index, u8),
    DuplicateLine(Index),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        (any::<Index>(), any::<Index>()).prop_map(|(at, piece)| Mutation::InsertPiece(at, piece)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, len)| Mutation::Delete(at, len)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Replace(at, byte)),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(message: &mut Vec<u8>, mutation: &Mutation) {
    let at = |index: &Index, len: usize| if len == 0 { 0 } else { index.index(len + 1) };
    match mutation {
        Mutation::Insert(index, bytes) => {
            let pos = at(index, message.len());
            message.splice(pos..pos, bytes.iter().copied());
        }
        Mutation::InsertPiece(index, piece) => {
            let pos = at(index, message.len());
            let piece = PIECES[piece.index(PIECES.len())];
            message.splice(pos..pos, piece.iter().copied());
        }
        Mutation::Delete(index, len) => {
            let pos = at(index, message.len());
            let end = (pos + usize::from(*len)).min(message.len());
            message.drain(pos..end);
        }
        Mutation::Replace(index, byte) => {
            if !message.is_empty() {
                let pos = index.index(message.len());
                message[pos] = *byte;
            }
        }
        Mutation::DuplicateLine(index) => {
            let lines: Vec<Vec<u8>> = message
                .split_inclusive(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            if !lines.is_empty() {
                let i = index.index(lines.len());
                let line = lines[i].clone();
                let pos: usize = lines[..i].iter().map(Vec::len).sum();
                message.splice(pos..pos, line);
            }
        }
        Mutation::Truncate(index) => {
            let len = at(index, message.len());
            message.truncate(len);
        }
    }
}

fn client() -> impl Strategy<Value = (String, String, [u8; 4])> {
    (
        prop_oneof![Just("client.example.org".to_string()), ".{0,40}"],
        prop_oneof![
            Just("alice@example.org".to_string()),
            Just(String::new()),
            "[a-z]{1,8}@[a-z]{1,8}\\.(test|org)",
            ".{0,40}",
        ],
        prop_oneof![Just([192, 0, 2, 1]), any::<[u8; 4]>()],
    )
}

/// Runs every public function that reads a message on it, and checks the field `check` made.
fn exercise(
    rt: &tokio::runtime::Runtime,
    checker: &Checker,
    message: &[u8],
    (helo, mail_from, ip): &(String, String, [u8; 4]),
) -> Result<(), TestCaseError> {
    let verdict = rt.block_on(checker.check(&CheckInput {
        ip: IpAddr::from(*ip),
        helo,
        mail_from,
        message,
    }));
    let header = verdict.header.as_bytes();
    prop_assert!(
        verdict
            .header
            .starts_with("Authentication-Results: mx.receiver.test;\r\n\t")
    );
    prop_assert!(verdict.header.ends_with("\r\n"));
    // Every line end but the last is a fold: the field cannot end early or smuggle another.
    let body = &header[..header.len() - 2];
    for (i, &b) in body.iter().enumerate() {
        match b {
            b'\r' => prop_assert!(
                body.get(i + 1..i + 3) == Some(&b"\n\t"[..]),
                "{}",
                verdict.header
            ),
            b'\n' => prop_assert!(i > 0 && body[i - 1] == b'\r' && body.get(i + 1) == Some(&b'\t')),
            _ => {}
        }
    }
    prop_assert!(verdict.dkim.len() <= 2 * sender_auth::DKIM_SIGNATURES_MAX);

    let _ = from_domain(message);
    let stripped = strip_our_authentication_results(message, "mx.receiver.test");
    if !matches!(message.first(), Some(b' ' | b'\t')) {
        let mut with_ours = header.to_vec();
        with_ours.extend_from_slice(message);
        let stripped_again = strip_our_authentication_results(&with_ours, "mx.receiver.test");
        prop_assert_eq!(&*stripped_again, &*stripped);
    }
    Ok(())
}

struct Setup {
    dns: FakeDns,
    rt: tokio::runtime::Runtime,
    checker: Checker,
    message: Vec<u8>,
}

fn setup() -> Setup {
    let (_, ed, ed_zone) = signer(Algorithm::Ed25519, "example.org");
    let (_, rsa, rsa_zone) = signer(Algorithm::Rsa, "example.net");
    let dns = FakeDns::start(&[
        ed_zone,
        rsa_zone,
        "example.org TXT v=spf1 ip4:192.0.2.1 include:example.net -all".into(),
        "example.net TXT v=spf1 a mx ~all".into(),
        "_dmarc.example.org TXT v=DMARC1; p=reject".into(),
    ]);
    let rt = runtime();
    let checker = rt.block_on(async { dns.checker() });
    let message = signed(&rsa, &signed(&ed, MESSAGE));
    Setup {
        dns,
        rt,
        checker,
        message,
    }
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn mutated_signed_messages_never_panic() {
    let s = setup();
    runner()
        .run(
            &(prop::collection::vec(mutation(), 0..6), client()),
            |(mutations, client)| {
                let mut message = s.message.clone();
                for mutation in &mutations {
                    apply(&mut message, mutation);
                }
                exercise(&s.rt, &s.checker, &message, &client)
            },
        )
        .expect("property");
    assert!(!s.dns.queries().is_empty());
}

#[test]
fn random_bytes_never_panic() {
    let s = setup();
    runner()
        .run(
            &(prop::collection::vec(any::<u8>(), 0..2048), client()),
            |(message, client)| exercise(&s.rt, &s.checker, &message, &client),
        )
        .expect("property");
}

/// The unmutated message passes, so the mutations start from the deep end of the verifier.
#[test]
fn the_base_message_passes() {
    let s = setup();
    let verdict = s.rt.block_on(s.checker.check(&CheckInput {
        ip: IpAddr::from([192, 0, 2, 1]),
        helo: "client.example.org",
        mail_from: "alice@example.org",
        message: &s.message,
    }));
    assert_eq!(verdict.dkim.len(), 2);
    assert!(
        verdict
            .dkim
            .iter()
            .all(|o| o.result == sender_auth::DkimResult::Pass),
        "{:?}",
        verdict.dkim
    );
    assert_eq!(verdict.dmarc, sender_auth::DmarcResult::Pass);
}
