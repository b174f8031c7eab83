//! Encode/decode round trips of every on-disk structure, and rejection of bad bytes.

use crate::format::*;
use crate::{Envelope, Recipient, RecipientStatus};

fn header() -> Header {
    Header::new(Kind::Deferred, 42, 7, 3 << 20, 1234)
}

#[test]
fn header_round_trip() {
    let h = header();
    let b = h.encode();
    let d = Header::decode(&b).unwrap();
    assert_eq!(d, h);
    assert_eq!(d.kind, Kind::Deferred);
    assert_eq!(d.seq, 42);
    assert_eq!(d.generation, 7);
    assert_eq!(d.segment_bytes, 3 << 20);
    assert_eq!(d.slot_count, (3 << 20) / 2048);
    assert_eq!(d.data_offset % 4096, 0);
    assert!(u64::from(d.data_offset) >= HEADER_BYTES + u64::from(d.slot_count) * SLOT_BYTES);
    assert_eq!(d.id_floor, 1234);
}

#[test]
fn header_rejects_damage() {
    let good = header().encode();
    // Every single-bit flip in the used bytes is caught (CRC) without a panic.
    for byte in 0..good.len() {
        for bit in 0..8 {
            let mut b = good;
            b[byte] ^= 1 << bit;
            assert!(Header::decode(&b).is_err(), "flip at {byte}:{bit} accepted");
        }
    }
    assert!(Header::decode(&good[..30]).is_err());
    assert!(Header::decode(&[0u8; 60]).unwrap_err().contains("magic"));
    // A correctly checksummed header with impossible fields is still refused.
    let mut h = header();
    h.segment_bytes = 12345;
    assert!(Header::decode(&h.encode()).is_err());
    let mut b = header().encode();
    b[8] = 9; // version
    let crc = crc32c::crc32c(&b[..56]);
    b[56..60].copy_from_slice(&crc.to_le_bytes());
    assert!(Header::decode(&b).unwrap_err().contains("version"));
}

fn slot() -> Slot {
    Slot {
        id: 99,
        offset: 36864,
        len: record_len(2, 30, 100) as u32,
        env_len: 30,
        content_len: 100,
        recipients: 2,
        attempts: 3,
        arrival_ms: 1_700_000_000_123,
        next_attempt_ms: 1_700_000_999_000,
        record_crc: 0xDEAD_BEEF,
        flags: FLAG_BATCH_END,
        generation: 5,
        done: 0,
        hint: 1,
    }
}

#[test]
fn slot_round_trip_and_chain() {
    let s = slot();
    let seed = chain_seed(5);
    let (b, crc) = s.encode(seed);
    assert_eq!(Slot::decode(&b), s);
    assert_eq!(Slot::stored_crc(&b), crc);
    assert_eq!(Slot::expected_crc(&b, seed), crc);
    // The chain: the same slot under another predecessor does not validate.
    assert_ne!(Slot::expected_crc(&b, chain_seed(6)), crc);
    // The done flag and hint are outside the checksum.
    let mut b2 = b;
    b2[S_DONE] = 1;
    b2[S_HINT] = 0;
    assert_eq!(Slot::expected_crc(&b2, seed), crc);
    // Any flip in the checksummed part is caught.
    for byte in 0..S_DONE {
        let mut b3 = b;
        b3[byte] ^= 0x10;
        assert_ne!(
            Slot::expected_crc(&b3, seed),
            Slot::stored_crc(&b3),
            "flip at {byte}"
        );
    }
    let h = Header::new(Kind::Main, 1, 5, 1 << 20, 1);
    assert!(s.check_fields(&h, 36864).is_ok());
    assert!(s.check_fields(&h, 36872).is_err());
    assert!(Slot { id: 0, ..s }.check_fields(&h, 36864).is_err());
    assert!(
        Slot {
            len: s.len + 8,
            ..s
        }
        .check_fields(&h, 36864)
        .is_err()
    );
    assert!(
        Slot {
            offset: (1 << 20) - 8,
            ..s
        }
        .check_fields(&h, (1 << 20) - 8)
        .is_err()
    );
    assert!(Slot { recipients: 0, ..s }.check_fields(&h, 36864).is_err());
    assert!(Slot { generation: 4, ..s }.check_fields(&h, 36864).is_err());
    // The generation keeps its low 56 bits.
    let big = Slot {
        generation: u64::MAX,
        ..s
    };
    assert_eq!(
        Slot::decode(&big.encode(seed).0).generation,
        SLOT_GENERATION_MASK
    );
}

