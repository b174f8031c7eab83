//! FETCH transcripts: index items, cached structure, sections, partials, BINARY, \Seen.

use super::*;

const MIXED: &str = "From: Alice <alice@example.org>\r\n\
To: bob@example.org\r\n\
Subject: parts\r\n\
Message-ID: <parts@example.org>\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"XX\"\r\n\
\r\n\
preamble\r\n\
--XX\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
\r\n\
hello\r\n\
--XX\r\n\
Content-Type: application/octet-stream\r\n\
Content-Transfer-Encoding: base64\r\n\
\r\n\
AAECAw==\r\n\
--XX--\r\n";

fn setup() -> (Store, Client) {
    let store = new_store();
    deliver(&store, "bob", 2);
    store
        .append(
            "bob",
            "INBOX",
            NewMessage {
                content: MIXED.as_bytes().to_vec(),
                internal_date: 760_690_345,
                ..NewMessage::default()
            },
        )
        .unwrap();
    let mut c = Client::login(&store, "bob");
    c.send("s SELECT INBOX\r\n");
    (store, c)
}

transcript! {
    fn index_items_read_nothing() {
        let (store, mut c) = setup();
        let size1 = store.shared_view("bob", "INBOX").unwrap().1[0].size;
        assert_eq!(
            c.send("a FETCH 1 (UID FLAGS INTERNALDATE RFC822.SIZE)\r\n"),
            format!(
                "* 1 FETCH (UID 1 FLAGS (\\Recent) INTERNALDATE \"08-Feb-1994 06:52:25 +0000\" RFC822.SIZE {size1})\r\na OK FETCH completed\r\n"
            )
        );
        assert_eq!(
            c.send("b UID FETCH 2:* (FLAGS)\r\n"),
            "* 2 FETCH (UID 2 FLAGS (\\Recent))\r\n* 3 FETCH (UID 3 FLAGS (\\Recent))\r\nb OK UID FETCH completed\r\n"
        );
        assert_eq!(
            c.send("c UID FETCH 9 (FLAGS)\r\n"),
            "c OK UID FETCH completed\r\n"
        );
        assert_eq!(
            c.send("d FETCH 4 (FLAGS)\r\n"),
            "d BAD Invalid message sequence number\r\n"
        );
        let out = c.send("e FETCH 1 FAST\r\n");
        assert!(
            out.starts_with("* 1 FETCH (FLAGS (\\Recent) INTERNALDATE "),
            "{out}"
        );
    }
}

transcript! {
    fn envelope_and_bodystructure_come_from_the_cached_structure() {
        let (_store, mut c) = setup();
        let out = c.send("a FETCH 1 ENVELOPE\r\n");
        assert!(
            out.starts_with("* 1 FETCH (ENVELOPE (\"Mon, 7 Feb 1994 21:52:25 -0800\" \"m1\" ((\"Alice\" NIL \"alice\" \"example.org\"))"),
            "{out}"
        );
        assert!(out.contains("\"<m1@example.org>\")"), "{out}");
        let out = c.send("b FETCH 3 BODYSTRUCTURE\r\n");
        assert!(
            out.contains("\"MIXED\"") || out.contains("\"mixed\""),
            "{out}"
        );
        assert!(out.contains("BASE64") || out.contains("base64"), "{out}");
        let out = c.send("c FETCH 3 BODY\r\n");
        assert!(out.starts_with("* 3 FETCH (BODY (("), "{out}");
    }
}

transcript! {
    fn sections_partials_and_peek() {
        let (_store, mut c) = setup();
        assert_eq!(
            c.send("a FETCH 3 BODY.PEEK[1]\r\n"),
            "* 3 FETCH (BODY[1] {5}\r\nhello)\r\na OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("b FETCH 3 BODY.PEEK[2.MIME]\r\n"),
            "* 3 FETCH (BODY[2.MIME] {77}\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n)\r\nb OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("c FETCH 3 BODY.PEEK[HEADER.FIELDS (Subject)]\r\n"),
            "* 3 FETCH (BODY[HEADER.FIELDS (SUBJECT)] {18}\r\nSubject: parts\r\n\r\n)\r\nc OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("d FETCH 1 BODY.PEEK[TEXT]<2.3>\r\n"),
            "* 1 FETCH (BODY[TEXT]<2> {3}\r\ndy )\r\nd OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("e FETCH 1 BODY.PEEK[TEXT]<100.3>\r\n"),
            "* 1 FETCH (BODY[TEXT]<100> {0}\r\n)\r\ne OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("f FETCH 3 BODY.PEEK[9]\r\n"),
            "* 3 FETCH (BODY[9] {0}\r\n)\r\nf OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("g FETCH 1 FLAGS\r\n"),
            "* 1 FETCH (FLAGS (\\Recent))\r\ng OK FETCH completed\r\n"
        );
        // Without PEEK, \Seen is set and reported.
        let out = c.send("h FETCH 1 BODY[TEXT]\r\n");
        assert_eq!(
            out,
            "* 1 FETCH (BODY[TEXT] {8}\r\nbody 1\r\n FLAGS (\\Recent \\Seen))\r\nh OK FETCH completed\r\n"
        );
        let out = c.send("i FETCH 2 RFC822.HEADER\r\n");
        assert!(out.starts_with("* 2 FETCH (RFC822.HEADER {"), "{out}");
        assert!(!out.contains("Seen"));
    }
}

