//! RFC 4469 CATENATE transcripts, after imaptest's `catenate` and `catenate-multiappend`.

use super::*;

const PLAIN: &str = "From: foo@example.com\r\n\r\nHello world body\r\n";
const LOOKALIKE: &str = "From: foo2@example.com\r\n\r\nLookslike: header\r\n\r\nAnother body\r\n";
const MIXED: &str = "From: m@example.com\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n\
--XX\r\nContent-Type: text/plain\r\n\r\none\r\n--XX\r\nX-Part: 2\r\n\r\ntwo\r\n--XX--\r\n";

/// A store with INBOX holding PLAIN (UID 1), LOOKALIKE (2) and MIXED (3), a folder `Out`,
/// and bob logged in; INBOX's UIDVALIDITY.
fn setup(config: Config) -> (Store, Client, u32) {
    let store = new_store();
    for content in [PLAIN, LOOKALIKE, MIXED] {
        let message = NewMessage {
            content: content.as_bytes().to_vec(),
            internal_date: 760_690_345,
            ..NewMessage::default()
        };
        store.append("bob", "INBOX", message).unwrap();
    }
    store.create_folder_path("bob", "Out").unwrap();
    let mut c = Client::new(&store, config);
    c.greeting();
    assert!(c.send("l LOGIN bob secret\r\n").contains("l OK"));
    let uidvalidity = store.status("bob", "INBOX").unwrap().uidvalidity;
    (store, c, uidvalidity)
}

/// `TEXT {n+}` and the text.
fn text(t: &str) -> String {
    format!("TEXT {{{}+}}\r\n{t}", t.len())
}

/// The untagged FETCH of one message's `BODY.PEEK[]`.
fn body(seq: usize, content: &str) -> String {
    format!(
        "* {seq} FETCH (BODY[] {{{}}}\r\n{content})\r\n",
        content.len()
    )
}

fn header_of(message: &str) -> &str {
    &message[..message.find("\r\n\r\n").unwrap() + 4]
}

transcript! {
    /// RFC 4469 5: the message is its parts joined; a URL gives what FETCH
    /// `BODY.PEEK[section]<partial>` would (RFC 5092 6), with or without UIDVALIDITY, and
    /// relative to the selected folder when it starts at `;UID=`.
    fn catenate_joins_text_and_urls() {
        let (_store, mut c, v) = setup(test_config());
        assert!(c.send("c CAPABILITY\r\n").contains(" MULTIAPPEND CATENATE "));
        let appends = [
            format!("CATENATE (URL \"/INBOX/;UID=1/;SECTION=HEADER\" {})", text("body1\r\n")),
            format!("CATENATE (URL \"/INBOX;UIDVALIDITY={v}/;uid=1/;section=header\" {})", text("body2\r\n")),
            format!("CATENATE (URL \"/INBOX/;UID=2/;SECTION=TEXT\" {})", text("body3\r\n")),
            format!("CATENATE (URL /INBOX/;UID=2/;SECTION=1 {})", text("body4\r\n")),
            format!(
                "CATENATE ({} URL \"/INBOX/;UID=1/;SECTION=1\" {})",
                text("From: new@example.com\r\nSubject: test header\r\n\r\n"),
                text("\r\nsuffix\r\n")
            ),
            "CATENATE (URL \"/INBOX/;UID=3/;SECTION=1.MIME\" URL \"/INBOX/;UID=3/;SECTION=2\")".to_string(),
            format!("CATENATE (URL \"/INBOX/;UID=2/;PARTIAL=100000.1\" {})", text("Hdr: foo\r\n\r\nbody7\r\n")),
            "CATENATE (URL \"/INBOX/;UID=2/;PARTIAL=6.4\" URL \"imap://bob@test.example/INBOX/;UID=1\")".to_string(),
        ];
        for (i, append) in appends.iter().enumerate() {
            assert_eq!(
                c.send(&format!("a{i} APPEND Out (\\Seen) {append}\r\n")),
                format!("a{i} OK [APPENDUID V {}] APPEND completed\r\n", i + 1)
            );
        }
        c.send("s SELECT INBOX\r\n");
        assert_eq!(
            c.send(&format!("r APPEND Out CATENATE (URL \";UID=2/;SECTION=TEXT\" {})\r\n", text("x\r\n"))),
            "r OK [APPENDUID V 9] APPEND completed\r\n"
        );
        c.send("s SELECT Out\r\n");
        let lookalike_text = &LOOKALIKE[header_of(LOOKALIKE).len()..];
        let expected = [
            format!("{}body1\r\n", header_of(PLAIN)),
            format!("{}body2\r\n", header_of(PLAIN)),
            format!("{lookalike_text}body3\r\n"),
            format!("{lookalike_text}body4\r\n"),
            "From: new@example.com\r\nSubject: test header\r\n\r\nHello world body\r\n\r\nsuffix\r\n".to_string(),
            // Part 1's MIME header, then part 2's body (its own header is 2.MIME).
            "Content-Type: text/plain\r\n\r\ntwo".to_string(),
            "Hdr: foo\r\n\r\nbody7\r\n".to_string(),
            format!("foo2{PLAIN}"),
            format!("{lookalike_text}x\r\n"),
        ];
        let mut want: String = expected.iter().enumerate().map(|(i, m)| body(i + 1, m)).collect();
        want.push_str("f OK FETCH completed\r\n");
        assert_eq!(c.send("f FETCH 1:* BODY.PEEK[]\r\n"), want);
    }
}

