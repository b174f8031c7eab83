use std::ops::Range;

use proptest::prelude::*;

use super::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn at(content: &[u8], range: Range<u64>) -> &[u8] {
    &content[range.start as usize..range.end as usize]
}

/// Lines of `width` characters plus CRLF, `lines` of them, then `tail` characters.
fn filler(lines: usize, width: usize, tail: usize) -> String {
    let mut s = String::new();
    for _ in 0..lines {
        s.push_str(&"a".repeat(width));
        s.push_str("\r\n");
    }
    s.push_str(&"b".repeat(tail));
    s
}

#[test]
fn rfc3501_envelope_example() {
    // RFC 3501 7.4.2's FETCH example, from the header it describes.
    let m = b"Date: Wed, 17 Jul 1996 02:23:25 -0700 (PDT)\r\n\
From: Terry Gray <gray@cac.washington.edu>\r\n\
Subject: IMAP4rev1 WG mtg summary and minutes\r\n\
To: imap@cac.washington.edu\r\n\
cc: minutes@CNRI.Reston.VA.US, John Klensin <KLENSIN@MIT.EDU>\r\n\
Message-Id: <B27397-0100000@cac.washington.edu>\r\n\
MIME-Version: 1.0\r\n\
Content-Type: TEXT/PLAIN; CHARSET=US-ASCII\r\n\
\r\n\
Hello\r\n";
    let s = Structure::parse(m);
    assert_eq!(
        text(s.envelope()),
        "(\"Wed, 17 Jul 1996 02:23:25 -0700 (PDT)\" \"IMAP4rev1 WG mtg summary and minutes\" \
((\"Terry Gray\" NIL \"gray\" \"cac.washington.edu\")) \
((\"Terry Gray\" NIL \"gray\" \"cac.washington.edu\")) \
((\"Terry Gray\" NIL \"gray\" \"cac.washington.edu\")) \
((NIL NIL \"imap\" \"cac.washington.edu\")) \
((NIL NIL \"minutes\" \"CNRI.Reston.VA.US\")(\"John Klensin\" NIL \"KLENSIN\" \"MIT.EDU\")) \
NIL NIL \"<B27397-0100000@cac.washington.edu>\")"
    );
}

#[test]
fn rfc3501_single_part_example() {
    // RFC 3501 7.4.2: BODY ("TEXT" "PLAIN" ("CHARSET" "US-ASCII") NIL NIL "7BIT" 3028 92).
    // Dovecot writes the same in lower case; this crate writes the RFC's upper case
    // throughout. No Content-Type: RFC 2045 5.2's default is spelled out.
    let m = format!("Subject: x\r\n\r\n{}\r\n", filler(91, 31, 23));
    let s = Structure::parse(m.as_bytes());
    assert_eq!(
        text(s.body()),
        "(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 3028 92)"
    );
    assert_eq!(
        text(s.body_structure()),
        "(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 3028 92 NIL NIL NIL NIL)"
    );
}

#[test]
fn rfc3501_multipart_example() {
    let m = format!(
        "From: a@b.example\r\n\
MIME-Version: 1.0\r\n\
Content-Type: MULTIPART/MIXED; BOUNDARY=\"b\"\r\n\
\r\n\
--b\r\n\
Content-Type: TEXT/PLAIN; CHARSET=US-ASCII\r\n\
\r\n\
{}\r\n\
--b\r\n\
Content-Type: TEXT/PLAIN; CHARSET=US-ASCII; NAME=cc.diff\r\n\
Content-ID: <960723163407.20117h@cac.washington.edu>\r\n\
Content-Description: Compiler diff\r\n\
Content-Transfer-Encoding: BASE64\r\n\
\r\n\
{}\r\n\
--b--\r\n",
        filler(23, 48, 2),
        filler(73, 60, 28)
    );
    let s = Structure::parse(m.as_bytes());
    assert_eq!(
        text(s.body()),
        "((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 1152 23)\
(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\" \"NAME\" \"cc.diff\") \
\"<960723163407.20117h@cac.washington.edu>\" \"Compiler diff\" \"BASE64\" 4554 73) \"MIXED\")"
    );
    assert_eq!(s.part(&[2]).unwrap().encoding(), Encoding::Base64);
    assert_eq!(s.part(&[1]).unwrap().encoding(), Encoding::SevenBit);
}

const SIMPLE: &[u8] = b"Date: Mon, 7 Feb 1994 21:52:25 -0800\r\n\
From: Fred Foobar <foobar@Blurdybloop.example>\r\n\
Subject: afternoon meeting\r\n\
To: mooch@owatagu.siam.edu.example\r\n\
Message-Id: <B27397-0100000@Blurdybloop.example>\r\n\
\r\n\
Hello Joe, do you think we can meet at 3:30 tomorrow?\r\n";