transcript! {
    fn binary_decodes_and_sizes() {
        let (_store, mut c) = setup();
        assert_eq!(
            c.send("a FETCH 3 (BINARY.PEEK[2] BINARY.SIZE[2])\r\n"),
            "* 3 FETCH (BINARY[2] ~{4}\r\n\0\x01\x02\x03 BINARY.SIZE[2] 4)\r\na OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("b FETCH 3 BINARY.PEEK[1]\r\n"),
            "* 3 FETCH (BINARY[1] {5}\r\nhello)\r\nb OK FETCH completed\r\n"
        );
    }
}

transcript! {
    fn whole_messages_and_condstore_modseq() {
        let (store, mut c) = setup();
        let content = String::from_utf8(store.read("bob", "INBOX", 2).unwrap()).unwrap();
        assert_eq!(
            c.send("a UID FETCH 2 BODY.PEEK[]\r\n"),
            format!(
                "* 2 FETCH (UID 2 BODY[] {{{}}}\r\n{content})\r\na OK UID FETCH completed\r\n",
                content.len()
            )
        );
        assert_eq!(
            c.send("b FETCH 1 (FLAGS MODSEQ)\r\n"),
            // RFC 7162 3.1: this FETCH enabled CONDSTORE in a selected mailbox.
            "* OK [HIGHESTMODSEQ 4] Highest\r\n* 1 FETCH (FLAGS (\\Recent) MODSEQ (2))\r\nb OK FETCH completed\r\n"
        );
        // Only the first time.
        assert_eq!(
            c.send("b2 FETCH 1 (MODSEQ)\r\n"),
            "* 1 FETCH (MODSEQ (2))\r\nb2 OK FETCH completed\r\n"
        );
        c.send("c STORE 2 +FLAGS.SILENT (\\Seen)\r\n");
        assert_eq!(
            c.send("d FETCH 1:* (FLAGS) (CHANGEDSINCE 4)\r\n"),
            "* 2 FETCH (FLAGS (\\Recent \\Seen) MODSEQ (5))\r\nd OK FETCH completed\r\n"
        );
    }
}

transcript! {
    /// RFC 9051 4.3 and RFC 3516 4.3: a message stored with a NUL (a literal8 APPEND) never
    /// sends it in a plain literal: BODY shows it as 0x80 (same length), BINARY as literal8.
    fn a_stored_nul_is_never_sent_in_a_plain_literal() {
        let (store, mut c) = setup();
        let message = "Subject: nul\r\n\r\na\0b\r\n";
        let out = c.send(&format!("a APPEND INBOX ~{{{}}}\r\n", message.len()));
        assert!(out.starts_with('+'), "{out}");
        let out = c.send(&format!("{message}\r\n"));
        assert!(out.contains("a OK"), "{out}");
        let uid = store.uids("bob", "INBOX").unwrap().last().copied().unwrap();
        let body = c.send(&format!("b UID FETCH {uid} BODY.PEEK[1]\r\n"));
        assert!(!body.contains('\0'), "{body:?}");
        assert!(body.contains("BODY[1] {5}\r\na\u{fffd}b\r\n)"), "{body:?}");
        let whole = c.send(&format!("c UID FETCH {uid} BODY.PEEK[]\r\n"));
        assert!(!whole.contains('\0'), "{whole:?}");
        let binary = c.send(&format!("d UID FETCH {uid} BINARY.PEEK[1]\r\n"));
        assert!(binary.contains("BINARY[1] ~{5}\r\na\0b\r\n)"), "{binary:?}");
    }
}
