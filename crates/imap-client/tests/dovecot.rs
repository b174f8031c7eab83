//! Integration tests against a private Dovecot 2.3 (test-peers).

use std::time::{Duration, Instant};

use base64::Engine;
use imap_client::{Client, Config, Error, Tls};
use test_peers::Dovecot;

fn config(d: &Dovecot, n: usize) -> Config {
    let (user, password) = d.user(n);
    Config {
        host: "127.0.0.1".into(),
        port: d.port(),
        tls: Tls::None,
        user,
        password,
        accept_invalid_certs: false,
        timeout: Duration::from_secs(10),
        response_bytes_max: 64 * 1024 * 1024,
        use_binary: true,
    }
}

/// A single-part message whose body holds every byte value, NULs and bare CR/LF.
fn binary_message(i: usize) -> (Vec<u8>, Vec<u8>) {
    let mut body: Vec<u8> = (0..=255u8).collect();
    body.extend_from_slice(&[0, 0, b'\r', b'\n', b'\n', b'\r', 0]);
    body.extend_from_slice(format!("message {i}").as_bytes());
    body.extend((0..=255u8).rev());
    let mut msg = format!(
        "From: t@example.org\r\nSubject: block {i}\r\nX-Mailfs-Id: blk-{i:04}\r\nMIME-Version: 1.0\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n"
    )
    .into_bytes();
    msg.extend_from_slice(&body);
    (msg, body)
}

fn text_message(i: usize, body: &str) -> Vec<u8> {
    format!("From: t@example.org\r\nX-Mailfs-Id: txt-{i}\r\n  folded-part\r\nContent-Type: text/plain\r\n\r\n{body}")
        .into_bytes()
}

