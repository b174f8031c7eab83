use super::*;
use crate::cipher::aes_message_key;

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

    #[test]
    fn opening_in_place_agrees_with_opening_a_copy(
        len in 0usize..(3 * SEGMENT_BYTES),
        flip in proptest::option::of(proptest::prelude::any::<usize>()),
        cut in proptest::option::of(proptest::prelude::any::<usize>()),
    ) {
        for s in sealings() {
            let mut m = seal(&s, &segmented(), [1; NONCE_BYTES], &data(len)).unwrap();
            if let Some(f) = flip {
                let at = f % m.len();
                m[at] ^= 1;
            }
            if let Some(c) = cut {
                m.truncate(c % m.len());
            }
            let copy = open(&s, &header(), &m);
            proptest::prop_assert_eq!(open_owned(&s, &header(), m), copy);
        }
    }
}

fn segmented() -> Header {
    Header {
        flags: FLAG_SEGMENTED,
        ..header()
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 7) as u8).collect()
}

#[test]
fn segmented_messages_round_trip_at_every_boundary() {
    let s = SEGMENT_BYTES;
    for sealing in sealings() {
        for len in [0, 1, s - 1, s, s + 1, 3 * s + 5, 1 << 20] {
            let plain = data(len);
            let sealed = seal(&sealing, &segmented(), [4; NONCE_BYTES], &plain).unwrap();
            assert_eq!(
                sealed.len(),
                PREFIX_BYTES + len + segment_count(len) * TAG_BYTES,
                "len {len}"
            );
            assert_eq!(segment_span(len, segment_count(len) - 1).end, sealed.len());
            assert!(
                open(&sealing, &header(), &sealed).unwrap() == plain,
                "len {len}"
            );
            // Opened in place: the same bytes, or the same refusal.
            assert!(
                open_owned(&sealing, &header(), sealed.clone()).unwrap() == plain,
                "len {len}"
            );
            let mut bad = sealed.clone();
            let last = bad.len() - 1;
            bad[last / 2] ^= 4;
            assert_eq!(
                open_owned(&sealing, &header(), bad.clone()),
                open(&sealing, &header(), &bad).map(|_| unreachable!())
            );
            let other = Header {
                index: 18,
                ..segmented()
            };
            assert_eq!(
                open_owned(&sealing, &other, sealed.clone()),
                Err(FormatError::Unexpected("another block or page"))
            );
            assert!(open_owned(&sealing, &header(), sealed[..sealed.len() - 1].to_vec()).is_err());
        }
    }
}

#[test]
fn any_range_of_segments_opens_on_its_own() {
    let len = 3 * SEGMENT_BYTES + 5;
    let plain = data(len);
    for sealing in sealings() {
        let sealed = seal(&sealing, &segmented(), [5; NONCE_BYTES], &plain).unwrap();
        for first in 0..4 {
            for end in first + 1..=4 {
                let from = segment_span(len, first).start;
                let to = segment_span(len, end - 1).end;
                let got = open_segments(
                    &sealing,
                    &header(),
                    &sealed[..PREFIX_BYTES],
                    len,
                    first..end,
                    &sealed[from..to],
                )
                .unwrap();
                let want = &plain[first * SEGMENT_BYTES..(end * SEGMENT_BYTES).min(len)];
                assert!(got == want, "segments {first}..{end}");
            }
        }
        // The segments a byte range needs.
        assert_eq!(segments_for(len, 0..1), 0..1);
        assert_eq!(
            segments_for(len, SEGMENT_BYTES - 1..SEGMENT_BYTES + 1),
            0..2
        );
        assert_eq!(segments_for(len, SEGMENT_BYTES..2 * SEGMENT_BYTES), 1..2);
        assert_eq!(segments_for(len, len - 1..len), 3..4);
    }
}