transcript! {
    /// RFC 4469 6: a URL that names nothing this user can read is `NO [BADURL url]` and
    /// nothing is stored; a missing destination is `NO [TRYCREATE]` first (RFC 9051 6.3.12).
    fn catenate_refuses_bad_urls_whole() {
        let (_store, mut c, v) = setup(test_config());
        for url in [
            "/INBOX;UIDVALIDITY=12345/;UID=1/;SECTION=HEADER".to_string(),
            format!("/INBOX;UIDVALIDITY={v}/;UID=9"),
            "/Nowhere/;UID=1".to_string(),
            "/INBOX/;UID=1/;SECTION=5".to_string(),
            "/INBOX/;UID=1/;URLAUTH=anonymous".to_string(),
            "imap://alice@test.example/INBOX/;UID=1".to_string(),
            // Relative to the selected folder, and none is.
            ";UID=1".to_string(),
        ] {
            assert_eq!(
                c.send(&format!(
                    "b APPEND Out CATENATE ({} URL \"{url}\" {})\r\n",
                    text("hdr: 1\r\n\r\n"),
                    text("hdr: 2\r\n")
                )),
                format!("b NO [BADURL {url}] Invalid or unknown URL\r\n")
            );
        }
        // MULTIAPPEND (RFC 3502 6): one bad URL, and no message is stored.
        assert_eq!(
            c.send(&format!(
                "m APPEND Out CATENATE (URL \"/INBOX/;UID=1\") CATENATE (URL \"/INBOX/;UID=7\") {}\r\n",
                "{5+}\r\nhello"
            )),
            "m NO [BADURL /INBOX/;UID=7] Invalid or unknown URL\r\n"
        );
        assert_eq!(
            c.send("n APPEND Nowhere CATENATE (URL \"/INBOX;UIDVALIDITY=12345/;UID=1\")\r\n"),
            "n NO [TRYCREATE] No such mailbox\r\n"
        );
        assert_eq!(
            c.send("t STATUS Out (MESSAGES)\r\n"),
            "* STATUS Out (MESSAGES 0)\r\nt OK STATUS completed\r\n"
        );
    }
}

transcript! {
    /// RFC 3502 with RFC 4469: CATENATE and plain messages in one MULTIAPPEND, each with
    /// its own flags.
    fn catenate_in_a_multiappend() {
        let (_store, mut c, _) = setup(test_config());
        assert_eq!(
            c.send(&format!(
                "m APPEND Out CATENATE (URL \"/INBOX/;UID=1\") (\\Answered) {{12+}}\r\nNew: x\r\n\r\nb5 \
                 CATENATE (URL \"/INBOX/;UID=2/;SECTION=HEADER\" {})\r\n",
                text("body3\r\n")
            )),
            "m OK [APPENDUID V 1:3] APPEND completed\r\n"
        );
        c.send("s SELECT Out\r\n");
        let mut want = [
            body(1, PLAIN),
            body(2, "New: x\r\n\r\nb5"),
            body(3, &format!("{}body3\r\n", header_of(LOOKALIKE))),
        ]
        .concat();
        want.push_str("f OK FETCH completed\r\n");
        assert_eq!(c.send("f FETCH 1:3 BODY.PEEK[]\r\n"), want);
        assert_eq!(
            c.send("g FETCH 2 FLAGS\r\n"),
            "* 2 FETCH (FLAGS (\\Recent \\Answered))\r\ng OK FETCH completed\r\n"
        );
    }
}

transcript! {
    /// The bounds: a built message over the APPENDLIMIT is `NO [TOOBIG]` (RFC 4469 6), more
    /// parts than `catenate_parts_max` is `NO [LIMIT]`.
    fn catenate_is_bounded() {
        let config = Config {
            literal_bytes_max: 100,
            catenate_parts_max: 3,
            ..test_config()
        };
        let (_store, mut c, _) = setup(config);
        let url = "URL \"/INBOX/;UID=2\"";
        assert_eq!(
            c.send(&format!("a APPEND Out CATENATE ({url} {url})\r\n")),
            "a NO [TOOBIG] Message larger than the APPENDLIMIT\r\n"
        );
        assert_eq!(
            c.send(&format!("b APPEND Out CATENATE ({url} {0} {0} {0})\r\n", text("x"))),
            "b NO [LIMIT] At most 3 parts per CATENATE\r\n"
        );
        assert_eq!(
            c.send(&format!("c APPEND Out CATENATE ({url} {0} {0})\r\n", text("x"))),
            "c OK [APPENDUID V 1] APPEND completed\r\n"
        );
    }
}
