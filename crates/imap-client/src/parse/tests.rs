use super::fallback::{Cursor, fetch};
use super::*;

fn status(tag: Option<&str>, kind: Kind, code: Option<&str>, text: &str) -> Resp {
    Resp::Status {
        tag: tag.map(str::to_string),
        kind,
        code: code.map(str::to_string),
        text: text.to_string(),
    }
}

#[test]
fn appenduid_single_and_multi() {
    // RFC 4315 3: resp-code-apnd = "APPENDUID" SP nz-number SP append-uid
    assert_eq!(
        parse(b"a1 OK [APPENDUID 38505 3955] APPEND completed\r\n").unwrap(),
        status(
            Some("a1"),
            Kind::Ok,
            Some("APPENDUID 38505 3955"),
            "[APPENDUID 38505 3955] APPEND completed"
        )
    );
    // MULTIAPPEND: a uid-set, which imap-codec keeps as an unknown code.
    assert_eq!(
        parse(b"a2 OK [APPENDUID 38505 3955:3957,3960] Append completed.\r\n").unwrap(),
        status(
            Some("a2"),
            Kind::Ok,
            Some("APPENDUID 38505 3955:3957,3960"),
            "[APPENDUID 38505 3955:3957,3960] Append completed."
        )
    );
}

#[test]
fn binary_literal8_fetch() {
    // RFC 3516 4.2: "BINARY" section-binary SP (nstring / literal8)
    let mut raw = b"* 3 FETCH (UID 12 BINARY[1] ~{4}\r\n".to_vec();
    raw.extend_from_slice(&[0, 255, b'\r', b'\n']);
    raw.extend_from_slice(b")\r\n");
    assert_eq!(
        parse(&raw).unwrap(),
        Resp::Fetch {
            seq: 3,
            uid: Some(12),
            data: Some(Bytes::from(vec![0, 255, b'\r', b'\n'])),
            meta: None,
        }
    );
    // Partial: imap-codec has no origin for BINARY; the own parser takes over.
    let mut raw = b"* 3 FETCH (UID 12 BINARY[1]<2> ~{2}\r\n".to_vec();
    raw.extend_from_slice(&[0, 1]);
    raw.extend_from_slice(b" FLAGS (\\Seen))\r\n");
    assert_eq!(
        parse(&raw).unwrap(),
        Resp::Fetch {
            seq: 3,
            uid: Some(12),
            data: Some(Bytes::from(vec![0, 1])),
            meta: Some(Box::new(Meta {
                flags: Some(vec!["\\Seen".to_string()]),
                ..Meta::default()
            })),
        }
    );
    // NUL inside a plain literal (imap-codec refuses it).
    let mut raw = b"* 4 FETCH (BODY[TEXT] {3}\r\na".to_vec();
    raw.extend_from_slice(&[0, b'b']);
    raw.extend_from_slice(b" UID 13 MODSEQ (42))\r\n");
    assert_eq!(
        parse(&raw).unwrap(),
        Resp::Fetch {
            seq: 4,
            uid: Some(13),
            data: Some(Bytes::from_static(b"a\0b")),
            meta: Some(Box::new(Meta {
                modseq: Some(42),
                ..Meta::default()
            })),
        }
    );
}