#[test]
fn simple_text_message() {
    let s = Structure::parse(SIMPLE);
    assert_eq!(
        text(s.envelope()),
        "(\"Mon, 7 Feb 1994 21:52:25 -0800\" \"afternoon meeting\" \
((\"Fred Foobar\" NIL \"foobar\" \"Blurdybloop.example\")) \
((\"Fred Foobar\" NIL \"foobar\" \"Blurdybloop.example\")) \
((\"Fred Foobar\" NIL \"foobar\" \"Blurdybloop.example\")) \
((NIL NIL \"mooch\" \"owatagu.siam.edu.example\")) NIL NIL NIL \
\"<B27397-0100000@Blurdybloop.example>\")"
    );
    assert_eq!(
        text(s.body_structure()),
        "(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 55 1 NIL NIL NIL NIL)"
    );
    let header = at(SIMPLE, s.header_range());
    assert!(header.starts_with(b"Date: "));
    assert!(header.ends_with(b"Blurdybloop.example>\r\n\r\n"));
    assert_eq!(
        at(SIMPLE, s.text_range()),
        b"Hello Joe, do you think we can meet at 3:30 tomorrow?\r\n"
    );
    // RFC 9051 6.4.5: a non-multipart message's part 1 is its body.
    let one = s.part(&[1]).unwrap();
    assert_eq!(one.body_range(), s.text_range());
    assert_eq!(one.mime_header_range(), s.header_range());
    assert_eq!(one.message_header_range(), None);
    assert!(s.part(&[]).is_none());
    assert!(s.part(&[0]).is_none());
    assert!(s.part(&[2]).is_none());
    assert!(s.part(&[1, 1]).is_none());
    // Compact: a few hundred bytes.
    assert!(s.to_bytes().len() < 600, "{}", s.to_bytes().len());
}

const ALTERNATIVE: &[u8] = b"From: a@b.example\r\n\
Content-Type: multipart/alternative; boundary=\"alt\"\r\n\
\r\n\
This is a multi-part message.\r\n\
--alt\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
caf=C3=A9\r\n\
au lait\r\n\
--alt\r\n\
Content-Type: text/html; charset=utf-8\r\n\
\r\n\
<p>caf\xc3\xa9</p>\r\n\
--alt--\r\n";

#[test]
fn multipart_alternative() {
    let s = Structure::parse(ALTERNATIVE);
    assert_eq!(
        text(s.body_structure()),
        "((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"utf-8\") NIL NIL \"QUOTED-PRINTABLE\" 18 1 NIL NIL NIL NIL)\
(\"TEXT\" \"HTML\" (\"CHARSET\" \"utf-8\") NIL NIL \"7BIT\" 12 0 NIL NIL NIL NIL) \
\"ALTERNATIVE\" (\"BOUNDARY\" \"alt\") NIL NIL NIL)"
    );
    assert_eq!(
        text(s.body()),
        "((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"utf-8\") NIL NIL \"QUOTED-PRINTABLE\" 18 1)\
(\"TEXT\" \"HTML\" (\"CHARSET\" \"utf-8\") NIL NIL \"7BIT\" 12 0) \"ALTERNATIVE\")"
    );
    let plain = s.part(&[1]).unwrap();
    assert_eq!(at(ALTERNATIVE, plain.body_range()), b"caf=C3=A9\r\nau lait");
    assert_eq!(
        at(ALTERNATIVE, plain.mime_header_range()),
        b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
    );
    assert_eq!(plain.encoding(), Encoding::QuotedPrintable);
    assert_eq!(
        decode_binary(plain.encoding(), at(ALTERNATIVE, plain.body_range())).unwrap(),
        "café\r\nau lait".as_bytes()
    );
    let html = s.part(&[2]).unwrap();
    assert_eq!(at(ALTERNATIVE, html.body_range()), "<p>café</p>".as_bytes());
    assert!(s.part(&[3]).is_none());
    // The top-level text of a multipart is the whole MIME body, preamble included.
    assert!(at(ALTERNATIVE, s.text_range()).starts_with(b"This is a multi-part"));
    assert!(at(ALTERNATIVE, s.text_range()).ends_with(b"--alt--\r\n"));
}

const MIXED: &[u8] = b"From: a@b.example\r\n\
Subject: report\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"XX\"\r\n\
\r\n\
--XX\r\n\
Content-Type: text/plain\r\n\
\r\n\
See attached.\r\n\
--XX\r\n\
Content-Type: application/octet-stream; name=\"x.bin\"\r\n\
Content-Disposition: attachment; filename=\"x.bin\"\r\n\
Content-Transfer-Encoding: base64\r\n\
Content-Language: en, de\r\n\
Content-Location: http://example.com/x.bin\r\n\
\r\n\
AAECAwQF\r\n\
Bgc=\r\n\
--XX--\r\n";