#[test]
fn record_round_trip() {
    let env = encode_envelope(&envelope());
    let content = b"Subject: hi\r\n\r\nbody\r\n".to_vec();
    let (bytes, crc) = encode_record(77, &[0, 2], &env, &content);
    assert_eq!(bytes.len() % 8, 0);
    assert_eq!(bytes.len() as u64, record_len(2, env.len(), content.len()));
    let s = Slot {
        id: 77,
        len: bytes.len() as u32,
        env_len: env.len() as u32,
        content_len: content.len() as u32,
        recipients: 2,
        record_crc: crc,
        ..Slot::default()
    };
    let v = check_record(&bytes, &s).unwrap();
    assert_eq!(v.statuses, &[0, 2]);
    assert_eq!(v.envelope, &env[..]);
    assert_eq!(v.content, &content[..]);
    // Status bytes are outside the checksum.
    let mut b = bytes.clone();
    b[RECORD_HEADER_BYTES] = STATUS_DELIVERED;
    assert!(check_record(&b, &s).is_ok());
    // Everything else is inside it (or checked against the slot).
    let pad_start = RECORD_HEADER_BYTES + 2 + env.len() + content.len();
    for i in (0..bytes.len())
        .filter(|&i| !(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 2).contains(&i) && i < pad_start)
    {
        let mut b = bytes.clone();
        b[i] ^= 0x01;
        assert!(check_record(&b, &s).is_err(), "flip at {i} accepted");
    }
    assert!(check_record(&bytes[..bytes.len() - 8], &s).is_err());
    assert!(check_record(&bytes[..4], &s).is_err());
    assert!(check_record(&bytes, &Slot { id: 78, ..s }).is_err());
}

fn envelope() -> Envelope {
    Envelope {
        sender: "ä-sender@example.org".into(),
        recipients: vec![
            Recipient {
                address: "a@x".into(),
                status: RecipientStatus::Pending,
                last_error: None,
            },
            Recipient {
                address: "b@y".into(),
                status: RecipientStatus::Failed,
                last_error: Some("550 no such user".into()),
            },
            Recipient {
                address: "c@z".into(),
                status: RecipientStatus::Delivered,
                last_error: Some(String::new()),
            },
            Recipient {
                address: "d@w".into(),
                status: RecipientStatus::Moved,
                last_error: None,
            },
        ],
        arrival_ms: u64::MAX - 1,
    }
}

#[test]
fn envelope_round_trip_and_truncation() {
    let e = envelope();
    let b = encode_envelope(&e);
    assert_eq!(decode_envelope(&b).unwrap(), e);
    for cut in 0..b.len() {
        assert!(decode_envelope(&b[..cut]).is_err(), "cut at {cut} accepted");
    }
    let mut long = b.clone();
    long.push(0);
    assert!(decode_envelope(&long).is_err());
    let mut bad = b.clone();
    bad[10] = 0xFF; // inside the sender: not UTF-8
    assert!(decode_envelope(&bad).is_err());
    let empty = Envelope {
        sender: String::new(),
        recipients: vec![],
        arrival_ms: 0,
    };
    assert_eq!(decode_envelope(&encode_envelope(&empty)).unwrap(), empty);
}

#[test]
fn status_codes_round_trip() {
    for s in [
        RecipientStatus::Pending,
        RecipientStatus::Delivered,
        RecipientStatus::Failed,
        RecipientStatus::Moved,
    ] {
        assert_eq!(status_from_code(status_code(s)), Some(s));
    }
    assert_eq!(status_from_code(4), None);
}

#[test]
fn segment_names() {
    assert_eq!(segment_name(Kind::Main, 3), "main-00000003.seg");
    assert_eq!(
        parse_segment_name("main-00000003.seg"),
        Some((Kind::Main, 3))
    );
    assert_eq!(
        parse_segment_name("deferred-123456789.seg"),
        Some((Kind::Deferred, 123_456_789))
    );
    for bad in [
        "main-3.seg",
        "main-0000000x.seg",
        "main-00000003.seg.quarantined",
        "other-00000001.seg",
        "main-00000003",
    ] {
        assert_eq!(parse_segment_name(bad), None, "{bad}");
    }
}
