use super::*;

fn header() -> Header {
    Header {
        kind: Kind::Block,
        flags: 0,
        fsid: [7; 16],
        object: 0xa3f2,
        index: 17,
        version: 3,
        raid_index: 1,
    }
}

fn sealings() -> [Sealing; 3] {
    [
        Sealing::Aead([1; 32]),
        Sealing::AesGcm([1; 32]),
        Sealing::MacOnly([2; 32]),
    ]
}

#[test]
fn round_trip_both_sealings() {
    for s in sealings() {
        let sealed = seal(&s, &header(), [9; NONCE_BYTES], b"block bytes").unwrap();
        assert_eq!(sealed.len(), HEADER_BYTES + NONCE_BYTES + 11 + TAG_BYTES);
        assert_eq!(open(&s, &header(), &sealed).unwrap(), b"block bytes");
        assert_eq!(peek(&sealed).unwrap(), header());
    }
    // AEAD hides the payload; MAC-only does not.
    let aead = seal(
        &Sealing::Aead([1; 32]),
        &header(),
        [9; NONCE_BYTES],
        b"secret payload",
    )
    .unwrap();
    assert!(!aead.windows(6).any(|w| w == b"secret"));
}

#[test]
fn a_swapped_replayed_or_misplaced_message_is_rejected() {
    for s in sealings() {
        let h = header();
        let sealed = seal(&s, &h, [9; NONCE_BYTES], b"v3").unwrap();
        let cases = [
            (Header { fsid: [8; 16], ..h }, "another file system"),
            (Header { object: 1, ..h }, "another object"),
            (Header { index: 18, ..h }, "another block or page"),
            (Header { version: 4, ..h }, "another version"),
            (Header { raid_index: 0, ..h }, "another account"),
            (
                Header {
                    kind: Kind::Directory,
                    ..h
                },
                "another kind of message",
            ),
        ];
        for (expected, why) in cases {
            assert_eq!(
                open(&s, &expected, &sealed),
                Err(FormatError::Unexpected(why))
            );
        }
    }
}

#[test]
fn a_rewritten_header_or_payload_fails_authentication() {
    for s in sealings() {
        let h = header();
        // An attacker re-labels an old version as the new one: the header now matches what
        // the reader expects, but it was bound into the tag.
        let old = seal(&s, &Header { version: 2, ..h }, [9; NONCE_BYTES], b"old").unwrap();
        let mut relabelled = old.clone();
        relabelled[..HEADER_BYTES].copy_from_slice(&h.encode());
        assert_eq!(open(&s, &h, &relabelled), Err(FormatError::Forged));
        let mut flipped = seal(&s, &h, [9; NONCE_BYTES], b"payload").unwrap();
        let last = flipped.len() - TAG_BYTES - 1;
        flipped[last] ^= 1;
        assert_eq!(open(&s, &h, &flipped), Err(FormatError::Forged));
        let mut flags = seal(&s, &h, [9; NONCE_BYTES], b"payload").unwrap();
        flags[6] ^= 1;
        assert_eq!(open(&s, &h, &flags), Err(FormatError::Forged));
    }
    // The wrong key is a forgery too.
    let sealed = seal(&Sealing::Aead([1; 32]), &header(), [9; NONCE_BYTES], b"x").unwrap();
    assert_eq!(
        open(&Sealing::Aead([3; 32]), &header(), &sealed),
        Err(FormatError::Forged)
    );
}

#[test]
fn foreign_and_damaged_messages() {
    let s = Sealing::Aead([1; 32]);
    assert_eq!(open(&s, &header(), b"MFS"), Err(FormatError::Truncated));
    assert_eq!(
        open(&s, &header(), &[0u8; 100]),
        Err(FormatError::NotMailfs)
    );
    let mut v = header().encode().to_vec();
    v[4] = 9;
    assert_eq!(peek(&v), Err(FormatError::Version(9)));
    v[4] = FORMAT_VERSION;
    v[5] = 77;
    assert_eq!(peek(&v), Err(FormatError::Kind(77)));
    let short = seal(&s, &header(), [0; NONCE_BYTES], b"").unwrap();
    assert_eq!(
        open(&s, &header(), &short[..short.len() - 1]),
        Err(FormatError::Truncated)
    );
    assert!(matches!(
        seal(
            &s,
            &header(),
            [0; NONCE_BYTES],
            &vec![0; PAYLOAD_BYTES_MAX + 1]
        ),
        Err(FormatError::TooLarge(_))
    ));
}

#[test]
fn search_keys_name_the_message_and_end_with_its_version() {
    let k = search_key(&header());
    assert_eq!(k, "07070707070707070707070707070707 blk 00000000a3f2.17 v3");
    let dir = search_key(&Header {
        kind: Kind::Directory,
        object: 1,
        index: 0,
        version: 42,
        ..header()
    });
    assert!(dir.ends_with(" dir 000000000001.0 v42"), "{dir}");
    assert!(format!("{:?}", Sealing::Aead([1; 32])).contains("<key>"));
}

proptest::proptest! {
    #[test]
    fn open_never_panics_and_only_accepts_what_was_sealed(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        for s in sealings() {
            let _ = peek(&bytes);
            proptest::prop_assert!(open(&s, &header(), &bytes).is_err());
        }
    }
}