#[test]
fn multipart_mixed_with_base64_attachment() {
    let s = Structure::parse(MIXED);
    assert_eq!(
        text(s.body_structure()),
        "((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 13 0 NIL NIL NIL NIL)\
(\"APPLICATION\" \"OCTET-STREAM\" (\"NAME\" \"x.bin\") NIL NIL \"BASE64\" 14 NIL \
(\"ATTACHMENT\" (\"FILENAME\" \"x.bin\")) (\"en\" \"de\") \"http://example.com/x.bin\") \
\"MIXED\" (\"BOUNDARY\" \"XX\") NIL NIL NIL)"
    );
    assert_eq!(
        text(s.body()),
        "((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 13 0)\
(\"APPLICATION\" \"OCTET-STREAM\" (\"NAME\" \"x.bin\") NIL NIL \"BASE64\" 14) \"MIXED\")"
    );
    let attachment = s.part(&[2]).unwrap();
    assert_eq!(attachment.encoding(), Encoding::Base64);
    assert_eq!(at(MIXED, attachment.body_range()), b"AAECAwQF\r\nBgc=");
    assert_eq!(
        decode_binary(attachment.encoding(), at(MIXED, attachment.body_range())).unwrap(),
        [0, 1, 2, 3, 4, 5, 6, 7]
    );
    assert!(at(MIXED, attachment.mime_header_range()).starts_with(b"Content-Type: application"));
    assert!(at(MIXED, attachment.mime_header_range()).ends_with(b"x.bin\r\n\r\n"));
}

const NESTED: &[u8] = b"From: outer@a.example\r\n\
Subject: fwd\r\n\
Content-Type: multipart/mixed; boundary=XX\r\n\
\r\n\
--XX\r\n\
Content-Type: text/plain\r\n\
\r\n\
see below\r\n\
--XX\r\n\
Content-Type: message/rfc822\r\n\
Content-Description: forwarded\r\n\
\r\n\
From: Inner <inner@c.example>\r\n\
Subject: inner\r\n\
Content-Type: multipart/alternative; boundary=YY\r\n\
\r\n\
--YY\r\n\
\r\n\
plain\r\n\
--YY\r\n\
Content-Type: text/html\r\n\
\r\n\
<b>x</b>\r\n\
--YY--\r\n\
--XX--\r\n";

/// RFC 9051 6.4.5, RFC 2046 5.1.1: `[n.TEXT]` of an attached multipart message is its whole
/// body, the epilogue after its closing boundary included.
#[test]
fn an_attached_messages_text_keeps_its_epilogue() {
    let m: &[u8] = b"Content-Type: multipart/mixed; boundary=XX\r\n\
\r\n\
--XX\r\n\
Content-Type: message/rfc822\r\n\
\r\n\
Subject: inner\r\n\
Content-Type: multipart/alternative; boundary=YY\r\n\
\r\n\
--YY\r\n\
\r\n\
plain\r\n\
--YY--\r\n\
the inner epilogue\r\n\
--XX--\r\n";
    let s = Structure::parse(m);
    let text = at(m, s.part(&[1]).unwrap().message_text_range().unwrap());
    assert_eq!(text, b"--YY\r\n\r\nplain\r\n--YY--\r\nthe inner epilogue");
    assert_eq!(
        at(m, s.part(&[1]).unwrap().body_range()),
        b"Subject: inner\r\nContent-Type: multipart/alternative; boundary=YY\r\n\r\n--YY\r\n\r\nplain\r\n--YY--\r\nthe inner epilogue"
    );
}

/// The same with prologues and epilogues at both levels, blank lines around them (the shape
/// of the compliance suites' MIME messages).
#[test]
fn an_attached_messages_text_keeps_its_epilogue_between_blank_lines() {
    let m: &[u8] = b"From: user@domain.org\r\n\
Content-Type: multipart/mixed; boundary=\"foo bar\"\r\n\
\r\n\
Root MIME prologue\r\n\
\r\n\
--foo bar\r\n\
Content-Type: message/rfc822\r\n\
\r\n\
From: sub@domain.org\r\n\
Subject: submsg\r\n\
Content-Type: multipart/alternative; boundary=\"sub1\"\r\n\
\r\n\
Sub MIME prologue\r\n\
--sub1\r\n\
Content-Type: text/plain\r\n\
\r\n\
Sub text\r\n\
--sub1\r\n\
Content-Type: text/html\r\n\
\r\n\
Sub html\r\n\
--sub1--\r\n\
\r\n\
Sub MIME epilogue\r\n\
\r\n\
--foo bar--\r\n\
Root MIME epilogue\r\n";
    let s = Structure::parse(m);
    let part = s.part(&[1]).unwrap();
    let text = at(m, part.message_text_range().unwrap());
    assert_eq!(
        String::from_utf8_lossy(text),
        "Sub MIME prologue\r\n--sub1\r\nContent-Type: text/plain\r\n\r\nSub text\r\n\
--sub1\r\nContent-Type: text/html\r\n\r\nSub html\r\n--sub1--\r\n\r\nSub MIME epilogue\r\n"
    );
    assert!(String::from_utf8_lossy(at(m, part.body_range())).ends_with("Sub MIME epilogue\r\n"));
}

