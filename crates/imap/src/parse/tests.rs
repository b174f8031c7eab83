use super::*;

fn ok(line: &str) -> Request {
    match parse(line.as_bytes()) {
        Ok((_, r)) => r,
        Err((_, e)) => panic!("{line:?}: {e}"),
    }
}

fn bad(line: &str) -> String {
    match parse(line.as_bytes()) {
        Ok(_) => panic!("{line:?} parsed"),
        Err((_, e)) => e,
    }
}

#[test]
fn multiappend_with_flags_dates_and_literal8() {
    let r = ok(
        "a APPEND Sent (\\Seen $Work) \"05-Jan-2024 10:00:00 +0100\" {5}\r\nhello ~{3}\r\na\0b\r\n",
    );
    let Request::Append { mailbox, messages } = r else {
        panic!("not an append")
    };
    assert_eq!(mailbox, "Sent");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].flags, Flags::SEEN);
    assert_eq!(messages[0].keywords, vec!["$Work".to_string()]);
    assert_eq!(messages[0].date, Some(1_704_445_200));
    assert!(matches!(&messages[0].data, AppendData::Literal(m) if m == b"hello"));
    assert!(matches!(&messages[1].data, AppendData::Literal(m) if m == b"a\0b"));
}

/// RFC 4469 5: CATENATE parts, TEXT literals and URL strings, with MULTIAPPEND.
#[test]
fn catenate_parts_and_multiappend() {
    let r = ok(
        "a APPEND Drafts (\\Seen) CATENATE (URL \"/INBOX;UIDVALIDITY=7/;UID=20\" \
         TEXT {3}\r\nabc URL /INBOX/;UID=2/;SECTION=1 TEXT ~{2}\r\n\0x) {1}\r\nm\r\n",
    );
    let Request::Append { messages, .. } = r else {
        panic!("not an append")
    };
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].flags, Flags::SEEN);
    let AppendData::Catenate(parts) = &messages[0].data else {
        panic!("not a catenate")
    };
    let parts: Vec<String> = parts
        .iter()
        .map(|p| match p {
            CatenatePart::Text(t) => format!("text {}", String::from_utf8_lossy(t)),
            CatenatePart::Url(u) => format!("url {u}"),
        })
        .collect();
    assert_eq!(
        parts,
        [
            "url /INBOX;UIDVALIDITY=7/;UID=20",
            "text abc",
            "url /INBOX/;UID=2/;SECTION=1",
            "text \0x"
        ]
    );
    assert!(matches!(&messages[1].data, AppendData::Literal(m) if m == b"m"));
    for (line, why) in [
        ("a APPEND x CATENATE ()\r\n", "part"),
        ("a APPEND x CATENATE (TEXT \"abc\")\r\n", "literal"),
        ("a APPEND x CATENATE (TEXT {3}\r\na\0b)\r\n", "NUL"),
        ("a APPEND x CATENATE (FILE /x)\r\n", "TEXT or URL"),
        ("a APPEND x CATENATE (URL /x\r\n", "part list"),
        ("a APPEND x CATENATE URL /x\r\n", "CATENATE"),
    ] {
        assert!(bad(line).contains(why), "{line:?}: {}", bad(line));
    }
}

#[test]
fn append_errors() {
    assert!(bad("a APPEND\r\n").contains("mailbox"));
    assert!(bad("a APPEND x\r\n").contains("message"));
    assert!(bad("a APPEND x (\\Bogus) {1}\r\nx\r\n").contains("flag"));
    assert!(bad("a APPEND x \"not a date\" {1}\r\nx\r\n").contains("date"));
    assert!(bad("a APPEND x {3}\r\na\0b\r\n").contains("NUL"));
    assert!(bad("a APPEND x {10}\r\nshort\r\n").contains("literal"));
}