#[tokio::test]
async fn round_trips() {
    let dovecot = Dovecot::start(1).unwrap();
    let mut c = Client::connect(&config(&dovecot, 1)).await.unwrap();
    let caps = c.capabilities().clone();
    for (name, on) in [
        ("BINARY", caps.binary),
        ("LITERAL+", caps.literal_plus),
        ("MULTIAPPEND", caps.multiappend),
        ("UIDPLUS", caps.uidplus),
        ("CONDSTORE", caps.condstore),
        ("QUOTA", caps.quota),
    ] {
        assert!(on, "{name} missing: {:?}", caps.all);
    }

    c.create("blocks").await.unwrap();
    c.create("blocks").await.unwrap(); // exists: fine
    c.create("Ünïcode & \"quotes\"").await.unwrap();
    c.select("Ünïcode & \"quotes\"").await.unwrap();
    let mb = c.select("blocks").await.unwrap();
    assert_eq!(mb.exists, 0);
    assert!(mb.uid_validity > 0);
    assert!(mb.highest_modseq.is_some());

    // MULTIAPPEND of 20 binary messages.
    let msgs: Vec<(Vec<u8>, Vec<u8>)> = (0..20).map(binary_message).collect();
    let refs: Vec<&[u8]> = msgs.iter().map(|(m, _)| m.as_slice()).collect();
    let uids: Vec<u32> = c
        .append("blocks", &refs, true)
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.expect("APPENDUID"))
        .collect();
    assert_eq!(uids.len(), 20);
    assert!(uids.windows(2).all(|w| w[0] < w[1]));
    let mb = c.select("blocks").await.unwrap();
    assert_eq!(mb.exists, 20);

    // Header field fetch for all.
    let ids = c
        .uid_fetch_header_field("1:*", "X-Mailfs-Id")
        .await
        .unwrap();
    assert_eq!(ids.len(), 20);
    for (i, (uid, id)) in ids.iter().enumerate() {
        assert_eq!(*uid, uids[i]);
        assert_eq!(id, &format!("blk-{i:04}"));
    }
    // Search by header.
    assert_eq!(
        c.uid_search_header("X-Mailfs-Id", "blk-0007")
            .await
            .unwrap(),
        vec![uids[7]]
    );
    assert!(
        c.uid_search_header("X-Mailfs-Id", "nope")
            .await
            .unwrap()
            .is_empty()
    );

    // BINARY path: byte-identical bodies.
    for (i, uid) in uids.iter().enumerate() {
        let body = c.uid_fetch_body(*uid, None).await.unwrap().unwrap();
        assert_eq!(body, msgs[i].1, "message {i}");
    }
    let all = c.uid_fetch_bodies(&uids).await.unwrap();
    assert_eq!(all.len(), 20);
    for (i, (uid, body)) in all.iter().enumerate() {
        assert_eq!(*uid, uids[i]);
        assert_eq!(body, &msgs[i].1);
    }
    // Partial.
    let part = c
        .uid_fetch_body(uids[3], Some((250, 20)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(part, msgs[3].1[250..270]);
    // Missing UID.
    assert_eq!(c.uid_fetch_body(999_999, None).await.unwrap(), None);

    // TEXT path (BINARY turned off) with a 7-bit message, appended without literal8,
    // one APPEND per message with synchronizing literals.
    c.capabilities_mut().binary = false;
    c.capabilities_mut().multiappend = false;
    c.capabilities_mut().literal_plus = false;
    c.capabilities_mut().literal_minus = false;
    let t1 = text_message(1, "line one\r\nline two\r\n");
    let t2 = text_message(2, "second\r\n");
    let tuids = c.append("blocks", &[&t1, &t2], false).await.unwrap();
    let tuids: Vec<u32> = tuids.into_iter().map(Option::unwrap).collect();
    assert_eq!(
        c.uid_fetch_body(tuids[0], None).await.unwrap().unwrap(),
        b"line one\r\nline two\r\n"
    );
    assert_eq!(
        c.uid_fetch_body(tuids[1], Some((1, 3)))
            .await
            .unwrap()
            .unwrap(),
        b"eco"
    );
    let h = c
        .uid_fetch_header_field(&tuids[0].to_string(), "x-mailfs-id")
        .await
        .unwrap();
    assert_eq!(h, vec![(tuids[0], "txt-1 folded-part".to_string())]);
    // Binary message through the TEXT path: raw content (Dovecot may have re-encoded it).
    let raw = c.uid_fetch_body(uids[0], None).await.unwrap().unwrap();
    assert!(!raw.is_empty());
    assert!(matches!(
        c.append("blocks", &[&msgs[0].0], true).await,
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(
        c.append("blocks", &[&msgs[0].0], false).await,
        Err(Error::InvalidArgument(_))
    ));
    // Pipelined APPENDs with LITERAL+ but no MULTIAPPEND.
    c.capabilities_mut().literal_plus = true;
    let p = c.append("blocks", &[&t1, &t2, &t1], false).await.unwrap();
    assert!(p.iter().all(Option::is_some));
    *c.capabilities_mut() = caps.clone();

    // Quota.
    let (used, limit) = c.quota("blocks").await.unwrap().unwrap();
    assert!(used >= 20 * 512, "used {used}");
    assert_eq!(limit, 10 * 1024 * 1024 * 1024);

    // Expunge.
    c.uid_expunge(&uids[..5]).await.unwrap();
    let left = c
        .uid_fetch_header_field("1:*", "X-Mailfs-Id")
        .await
        .unwrap();
    assert_eq!(left.len(), 15 + 5);
    assert!(left.iter().all(|(u, _)| !uids[..5].contains(u)));
    assert_eq!(c.uid_fetch_body(uids[0], None).await.unwrap(), None);

    // NO and BAD keep the connection usable.
    assert!(matches!(
        c.select("does-not-exist").await,
        Err(Error::No(_))
    ));
    assert!(matches!(
        c.uid_fetch_header_field("1:*", "a:b").await,
        Err(Error::InvalidArgument(_))
    ));
    c.noop().await.unwrap();
    assert!(c.is_usable());
    c.logout().await.unwrap();
}

#[tokio::test]
async fn big_message() {
    let dovecot = Dovecot::start(1).unwrap();
    let mut c = Client::connect(&config(&dovecot, 1)).await.unwrap();
    c.create("big").await.unwrap();
    c.select("big").await.unwrap();
    let mut body = Vec::with_capacity(4 << 20);
    let mut x: u32 = 1;
    while body.len() < 4 << 20 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        body.push((x >> 8) as u8);
    }
    let mut msg = b"X-Mailfs-Id: big\r\nMIME-Version: 1.0\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n".to_vec();
    msg.extend_from_slice(&body);
    let uid = c.append("big", &[&msg], true).await.unwrap()[0].unwrap();
    let back = c.uid_fetch_body(uid, None).await.unwrap().unwrap();
    assert!(
        back == body,
        "4 MiB body differs ({} bytes back)",
        back.len()
    );
    let part = c
        .uid_fetch_body(uid, Some((3 << 20, 1000)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(part, body[3 << 20..(3 << 20) + 1000]);

    // The same bytes in base64 as a whole message (BODY.PEEK[]), from a session that does
    // not use BINARY: a large plain literal, cut out of the response before imap-codec.
    let mut plain = config(&dovecot, 1);
    plain.use_binary = false;
    let mut p = Client::connect(&plain).await.unwrap();
    assert!(!p.capabilities().binary);
    p.select("big").await.unwrap();
    let mut b64 = b"X-Mailfs-Id: big64\r\nContent-Transfer-Encoding: base64\r\n\r\n".to_vec();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&body);
    for line in encoded.as_bytes().chunks(76) {
        b64.extend_from_slice(line);
        b64.extend_from_slice(b"\r\n");
    }
    let uid64 = p.append("big", &[&b64], false).await.unwrap()[0].unwrap();
    let whole = p.uid_fetch_message(uid64).await.unwrap().unwrap();
    assert!(whole == b64, "{} bytes back of {}", whole.len(), b64.len());
    let text: Vec<u8> = whole[imap_client::body_start(&whole)..]
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    assert!(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
            == body
    );
    assert_eq!(p.uid_fetch_message(999_999).await.unwrap(), None);

    // A response cap below the message size is a clear error, not a hang.
    let mut small = config(&dovecot, 1);
    small.response_bytes_max = 1 << 20;
    let mut s = Client::connect(&small).await.unwrap();
    s.select("big").await.unwrap();
    assert!(matches!(
        s.uid_fetch_body(uid, None).await,
        Err(Error::TooLarge(_))
    ));
    assert!(!s.is_usable());
    assert!(matches!(s.noop().await, Err(Error::Unusable(_))));
}

#[tokio::test]
async fn many_messages_header_fetch() {
    let dovecot = Dovecot::start(1).unwrap();
    let mut c = Client::connect(&config(&dovecot, 1)).await.unwrap();
    c.create("many").await.unwrap();
    c.select("many").await.unwrap();
    let msgs: Vec<Vec<u8>> = (0..2000)
        .map(|i| format!("X-Mailfs-Id: m{i}\r\n\r\nbody {i}\r\n").into_bytes())
        .collect();
    for chunk in msgs.chunks(500) {
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        c.append("many", &refs, false).await.unwrap();
    }
    let ids = c
        .uid_fetch_header_field("1:*", "X-Mailfs-Id")
        .await
        .unwrap();
    assert_eq!(ids.len(), 2000);
    // Sparse UID list → long sequence sets, split into several commands.
    let uids: Vec<u32> = ids.iter().map(|(u, _)| *u).step_by(2).collect();
    let bodies = c.uid_fetch_bodies(&uids).await.unwrap();
    assert_eq!(bodies.len(), 1000);
}

#[tokio::test]
async fn wrong_password_is_no() {
    let dovecot = Dovecot::start(1).unwrap();
    let mut cfg = config(&dovecot, 1);
    cfg.password = "wrong".into();
    assert!(matches!(Client::connect(&cfg).await, Err(Error::No(_))));
}

#[tokio::test]
async fn silent_server_times_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cfg = Config {
        host: "127.0.0.1".into(),
        port,
        tls: Tls::None,
        user: "u".into(),
        password: "p".into(),
        accept_invalid_certs: false,
        timeout: Duration::from_millis(500),
        response_bytes_max: 1 << 20,
        use_binary: true,
    };
    let start = Instant::now();
    let r = Client::connect(&cfg).await;
    assert!(matches!(r, Err(Error::Timeout)), "{:?}", r.err());
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    // Same with implicit TLS: the handshake gets no answer.
    let cfg = Config {
        tls: Tls::Implicit,
        accept_invalid_certs: true,
        host: "localhost".into(),
        ..cfg
    };
    let start = Instant::now();
    assert!(matches!(Client::connect(&cfg).await, Err(Error::Timeout)));
    assert!(start.elapsed() < Duration::from_secs(2));
    drop(listener);
}

#[tokio::test]
async fn stopped_server_is_an_error() {
    let mut dovecot = Dovecot::start(1).unwrap();
    let cfg = config(&dovecot, 1);
    let mut c = Client::connect(&cfg).await.unwrap();
    c.create("x").await.unwrap();
    c.select("x").await.unwrap();
    dovecot.stop();
    let start = Instant::now();
    let r = c.noop().await;
    assert!(
        matches!(r, Err(Error::Bye(_) | Error::Closed | Error::Io(_))),
        "{r:?}"
    );
    assert!(start.elapsed() < cfg.timeout);
    assert!(!c.is_usable());
    assert!(matches!(Client::connect(&cfg).await, Err(Error::Io(_))));
    dovecot.restart().unwrap();
    let mut c = Client::connect(&cfg).await.unwrap();
    c.select("x").await.unwrap();
    c.logout().await.unwrap();
}