#[test]
fn nested_message_rfc822() {
    let s = Structure::parse(NESTED);
    assert_eq!(
        text(s.body()),
        "((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 9 0)\
(\"MESSAGE\" \"RFC822\" NIL NIL \"forwarded\" \"7BIT\" 163 \
(NIL \"inner\" ((\"Inner\" NIL \"inner\" \"c.example\")) ((\"Inner\" NIL \"inner\" \"c.example\")) \
((\"Inner\" NIL \"inner\" \"c.example\")) NIL NIL NIL NIL NIL) \
((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 5 0)\
(\"TEXT\" \"HTML\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 8 0) \"ALTERNATIVE\") 11) \"MIXED\")"
    );
    assert!(text(s.body_structure()).contains(
        "\"ALTERNATIVE\" (\"BOUNDARY\" \"YY\") NIL NIL NIL) 11 NIL NIL NIL NIL) \"MIXED\""
    ));
    let message = s.part(&[2]).unwrap();
    assert!(at(NESTED, message.body_range()).starts_with(b"From: Inner"));
    assert!(at(NESTED, message.body_range()).ends_with(b"--YY--"));
    let header = at(NESTED, message.message_header_range().unwrap());
    assert!(header.starts_with(b"From: Inner <inner@c.example>\r\n"));
    assert!(header.ends_with(b"boundary=YY\r\n\r\n"));
    let inner_text = at(NESTED, message.message_text_range().unwrap());
    assert!(inner_text.starts_with(b"--YY\r\n") && inner_text.ends_with(b"--YY--"));
    // RFC 9051 6.4.5: [2.1] is part 1 of the message inside part 2.
    assert_eq!(at(NESTED, s.part(&[2, 1]).unwrap().body_range()), b"plain");
    assert_eq!(
        at(NESTED, s.part(&[2, 2]).unwrap().body_range()),
        b"<b>x</b>"
    );
    assert_eq!(
        at(NESTED, s.part(&[2, 2]).unwrap().mime_header_range()),
        b"Content-Type: text/html\r\n\r\n"
    );
    assert!(s.part(&[2, 3]).is_none());
    assert!(s.part(&[1, 1]).is_none());
    assert!(s.part(&[2, 1, 1]).is_none());
}

#[test]
fn nested_non_multipart_message() {
    // A top-level message/rfc822 body: [1] is the body (the encapsulated message), and since
    // that message is not multipart, [1.1] is its body.
    let m = b"Content-Type: message/rfc822\r\n\r\nFrom: a@b\r\nSubject: s\r\n\r\ninner\r\n";
    let s = Structure::parse(m);
    assert_eq!(
        text(s.body()),
        "(\"MESSAGE\" \"RFC822\" NIL NIL NIL \"7BIT\" 32 \
(NIL \"s\" ((NIL NIL \"a\" \"b\")) ((NIL NIL \"a\" \"b\")) ((NIL NIL \"a\" \"b\")) NIL NIL NIL NIL NIL) \
(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 7 1) 4)"
    );
    let one = s.part(&[1]).unwrap();
    assert_eq!(
        at(m, one.message_header_range().unwrap()),
        b"From: a@b\r\nSubject: s\r\n\r\n"
    );
    assert_eq!(at(m, one.message_text_range().unwrap()), b"inner\r\n");
    assert_eq!(at(m, s.part(&[1, 1]).unwrap().body_range()), b"inner\r\n");
    assert!(s.part(&[1, 2]).is_none());
}

#[test]
fn digest_parts_default_to_message_rfc822() {
    // RFC 2046 5.1.5.
    let m = b"Content-Type: multipart/digest; boundary=D\r\n\r\n--D\r\n\r\n\
From: x@y\r\nSubject: one\r\n\r\nfirst\r\n--D--\r\n";
    let s = Structure::parse(m);
    assert!(
        text(s.body()).starts_with("((\"MESSAGE\" \"RFC822\" NIL NIL NIL \"7BIT\" 32 (NIL \"one\""),
        "{}",
        text(s.body())
    );
    assert_eq!(at(m, s.part(&[1, 1]).unwrap().body_range()), b"first");
}

#[test]
fn encoded_message_rfc822_is_opaque_and_swallows_nothing() {
    // RFC 2046 5.2.1 forbids it; it happens. The part after it must survive.
    let m = b"Content-Type: multipart/mixed; boundary=XX\r\n\r\n--XX\r\n\
Content-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n\
RnJvbTogYUBiDQoNCmhp\r\n--XX\r\nContent-Type: text/plain\r\n\r\nafter\r\n--XX--\r\n";
    let s = Structure::parse(m);
    assert_eq!(
        text(s.body()),
        "((\"MESSAGE\" \"RFC822\" NIL NIL NIL \"BASE64\" 20 (NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL) \
(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 0 0) 0)\
(\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 5 0) \"MIXED\")"
    );
    let encoded = s.part(&[1]).unwrap();
    assert_eq!(at(m, encoded.body_range()), b"RnJvbTogYUBiDQoNCmhp");
    assert_eq!(
        decode_binary(encoded.encoding(), at(m, encoded.body_range())).unwrap(),
        b"From: a@b\r\n\r\nhi"
    );
    assert!(s.part(&[1, 1]).is_none());
    assert_eq!(at(m, s.part(&[2]).unwrap().body_range()), b"after");
}

#[test]
fn multipart_without_boundary_is_opaque() {
    let m = b"Content-Type: multipart/mixed\r\nContent-Disposition: inline\r\n\r\nno boundary\r\n";
    let s = Structure::parse(m);
    assert_eq!(
        text(s.body_structure()),
        "(\"APPLICATION\" \"OCTET-STREAM\" NIL NIL NIL \"7BIT\" 13 NIL (\"INLINE\" NIL) NIL NIL)"
    );
}

