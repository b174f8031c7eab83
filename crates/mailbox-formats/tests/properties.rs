//! Property tests: random bytes never make a reader panic, and what the writers write reads
//! back as it was.

use mailbox_formats::lines::{remove_fields, to_crlf, to_lf};
use mailbox_formats::maildir::{self, MaildirWriter, OutMessage};
use mailbox_formats::mbox::{METADATA_FIELDS, MboxItem, MboxOut, MboxReader, MboxWriter, Quoting};
use mailbox_formats::{Flags, mutf7, uidlist};
use proptest::prelude::*;

/// Bytes that look a little like mail: lines, `From `, `>`, headers, CR and LF.
fn mailish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"From ".to_vec()),
        Just(b">From ".to_vec()),
        Just(b">>From x Sat Nov 21 12:00:00 2026".to_vec()),
        Just(b"From a@b Sat Nov 21 12:00:00 2026".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"Status: RO".to_vec()),
        Just(b"X-Keywords: a b".to_vec()),
        Just(b"X-UID: 5".to_vec()),
        Just(b"X-IMAP: 1 2".to_vec()),
        Just(b"Subject: x".to_vec()),
        Just(b" folded".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn flags() -> impl Strategy<Value = Flags> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(seen, answered, flagged, deleted, draft)| Flags {
            seen,
            answered,
            flagged,
            deleted,
            draft,
        })
}

fn keywords() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[A-Za-z$][A-Za-z0-9_$-]{0,8}", 0..4).prop_map(|mut v| {
        v.sort();
        v.dedup();
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_as_an_mbox_never_panic(bytes in mailish(), max in 0usize..200, mboxo in any::<bool>()) {
        let quoting = if mboxo { Quoting::Mboxo } else { Quoting::Mboxrd };
        let mut reader = MboxReader::new(&bytes[..], quoting, max);
        let mut n = 0;
        while let Ok(Some(item)) = reader.next_item() {
            if let MboxItem::Message(m) = item {
                prop_assert!(m.content.len() <= max + 2);
            }
            n += 1;
            prop_assert!(n <= bytes.len() + 1);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut reader = MboxReader::new(&bytes[..], Quoting::Mboxrd, 64);
        while let Ok(Some(_)) = reader.next_item() {}
        let _ = uidlist::parse_uidlist(&bytes);
        let _ = uidlist::parse_keywords(&bytes);
        let text = String::from_utf8_lossy(&bytes);
        let _ = maildir::parse_info(&text);
        let _ = maildir::folder_path(&text);
        let _ = mutf7::decode(&text);
        let _ = mailbox_formats::date::parse_from_line(&bytes);
        let _ = remove_fields(&bytes, &METADATA_FIELDS);
    }

    #[test]
    fn uidlist_like_text_never_panics(lines in proptest::collection::vec(
        "(3 V[0-9]{0,11} N[0-9]{0,11}|1 [0-9]{0,3} [0-9]{0,3}|[0-9]{0,11}( [A-Z][0-9a-f]{0,4})* ?:?[^\n]{0,10})",
        0..8,
    )) {
        let text = lines.join("\n");
        let _ = uidlist::parse_uidlist(text.as_bytes());
    }

    #[test]
    fn modified_utf7_round_trips(text in "\\PC{0,12}") {
        prop_assert_eq!(mutf7::decode(&mutf7::encode(&text, &['.'])), Some(text));
    }

    #[test]
    fn line_endings_round_trip_without_crlf(bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'a')], 0..40)) {
        let crlf = to_crlf(&bytes);
        prop_assert!(crlf.iter().enumerate().all(|(i, &b)| b != b'\n' || (i > 0 && crlf[i - 1] == b'\r')));
        if !bytes.windows(2).any(|w| w == b"\r\n") {
            prop_assert_eq!(to_lf(&crlf), bytes);
        }
    }

    /// What the mbox writer writes reads back as the message without its metadata fields
    /// (with a line end added if it had none), with its flags, keywords and UID.
    #[test]
    fn mbox_round_trips(
        messages in proptest::collection::vec((mailish(), flags(), keywords(), proptest::option::of(1u32..1000), 0i64..4_000_000_000), 1..5),
    ) {
        let mut writer = MboxWriter::new(Vec::new());
        for (content, flags, keywords, uid, date) in &messages {
            writer.write(&MboxOut {
                sender: "",
                internal_date: *date,
                flags: *flags,
                keywords,
                uid: *uid,
                content,
            }, None).unwrap();
        }
        let file = writer.into_inner();
        let mut reader = MboxReader::new(&file[..], Quoting::Mboxrd, 1 << 20);
        for (content, flags, keywords, uid, date) in &messages {
            let Some(MboxItem::Message(m)) = reader.next_item().unwrap() else {
                panic!("message missing");
            };
            let (mut expected, _) = remove_fields(content, &METADATA_FIELDS);
            if !expected.is_empty() && !expected.ends_with(b"\n") {
                expected.push(b'\n');
            }
            prop_assert_eq!(String::from_utf8_lossy(&m.content), String::from_utf8_lossy(&expected));
            prop_assert_eq!(m.flags, *flags);
            prop_assert_eq!(&m.keywords, keywords);
            prop_assert_eq!(m.uid, *uid);
            prop_assert_eq!(m.internal_date, Some(*date));
        }
        prop_assert_eq!(reader.next_item().unwrap(), None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A folder written by the maildir writer scans back with the same UIDs, UIDVALIDITY,
    /// flags, keywords, dates and bytes.
    #[test]
    fn maildir_round_trips(
        messages in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..300), flags(), keywords(), 0i64..4_000_000_000), 0..8),
        uidvalidity in 1u32..u32::MAX,
        path in proptest::collection::vec("[^/\\x00-\\x1f]{1,6}", 0..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("Maildir");
        let writer = MaildirWriter::create(&root).unwrap();
        let mut folder = writer.folder(&path, uidvalidity).unwrap();
        for (i, (content, flags, keywords, date)) in messages.iter().enumerate() {
            folder.write(&OutMessage {
                uid: 3 * i as u32 + 1,
                flags: *flags,
                keywords,
                internal_date: *date,
                content,
            }).unwrap();
        }
        prop_assert!(folder.finish(1000).unwrap().is_empty());
        let tree = maildir::scan_tree(&root).unwrap();
        let scanned = tree.iter().find(|f| f.path == path).unwrap();
        prop_assert_eq!(scanned.uidvalidity, Some(uidvalidity));
        prop_assert_eq!(scanned.uidnext, Some(1000));
        prop_assert_eq!(scanned.messages.len(), messages.len());
        for (i, (m, (content, flags, keywords, date))) in scanned.messages.iter().zip(&messages).enumerate() {
            prop_assert_eq!(m.uid, Some(3 * i as u32 + 1));
            prop_assert_eq!(&std::fs::read(&m.path).unwrap(), content);
            prop_assert_eq!(m.flags, *flags);
            let mut got = m.keywords.clone();
            got.sort();
            prop_assert_eq!(&got, keywords);
            prop_assert_eq!(m.mtime, *date);
        }
    }
}