#[test]
fn list_extended_and_status() {
    let Request::List(l) = ok(
        "a LIST (SUBSCRIBED RECURSIVEMATCH) \"\" (\"INBOX\" \"Arch*\") RETURN (CHILDREN STATUS (MESSAGES UNSEEN))\r\n",
    ) else {
        panic!()
    };
    assert!(l.select_subscribed && l.recursive_match && l.return_children && l.extended);
    assert_eq!(l.patterns, vec!["INBOX".to_string(), "Arch*".to_string()]);
    assert_eq!(
        l.return_status,
        Some(vec!["MESSAGES".into(), "UNSEEN".into()])
    );
    let Request::List(l) = ok("a LIST \"\" %\r\n") else {
        panic!()
    };
    assert!(!l.extended);
    assert_eq!(l.patterns, vec!["%".to_string()]);
    assert!(bad("a LIST (RECURSIVEMATCH) \"\" *\r\n").contains("RECURSIVEMATCH"));
    assert!(bad("a LIST \"\" * RETURN (BOGUS)\r\n").contains("return"));
    assert!(bad("a LIST \"\" * RETURN (STATUS (NOPE))\r\n").contains("STATUS"));
}

#[test]
fn search_return_options_and_plain_search() {
    let Request::Search { uid, ret, criteria } =
        ok("a UID SEARCH RETURN (MIN COUNT) SUBJECT \"x y\" UNSEEN\r\n")
    else {
        panic!()
    };
    assert!(uid);
    assert_eq!(ret, Some(vec![SearchReturn::Min, SearchReturn::Count]));
    assert_eq!(criteria.as_ref().len(), 2);
    let Request::Search { ret, .. } = ok("a SEARCH RETURN () ALL\r\n") else {
        panic!()
    };
    assert_eq!(ret, Some(vec![SearchReturn::All]));
    let Request::Search { ret, uid, .. } = ok("a SEARCH ALL\r\n") else {
        panic!()
    };
    assert_eq!((ret, uid), (None, false));
    // RFC 5182 2.4.
    let Request::Search { ret, .. } = ok("a SEARCH RETURN (SAVE MIN) ALL\r\n") else {
        panic!()
    };
    assert_eq!(ret, Some(vec![SearchReturn::Save, SearchReturn::Min]));
    let Request::Search { ret, .. } = ok("a SEARCH RETURN (PARTIAL 5:1 UPDATE CONTEXT) ALL\r\n")
    else {
        panic!()
    };
    assert_eq!(
        ret,
        Some(vec![
            SearchReturn::Partial(1, 5),
            SearchReturn::Update,
            SearchReturn::Context
        ])
    );
    assert!(bad("a SEARCH RETURN (FUZZY) ALL\r\n").contains("RETURN"));
    assert!(bad("a SEARCH RETURN (PARTIAL 0:5) ALL\r\n").contains("PARTIAL"));
}

#[test]
fn everything_else_goes_to_imap_codec() {
    assert!(matches!(
        ok("a NOOP\r\n"),
        Request::Codec(CommandBody::Noop)
    ));
    assert!(matches!(
        ok("a UID FETCH 1:* (FLAGS)\r\n"),
        Request::Codec(CommandBody::Fetch { uid: true, .. })
    ));
    assert!(matches!(
        ok("a uid expunge 1:3\r\n"),
        Request::Codec(CommandBody::ExpungeUid { .. })
    ));
    assert!(bad("a FROBNICATE\r\n").contains("unknown"));
    assert!(matches!(parse(b"(bad NOOP\r\n"), Err((None, _))));
}

proptest::proptest! {
    /// The parser sees only what the framer hands it, but must not panic on anything.
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        let _ = parse(&bytes);
        let mut append = b"a APPEND x ".to_vec();
        append.extend_from_slice(&bytes);
        let _ = parse(&append);
        let mut list = b"a LIST ".to_vec();
        list.extend_from_slice(&bytes);
        let _ = parse(&list);
        let mut search = b"a SEARCH RETURN ".to_vec();
        search.extend_from_slice(&bytes);
        let _ = parse(&search);
    }
}