#[test]
fn moved_cut_or_foreign_segments_do_not_open() {
    let s = SEGMENT_BYTES;
    let len = 3 * s;
    for sealing in sealings() {
        let sealed = seal(&sealing, &segmented(), [6; NONCE_BYTES], &data(len)).unwrap();
        let span = |i| segment_span(len, i);
        // Segments 0 and 1 swapped (same length).
        let mut swapped = sealed.clone();
        swapped[span(0)].copy_from_slice(&sealed[span(1)]);
        swapped[span(1)].copy_from_slice(&sealed[span(0)]);
        assert!(matches!(
            open(&sealing, &header(), &swapped),
            Err(FormatError::Forged)
        ));
        // Cut after two whole segments: the second was not sealed as the last.
        let cut = &sealed[..span(1).end];
        assert!(matches!(
            open(&sealing, &header(), cut),
            Err(FormatError::Forged)
        ));
        // A segment of another message with the same header (another nonce).
        let mut other_data = data(len);
        other_data[2 * s] ^= 1;
        let other = seal(&sealing, &segmented(), [7; NONCE_BYTES], &other_data).unwrap();
        let mut mixed = sealed.clone();
        mixed[span(2)].copy_from_slice(&other[span(2)]);
        assert!(matches!(
            open(&sealing, &header(), &mixed),
            Err(FormatError::Forged)
        ));
        // Asking for a segment under the wrong index.
        assert!(matches!(
            open_segments(&sealing, &header(), &sealed, len, 1..2, &sealed[span(0)]),
            Err(FormatError::Forged)
        ));
        // The segmented flag cleared: the message no longer opens.
        let mut unflagged = sealed.clone();
        unflagged[6] &= !(FLAG_SEGMENTED as u8);
        assert!(matches!(
            open(&sealing, &header(), &unflagged),
            Err(FormatError::Forged)
        ));
        // Another block's prefix.
        let other_block = Header {
            index: 18,
            ..header()
        };
        assert!(matches!(
            open_segments(&sealing, &other_block, &sealed, len, 0..1, &sealed[span(0)]),
            Err(FormatError::Unexpected(_))
        ));
        // Wrong lengths are errors, not panics.
        assert!(matches!(
            open_segments(
                &sealing,
                &header(),
                &sealed,
                len,
                0..1,
                &sealed[span(0)][1..]
            ),
            Err(FormatError::Truncated)
        ));
        assert!(matches!(
            open_segments(&sealing, &header(), &sealed, len, 2..5, &sealed[span(2)]),
            Err(FormatError::Truncated)
        ));
        assert!(matches!(
            open_segments(
                &sealing,
                &header(),
                &sealed[..10],
                len,
                0..1,
                &sealed[span(0)]
            ),
            Err(FormatError::Truncated)
        ));
    }
}

/// The AES-GCM envelope is standard AES-256-GCM: a second, independent implementation
/// (RustCrypto's, which sealed every AES file system before AWS-LC took over) computes the
/// same ciphertext and tag for every segment, so stored messages read either way.
#[test]
fn aes_gcm_envelopes_match_an_independent_implementation() {
    use aes_gcm::aead::{AeadInOut, KeyInit};
    let key = [5u8; 32];
    let nonce = [3u8; NONCE_BYTES];
    let plain = data(2 * SEGMENT_BYTES + 9);
    let sealed = seal(&Sealing::AesGcm(key), &segmented(), nonce, &plain).unwrap();
    let other = aes_gcm::Aes256Gcm::new(&aes_message_key(&key, &nonce).into());
    let aad = segmented().encode();
    let count = segment_count(plain.len());
    for i in 0..count {
        let span = segment_span(plain.len(), i);
        let (ciphertext, tag) = sealed[span.clone()].split_at(span.len() - TAG_BYTES);
        let tag: [u8; TAG_BYTES] = tag.try_into().unwrap();
        let mut buf = ciphertext.to_vec();
        let mut n = [0u8; 12];
        n.copy_from_slice(&nonce[12..]);
        for (b, x) in n[8..].iter_mut().zip((i as u32).to_le_bytes()) {
            *b ^= x;
        }
        let mut ad = aad.to_vec();
        ad.extend_from_slice(&(i as u32).to_le_bytes());
        ad.push(u8::from(i + 1 == count));
        other
            .decrypt_inout_detached(&n.into(), &ad, buf.as_mut_slice().into(), &tag.into())
            .unwrap();
        let at = i * SEGMENT_BYTES;
        assert_eq!(buf, plain[at..at + buf.len()], "segment {i}");
    }
    // And a whole (unsegmented) message sealed by the other one opens here.
    let h = header();
    let aad = h.encode();
    let mut n = [0u8; 12];
    n.copy_from_slice(&nonce[12..]);
    let mut body = plain.clone();
    let tag = other
        .encrypt_inout_detached(&n.into(), &aad, body.as_mut_slice().into())
        .unwrap();
    let mut message = aad.to_vec();
    message.extend_from_slice(&nonce);
    message.extend_from_slice(&body);
    message.extend_from_slice(tag.as_slice());
    assert_eq!(open(&Sealing::AesGcm(key), &h, &message).unwrap(), plain);
}