#[test]
fn large_literals_are_cut_out_before_the_codec_and_come_back_whole() {
    let seen = || {
        Some(Box::new(Meta {
            flags: Some(vec!["\\Seen".to_string()]),
            ..Meta::default()
        }))
    };
    let body: Vec<u8> = (0..LITERAL_CUT_MIN + 7)
        .map(|i| b'A' + (i % 26) as u8)
        .collect();
    let fetch = |item: &str, data: &[u8]| {
        let mut raw = format!("* 9 FETCH (UID 41 {item} {{{}}}\r\n", data.len()).into_bytes();
        raw.extend_from_slice(data);
        raw.extend_from_slice(b" FLAGS (\\Seen))\r\n");
        raw
    };
    let raw = fetch("BODY[]", &body);
    let expected = Resp::Fetch {
        seq: 9,
        uid: Some(41),
        data: Some(Bytes::from(body.clone())),
        meta: seen(),
    };
    let header = format!("* 9 FETCH (UID 41 BODY[] {{{}}}\r\n", body.len()).len();
    assert_eq!(
        parse_cutting_literal(&raw),
        Some((9, Some(41), header..header + body.len(), seen()))
    );
    // The same as imap-codec parsing it whole.
    let (_, whole) = ResponseCodec::default().decode(&raw).unwrap();
    assert_eq!(from_codec(&raw, whole), expected);
    assert_eq!(parse(&raw).unwrap(), expected);
    // A literal8 with NUL and CRLF inside.
    let mut binary = body.clone();
    binary[10..14].copy_from_slice(&[0, b'\r', b'\n', 0]);
    let mut raw = format!("* 9 FETCH (UID 41 BINARY[1] ~{{{}}}\r\n", binary.len()).into_bytes();
    raw.extend_from_slice(&binary);
    raw.extend_from_slice(b")\r\n");
    assert_eq!(
        parse(&raw).unwrap(),
        Resp::Fetch {
            seq: 9,
            uid: Some(41),
            data: Some(Bytes::from(binary)),
            meta: None,
        }
    );
    // Two large literals, a literal announced past the end, or no FETCH: not cut.
    let mut two = format!("* 9 FETCH (UID 41 BODY[1] {{{}}}\r\n", body.len()).into_bytes();
    two.extend_from_slice(&body);
    two.extend_from_slice(format!(" BODY[2] {{{}}}\r\n", body.len()).as_bytes());
    two.extend_from_slice(&body);
    two.extend_from_slice(b")\r\n");
    assert_eq!(parse_cutting_literal(&two), None);
    let mut short = fetch("BODY[]", &body);
    short.truncate(short.len() - 100);
    assert_eq!(parse_cutting_literal(&short), None);
    let mut list = format!("* LIST () \"/\" {{{}}}\r\n", body.len()).into_bytes();
    list.extend_from_slice(&body);
    list.extend_from_slice(b"\r\n");
    assert_eq!(parse_cutting_literal(&list), None);
}

#[test]
fn header_fields_fetch() {
    let raw = b"* 1 FETCH (UID 7 BODY[HEADER.FIELDS (X-MAILFS-ID)] {34}\r\nX-Mailfs-Id: abc\r\n def\r\nFoo: x\r\n\r\n)\r\n";
    let resp = parse(raw).unwrap();
    let Resp::Fetch {
        uid: Some(7),
        data: Some(data),
        ..
    } = resp
    else {
        panic!("{resp:?}")
    };
    assert_eq!(header_value(&data, "x-mailfs-id"), "abc def");
    assert_eq!(header_value(&data, "foo"), "x");
    assert_eq!(header_value(b"\r\n", "foo"), "");
    // Fallback parser on the same item (MODSEQ list forces nothing, but check it).
    let mut p = Cursor { b: raw, i: 2 };
    p.token();
    p.sp().unwrap();
    p.token();
    p.sp().unwrap();
    assert!(matches!(
        fetch(&mut p, 1).unwrap(),
        Resp::Fetch {
            uid: Some(7),
            data: Some(_),
            ..
        }
    ));
    assert_eq!(
        parse(b"* 2 FETCH (UID 8 BODY[HEADER.FIELDS (X-A)] NIL)\r\n").unwrap(),
        Resp::Fetch {
            seq: 2,
            uid: Some(8),
            data: None,
            meta: None,
        }
    );
}

#[test]
fn search_and_esearch() {
    assert_eq!(
        parse(b"* SEARCH 2 84 882\r\n").unwrap(),
        Resp::Search(vec![2, 84, 882])
    );
    assert_eq!(parse(b"* SEARCH\r\n").unwrap(), Resp::Search(vec![]));
    // RFC 4731 3.1 example
    assert_eq!(
        parse(b"* ESEARCH (TAG \"A283\") UID ALL 2,10:11\r\n").unwrap(),
        Resp::Search(vec![2, 10, 11])
    );
    assert_eq!(
        parse(b"* ESEARCH (TAG \"A284\") UID COUNT 0\r\n").unwrap(),
        Resp::Search(vec![])
    );
}