#[test]
fn missing_headers() {
    // No From: Sender and Reply-To have nothing to default to.
    let s = Structure::parse(b"Subject: lonely\r\n\r\nbody\r\n");
    assert_eq!(
        text(s.envelope()),
        "(NIL \"lonely\" NIL NIL NIL NIL NIL NIL NIL NIL)"
    );
    // A header and no body.
    let m = b"From: a@b.example\r\nSubject: x\r\n";
    let s = Structure::parse(m);
    assert_eq!(s.header_range(), 0..m.len() as u64);
    assert_eq!(s.text_range(), m.len() as u64..m.len() as u64);
    assert!(text(s.body()).contains("\"7BIT\" 0 0)"));
    // Nothing at all.
    for m in [&b""[..], b"\r\n", b"   "] {
        let s = Structure::parse(m);
        assert_eq!(s.envelope(), b"(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)");
        assert_eq!(s.header_range().end, s.text_range().start);
        assert_eq!(s.text_range().end, m.len() as u64);
    }
    // An empty header: the body starts after the blank line.
    let m = b"\r\nbody only";
    let s = Structure::parse(m);
    assert_eq!(at(m, s.header_range()), b"\r\n");
    assert_eq!(at(m, s.text_range()), b"body only");
}

#[test]
fn sender_and_reply_to_default_to_from() {
    // RFC 3501 7.4.2: absent, or present but empty.
    let s = Structure::parse(b"From: a@b.example\r\nSender:\r\nReply-To: r@b.example\r\n\r\nx");
    assert_eq!(
        text(s.envelope()),
        "(NIL NIL ((NIL NIL \"a\" \"b.example\")) ((NIL NIL \"a\" \"b.example\")) \
((NIL NIL \"r\" \"b.example\")) NIL NIL NIL NIL NIL)"
    );
}

#[test]
fn group_addresses() {
    let m = b"From: a@x.example\r\n\
To: undisclosed-recipients:;\r\n\
Cc: friends: b@x.example, Carl <c@x.example>;, d@y.example\r\n\
Bcc: local\r\n\
\r\n\
x\r\n";
    let s = Structure::parse(m);
    assert_eq!(
        text(s.envelope()),
        "(NIL NIL ((NIL NIL \"a\" \"x.example\")) ((NIL NIL \"a\" \"x.example\")) \
((NIL NIL \"a\" \"x.example\")) \
((NIL NIL \"undisclosed-recipients\" NIL)(NIL NIL NIL NIL)) \
((NIL NIL \"friends\" NIL)(NIL NIL \"b\" \"x.example\")(\"Carl\" NIL \"c\" \"x.example\")\
(NIL NIL NIL NIL)(NIL NIL \"d\" \"y.example\")) \
((NIL NIL \"local\" \"MISSING_DOMAIN\")) NIL NIL)"
    );
}

/// RFC 5322 3.2.2, 3.4: a comment is not an address (`group2: (foo) ;` is an empty group);
/// a bare word and an old-style `addr (Name)` stay as they were.
#[test]
fn comments_are_not_addresses() {
    let m = b"From: a@x.example (Ann)\r\n\
To: group2: (foo) ;\r\n\
Cc: \"Q (not a comment)\" <q@x.example>, (lone) b@x.example\r\n\
Bcc: local\r\n\
\r\n\
x\r\n";
    let envelope = text(Structure::parse(m).envelope());
    assert!(
        envelope.contains("((NIL NIL \"group2\" NIL)(NIL NIL NIL NIL))"),
        "{envelope}"
    );
    assert!(!envelope.contains("\"foo\""), "{envelope}");
    assert!(
        envelope.contains("\"Q (not a comment)\" NIL \"q\" \"x.example\""),
        "{envelope}"
    );
    assert!(
        envelope.contains("(NIL NIL \"b\" \"x.example\")")
            || envelope.contains("\"b\" \"x.example\""),
        "{envelope}"
    );
    assert!(
        envelope.contains("((NIL NIL \"local\" \"MISSING_DOMAIN\"))"),
        "{envelope}"
    );
}

#[test]
fn encoded_words_stay_raw_and_values_are_unfolded() {
    let m = b"From: =?utf-8?q?J=C3=B6rg?= <j@x.example>, \"=?utf-8?q?A?= \\\"B\\\"\" <ab@x.example>\r\n\
Subject: =?utf-8?q?caf=C3=A9?=\r\n =?utf-8?q?_au_lait?=\r\n\
Message-ID:\r\n <id@x.example>\r\n\
\r\n\
x\r\n";
    let s = Structure::parse(m);
    let envelope = text(s.envelope());
    assert!(
        envelope.starts_with(
            "(NIL \"=?utf-8?q?caf=C3=A9?= =?utf-8?q?_au_lait?=\" \
((\"=?utf-8?q?J=C3=B6rg?=\" NIL \"j\" \"x.example\")(\"=?utf-8?q?A?= \\\"B\\\"\" NIL \"ab\" \"x.example\"))"
        ),
        "{envelope}"
    );
    assert!(envelope.ends_with(" NIL \"<id@x.example>\")"), "{envelope}");
}