#[test]
fn quota() {
    // RFC 2087 5.1
    assert_eq!(
        parse(b"* QUOTA \"User quota\" (STORAGE 10 512 MESSAGE 1 1000)\r\n").unwrap(),
        Resp::Quota(vec![
            ("STORAGE".to_string(), 10, 512),
            ("MESSAGE".to_string(), 1, 1000)
        ])
    );
    assert_eq!(
        parse(b"* QUOTAROOT INBOX \"User quota\"\r\n").unwrap(),
        Resp::Other
    );
}

#[test]
fn no_bad_bye() {
    assert_eq!(
        parse(b"a3 NO [ALREADYEXISTS] Mailbox already exists\r\n").unwrap(),
        status(
            Some("a3"),
            Kind::No,
            Some("ALREADYEXISTS"),
            "[ALREADYEXISTS] Mailbox already exists"
        )
    );
    assert_eq!(
        parse(b"a4 BAD Error in IMAP command UID: Invalid arguments.\r\n").unwrap(),
        status(
            Some("a4"),
            Kind::Bad,
            None,
            "Error in IMAP command UID: Invalid arguments."
        )
    );
    assert_eq!(
        parse(b"* BYE Server shutting down.\r\n").unwrap(),
        Resp::Bye("Server shutting down.".to_string())
    );
    assert_eq!(parse(b"+ OK\r\n").unwrap(), Resp::Continue);
    assert_eq!(parse(b"+\r\n").unwrap(), Resp::Continue);
}

#[test]
fn select_transcript() {
    let t: &[&[u8]] = &[
        b"* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n",
        b"* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted.\r\n",
        b"* 20 EXISTS\r\n",
        b"* 0 RECENT\r\n",
        b"* OK [UIDVALIDITY 1700000000] UIDs valid\r\n",
        b"* OK [UIDNEXT 21] Predicted next UID\r\n",
        b"* OK [HIGHESTMODSEQ 5] Highest\r\n",
        b"a5 OK [READ-WRITE] Select completed (0.001 + 0.000 secs).\r\n",
    ];
    let got: Vec<Resp> = t.iter().map(|r| parse(r).unwrap()).collect();
    assert_eq!(got[2], Resp::Exists(20));
    assert_eq!(
        got[4],
        status(
            None,
            Kind::Ok,
            Some("UIDVALIDITY 1700000000"),
            "[UIDVALIDITY 1700000000] UIDs valid"
        )
    );
    assert!(matches!(&got[7], Resp::Status { tag: Some(t), kind: Kind::Ok, .. } if t == "a5"));
    assert_eq!(
        parse(b"* CAPABILITY IMAP4rev1 LITERAL+ BINARY APPENDLIMIT=100 AUTH=PLAIN\r\n").unwrap(),
        Resp::Capability(
            [
                "IMAP4REV1",
                "LITERAL+",
                "BINARY",
                "APPENDLIMIT=100",
                "AUTH=PLAIN"
            ]
            .map(String::from)
            .to_vec()
        )
    );
}

#[test]
fn garbage_fetch_is_an_error() {
    assert!(matches!(
        parse(b"* 1 FETCH (UID\r\n"),
        Err(Error::Protocol(_))
    ));
    assert!(matches!(
        parse(b"* 1 FETCH (UID x)\r\n"),
        Err(Error::Protocol(_))
    ));
}

#[test]
fn mailbox_names() {
    // RFC 3501 5.1.3 example
    assert_eq!(
        utf7_encode("~peter/mail/台北/日本語"),
        "~peter/mail/&U,BTFw-/&ZeVnLIqe-"
    );
    assert_eq!(utf7_encode("A&B"), "A&-B");
    assert_eq!(mailbox("a\"b\\c"), b"\"a\\\"b\\\\c\"".to_vec());
    assert_eq!(mailbox("x\r\ny"), b"\"x&AA0ACg-y\"".to_vec());
    assert!(can_quote(b"pw 1"));
    assert!(!can_quote("pä".as_bytes()));
}