#[test]
fn eight_bit_values_are_literals() {
    let m = "From: Jörg <j@x.example>\r\nSubject: café\r\n\r\nx\r\n".as_bytes();
    let s = Structure::parse(m);
    let envelope = text(s.envelope());
    assert!(
        envelope.starts_with("(NIL {5}\r\ncafé (({5}\r\nJörg NIL \"j\""),
        "{envelope}"
    );
}

#[test]
fn nstring_quoting_and_literals() {
    let written = |v: Option<&[u8]>| {
        let mut out = Vec::new();
        write_nstring(&mut out, v);
        out
    };
    assert_eq!(written(None), b"NIL");
    assert_eq!(written(Some(b"")), b"\"\"");
    assert_eq!(written(Some(b"plain text")), b"\"plain text\"");
    assert_eq!(
        written(Some(b"say \"hi\" \\o/")),
        b"\"say \\\"hi\\\" \\\\o/\""
    );
    assert_eq!(written(Some(b"NIL")), b"\"NIL\"");
    assert_eq!(written(Some(b"two\r\nlines")), b"{10}\r\ntwo\r\nlines");
    assert_eq!(written(Some("é".as_bytes())), "{2}\r\né".as_bytes());
    // RFC 9051 4.3: no NUL, not even in a literal.
    assert_eq!(written(Some(b"a\0b")), b"{2}\r\nab");
    let long = vec![b'x'; 2000];
    assert!(written(Some(&long)).starts_with(b"{2000}\r\nxxx"));
}

#[test]
fn header_field_filtering() {
    let h = b"Subject: one\r\n two\r\nFrom: a@b\r\nX-Other : y\r\n\tfolded\r\nsubject: again\r\n\r\nNot: header\r\n";
    assert_eq!(
        filter_header_fields(h, &[b"SUBJECT"], false),
        b"Subject: one\r\n two\r\nsubject: again\r\n\r\n"
    );
    assert_eq!(
        filter_header_fields(h, &[b"subject", b"x-other"], true),
        b"From: a@b\r\n\r\n"
    );
    assert_eq!(
        filter_header_fields(h, &[b"x-other"], false),
        b"X-Other : y\r\n\tfolded\r\n\r\n"
    );
    assert_eq!(filter_header_fields(h, &[b"nothing"], false), b"\r\n");
    assert_eq!(filter_header_fields(h, &[b"not"], false), b"\r\n");
    // LF-only lines, and a header that ends without its blank line.
    assert_eq!(
        filter_header_fields(b"A: 1\nB: 2\n  more", &[b"b"], false),
        b"B: 2\r\n  more\r\n\r\n"
    );
    assert_eq!(filter_header_fields(b"", &[b"a"], true), b"\r\n");
}

#[test]
fn binary_decoding() {
    assert_eq!(
        decode_binary(Encoding::SevenBit, b"as is\r\n").unwrap(),
        b"as is\r\n"
    );
    assert_eq!(
        decode_binary(Encoding::Binary, b"\0\xff").unwrap(),
        b"\0\xff"
    );
    assert_eq!(
        decode_binary(Encoding::Base64, b"aGVs\r\nbG8=\r\n").unwrap(),
        b"hello"
    );
    // RFC 2045 6.8: characters outside the alphabet are ignored.
    assert_eq!(
        decode_binary(Encoding::Base64, b"aG*Vs bG\x008=").unwrap(),
        b"hello"
    );
    assert_eq!(decode_binary(Encoding::Base64, b"").unwrap(), b"");
    assert_eq!(
        decode_binary(
            Encoding::QuotedPrintable,
            b"caf=C3=A9 =\r\nau lait  \r\nx=3D1"
        )
        .unwrap(),
        "café au lait\r\nx=1".as_bytes()
    );
    // Stray '=' are kept, not refused.
    assert_eq!(
        decode_binary(Encoding::QuotedPrintable, b"a==b =zz =").unwrap(),
        b"a==b =zz "
    );
}

#[test]
fn unknown_transfer_encoding() {
    assert_eq!(decode_binary(Encoding::Other, b"x"), Err(UnknownCte));
    let m = b"Content-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nbegin\r\n";
    let s = Structure::parse(m);
    assert_eq!(s.part(&[1]).unwrap().encoding(), Encoding::Other);
    assert!(text(s.body()).contains("\"X-UUENCODE\""));
    let m = b"Content-Transfer-Encoding: 8BIT (comment)\r\n\r\nx";
    assert_eq!(
        Structure::parse(m).part(&[1]).unwrap().encoding(),
        Encoding::EightBit
    );
}

#[test]
fn bare_line_feeds() {
    let m = b"From: a@b\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\none\ntwo\n--b--\n";
    let s = Structure::parse(m);
    assert_eq!(
        at(m, s.header_range()),
        b"From: a@b\nContent-Type: multipart/mixed; boundary=b\n\n"
    );
    assert_eq!(at(m, s.part(&[1]).unwrap().body_range()), b"one\ntwo");
    assert!(
        text(s.body())
            .starts_with("((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"US-ASCII\") NIL NIL \"7BIT\" 7 1)")
    );
}

#[test]
fn round_trip() {
    let samples: [&[u8]; 7] = [
        SIMPLE,
        ALTERNATIVE,
        MIXED,
        NESTED,
        b"",
        b"garbage",
        b"\r\n\r\n",
    ];
    for m in samples {
        let s = Structure::parse(m);
        let bytes = s.to_bytes();
        assert_eq!(Structure::from_bytes(&bytes), Ok(s.clone()));
        for cut in 0..bytes.len() {
            assert!(
                Structure::from_bytes(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Structure::from_bytes(&longer).is_err());
        let mut other_version = bytes.clone();
        other_version[0] = 2;
        assert!(Structure::from_bytes(&other_version).is_err());
    }
}

#[test]
fn damaged_blobs_are_errors() {
    let ok = |parts: &[u8]| {
        let mut b = vec![1, 0, 0, 0];
        b.extend_from_slice(parts);
        Structure::from_bytes(&b)
    };
    // One leaf: fine.
    assert!(ok(&[1, 0, 0, 0, 0]).is_ok());
    // No parts.
    assert!(ok(&[0]).is_err());
    // A part nobody points to.
    assert!(ok(&[2, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    // A multipart promising more children than there are parts.
    assert!(ok(&[2, 1, 0, 0, 0, 5, 0, 0, 0, 0]).is_err());
    // A multipart with no children.
    assert!(ok(&[1, 1, 0, 0, 0, 0]).is_err());
    // Kind 3, encoding 6.
    assert!(ok(&[1, 3, 0, 0, 0]).is_err());
    assert!(ok(&[1, 6 << 2, 0, 0, 0]).is_err());
    // Offsets that overflow.
    let mut overflow = vec![1, 0];
    overflow.extend_from_slice(&[0xff; 9]);
    overflow.push(1);
    overflow.extend_from_slice(&[0xff; 9]);
    overflow.push(1);
    overflow.push(0);
    assert!(ok(&overflow).is_err());
    // A count that lies about the bytes behind it.
    assert!(ok(&[0x90, 0x4e]).is_err());
    assert!(Structure::from_bytes(&[]).is_err());
    assert!(
        Structure::from_bytes(&[
            1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
        ])
        .is_err()
    );
}

#[test]
fn depth_is_capped() {
    let mut m = String::new();
    for i in 0..100 {
        m.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n"
        ));
    }
    m.push_str("Content-Type: text/plain\r\n\r\nleaf\r\n");
    let s = Structure::parse(m.as_bytes());
    let path = |n: usize| vec![1u32; n];
    assert!(s.part(&path(DEPTH_MAX)).is_some());
    assert!(s.part(&path(DEPTH_MAX + 1)).is_none());
    // The part at the limit is an opaque leaf, and BODYSTRUCTURE nests no deeper.
    assert!(text(s.body()).contains("(\"APPLICATION\" \"OCTET-STREAM\" (\"BOUNDARY\" \"b64\")"));
    let mut depth = 0usize;
    let mut deepest = 0;
    for &b in s.body_structure() {
        match b {
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ => {}
        }
        deepest = deepest.max(depth);
    }
    assert!(deepest <= DEPTH_MAX + 3, "{deepest}");
    assert!(Structure::from_bytes(&s.to_bytes()) == Ok(s));
}

#[test]
fn deeply_nested_messages_do_not_overflow_the_stack() {
    // mail-parser nests encapsulated messages inside each other without limit; describing
    // and dropping them must not recurse per level (the test thread has a 2 MiB stack).
    let m = "Content-Type: message/rfc822\r\n\r\n".repeat(100_000) + "From: a@b\r\n\r\ndeep\r\n";
    let s = Structure::parse(m.as_bytes());
    let path = vec![1u32; DEPTH_MAX + 1];
    assert!(s.part(&path).is_some());
    assert!(s.part(&vec![1u32; DEPTH_MAX + 2]).is_none());
    assert!(s.to_bytes().len() < 64 << 10, "{}", s.to_bytes().len());
}

#[test]
fn parts_are_capped() {
    let mut m = String::from("Content-Type: multipart/mixed; boundary=w\r\n\r\n");
    for _ in 0..PARTS_MAX + 50 {
        m.push_str("--w\r\nContent-Type: text/plain\r\n\r\nx\r\n");
    }
    m.push_str("--w--\r\n");
    let s = Structure::parse(m.as_bytes());
    // The top-level message counts as one.
    let last = PARTS_MAX as u32 - 1;
    assert!(s.part(&[last]).is_some());
    assert!(s.part(&[last + 1]).is_none());
    assert_eq!(s.parts.len(), PARTS_MAX);
    let bytes = s.to_bytes();
    assert!(bytes.len() < PARTS_MAX * 160, "{}", bytes.len());
    assert!(Structure::from_bytes(&bytes) == Ok(s));
}

#[test]
fn structure_size_is_capped() {
    // Many small encapsulated messages, each bringing an envelope.
    let mut m = String::from("Content-Type: multipart/mixed; boundary=w\r\n\r\n");
    for _ in 0..20_000 {
        m.push_str(
            "--w\r\nContent-Type: message/rfc822\r\n\r\nFrom: a@b\r\nSubject: s\r\n\r\nx\r\n",
        );
    }
    m.push_str("--w--\r\n");
    let s = Structure::parse(m.as_bytes());
    assert!(s.body_structure().len() <= STRUCTURE_BYTES_MAX);
    assert!(s.body_structure().len() > STRUCTURE_BYTES_MAX / 4);
    // Shallow parts are kept first: the messages are described, their contents are not.
    assert!(s.part(&[1]).is_some());
    assert!(s.part(&[PARTS_MAX as u32 / 2]).is_none());
    let body = text(s.body());
    assert!(
        body.starts_with(
            "((\"MESSAGE\" \"RFC822\" NIL NIL NIL \"7BIT\" 26 (NIL \"s\" ((NIL NIL \"a\" \"b\"))"
        ),
        "{}",
        &body[..300]
    );
    // A huge address list.
    let mut m = String::from("To: ");
    for i in 0..20_000 {
        m.push_str(&format!("user{i}@example.com, "));
    }
    m.push_str("last@example.com\r\n\r\nx");
    let s = Structure::parse(m.as_bytes());
    let envelope = text(s.envelope());
    assert!(
        envelope.len() <= LIST_BYTES_MAX + 1000,
        "{}",
        envelope.len()
    );
    assert!(envelope.contains("(NIL NIL \"user0\" \"example.com\")"));
    assert!(
        envelope.ends_with(")) NIL NIL NIL NIL)"),
        "{}",
        &envelope[envelope.len() - 100..]
    );
}

/// Every range inside the content, and every part's ranges inside its parent's body.
fn check_ranges(s: &Structure, len: u64) {
    for (i, p) in s.parts.iter().enumerate() {
        assert!(p.header_start <= p.body_start && p.body_start <= p.body_end && p.body_end <= len);
        for c in p.first_child..p.first_child + p.child_count {
            let c = &s.parts[c as usize];
            assert!(
                c.header_start >= p.body_start && c.body_end <= p.body_end,
                "part {i}"
            );
        }
    }
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let s = Structure::parse(&bytes);
        check_ranges(&s, bytes.len() as u64);
        prop_assert_eq!(Structure::from_bytes(&s.to_bytes()), Ok(s));
    }

    #[test]
    fn parse_never_panics_on_mime_like_input(
        pieces in proptest::collection::vec(
            prop_oneof![
                Just("Content-Type: multipart/mixed; boundary=b\r\n"),
                Just("Content-Type: multipart/digest; boundary=c\r\n"),
                Just("Content-Type: message/rfc822\r\n"),
                Just("Content-Type: text/plain; charset=utf-8\r\n"),
                Just("Content-Transfer-Encoding: base64\r\n"),
                Just("From: \"a\" <a@b>, g: c@d;\r\n"),
                Just("Subject: =?utf-8?q?x?=\r\n"),
                Just("\r\n"),
                Just("--b\r\n"),
                Just("--b--\r\n"),
                Just("--c\r\n"),
                Just("body line\r\n"),
                Just(" folded\r\n"),
            ],
            0..60,
        )
    ) {
        let m = pieces.concat();
        let s = Structure::parse(m.as_bytes());
        check_ranges(&s, m.len() as u64);
        prop_assert_eq!(Structure::from_bytes(&s.to_bytes()), Ok(s));
    }

    #[test]
    fn from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = Structure::from_bytes(&bytes);
    }

    #[test]
    fn from_bytes_never_panics_on_damaged_blobs(index in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = Structure::parse(NESTED).to_bytes();
        let i = index.index(bytes.len());
        bytes[i] = byte;
        if let Ok(s) = Structure::from_bytes(&bytes) {
            // Whatever it reads, walking it must not panic either.
            for path in [&[1u32][..], &[2], &[2, 1], &[2, 2], &[2, 2, 1]] {
                let _ = s.part(path).map(|p| (p.body_range(), p.message_text_range()));
            }
        }
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..500)) {
        for e in [Encoding::Base64, Encoding::QuotedPrintable, Encoding::SevenBit] {
            let _ = decode_binary(e, &bytes);
        }
        let _ = filter_header_fields(&bytes, &[b"a", b"subject"], false);
        let mut out = Vec::new();
        write_nstring(&mut out, Some(&bytes));
    }
}

#[test]
fn source_routes_are_the_address_adl() {
    // RFC 3501 7.4.2 / RFC 9051 7.5.2: addr-adl is the at-domain-list (source route) of
    // RFC 822's route-addr, `<@route1,@route2:user@domain>` (RFC 5322 4.4 obs-route).
    let m = b"From: <@route:user@domain>\r\n\
To: Ann <@r1.example,@r2.example:ann@x.example>, plain@y.example\r\n\
\r\nx\r\n";
    let s = Structure::parse(m);
    let envelope = text(s.envelope());
    assert!(
        envelope.starts_with(
            "(NIL NIL ((NIL \"@route\" \"user\" \"domain\")) \
((NIL \"@route\" \"user\" \"domain\")) ((NIL \"@route\" \"user\" \"domain\")) \
((\"Ann\" \"@r1.example,@r2.example\" \"ann\" \"x.example\")\
(NIL NIL \"plain\" \"y.example\")) "
        ),
        "{envelope}"
    );
}