#[test]
fn fetch_with_flags_internaldate_and_modseq() {
    let meta = |flags: &[&str], date, modseq| {
        Some(Box::new(Meta {
            flags: Some(flags.iter().map(|f| f.to_string()).collect()),
            internal_date: date,
            modseq,
        }))
    };
    // MODSEQ: our own parser (imap-codec may not know it).
    let r = parse(
        b"* 2 FETCH (UID 9 FLAGS (\\Seen $Junk \\Recent) INTERNALDATE \" 7-Jul-1996 02:44:25 -0700\" MODSEQ (12345) BODY[] {3}\r\nabc)\r\n",
    )
    .unwrap();
    assert_eq!(
        r,
        Resp::Fetch {
            seq: 2,
            uid: Some(9),
            data: Some(Bytes::from_static(b"abc")),
            meta: meta(
                &["\\Seen", "$Junk", "\\Recent"],
                Some(836_732_665),
                Some(12345)
            ),
        }
    );
    let r = parse(b"* 1 FETCH (UID 4 FLAGS () MODSEQ (7))\r\n").unwrap();
    assert_eq!(
        r,
        Resp::Fetch {
            seq: 1,
            uid: Some(4),
            data: None,
            meta: meta(&[], None, Some(7)),
        }
    );
    // Without MODSEQ, through imap-codec.
    let r = parse(b"* 1 FETCH (UID 4 FLAGS (\\Answered kw))\r\n").unwrap();
    assert_eq!(
        r,
        Resp::Fetch {
            seq: 1,
            uid: Some(4),
            data: None,
            meta: meta(&["\\Answered", "kw"], None, None),
        }
    );
    // A large literal is still cut out, and the attributes kept.
    let body = vec![b'x'; LITERAL_CUT_MIN + 10];
    let mut wire = format!(
        "* 3 FETCH (UID 5 FLAGS (\\Flagged) INTERNALDATE \"01-Jan-1970 00:00:10 +0000\" MODSEQ (99) BODY[] {{{}}}\r\n",
        body.len()
    )
    .into_bytes();
    wire.extend_from_slice(&body);
    wire.extend_from_slice(b")\r\n");
    assert_eq!(
        parse_owned(wire).unwrap(),
        Resp::Fetch {
            seq: 3,
            uid: Some(5),
            data: Some(Bytes::from(body)),
            meta: meta(&["\\Flagged"], Some(10), Some(99)),
        }
    );
}

#[test]
fn dates_and_list_names() {
    assert_eq!(internal_date("01-Jan-1970 00:00:00 +0000"), Some(0));
    assert_eq!(
        internal_date("29-Feb-2024 12:00:00 +0100"),
        Some(1_709_204_400)
    );
    assert_eq!(internal_date("31-Foo-2024 12:00:00 +0100"), None);
    assert_eq!(
        utf7_decode(b"Entw&APw-rfe").as_deref(),
        Some("Entw\u{fc}rfe")
    );
    assert_eq!(utf7_decode(b"a&-b").as_deref(), Some("a&b"));
    assert_eq!(utf7_decode(b"&Jjo-"), Some("\u{263a}".to_string()));
    assert_eq!(utf7_decode(b"bad&"), None);
    assert_eq!(
        parse(b"* LIST (\\HasNoChildren) \"/\" \"Archive/Entw&APw-rfe\"\r\n").unwrap(),
        Resp::List {
            name: "Archive/Entw\u{fc}rfe".into(),
            delimiter: Some('/'),
            selectable: true
        }
    );
    assert_eq!(
        parse(b"* LIST (\\Noselect) \"/\" Archive\r\n").unwrap(),
        Resp::List {
            name: "Archive".into(),
            delimiter: Some('/'),
            selectable: false
        }
    );
    assert_eq!(
        parse(b"* LIST () \"/\" INBOX\r\n").unwrap(),
        Resp::List {
            name: "INBOX".into(),
            delimiter: Some('/'),
            selectable: true
        }
    );
}
