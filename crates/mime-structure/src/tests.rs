use super::*;

const SIMPLE: &[u8] = b"Date: Mon, 7 Feb 1994 21:52:25 -0800\r\n\
From: Fred Foobar <foobar@Blurdybloop.example>\r\n\
Subject: afternoon meeting\r\n\
To: mooch@owatagu.siam.edu.example\r\n\
Message-Id: <B27397-0100000@Blurdybloop.example>\r\n\
\r\n\
Hello Joe, do you think we can meet at 3:30 tomorrow?\r\n";

const MIXED: &[u8] = b"From: a@b.example\r\n\
Subject: =?utf-8?q?caf=C3=A9?=\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"XX\"\r\n\
\r\n\
--XX\r\n\
Content-Type: multipart/alternative; boundary=\"YY\"\r\n\
\r\n\
--YY\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
caf=C3=A9\r\n\
--YY\r\n\
Content-Type: text/html\r\n\
\r\n\
<p>cafe</p>\r\n\
--YY--\r\n\
--XX\r\n\
Content-Type: application/octet-stream; name=x.bin\r\n\
Content-Disposition: attachment; filename=x.bin\r\n\
Content-Transfer-Encoding: base64\r\n\
\r\n\
AAECAw==\r\n\
--XX\r\n\
Content-Type: message/rfc822\r\n\
\r\n\
From: inner@c.example\r\n\
Subject: inner\r\n\
\r\n\
inner body\r\n\
--XX--\r\n";

fn at(content: &[u8], r: Range<u64>) -> &[u8] {
    &content[r.start as usize..r.end as usize]
}

#[test]
fn simple_message_envelope_and_bodystructure() {
    let s = Structure::parse(SIMPLE);
    assert_eq!(
        String::from_utf8_lossy(s.envelope()),
        "(\"Mon, 7 Feb 1994 21:52:25 -0800\" \"afternoon meeting\" ((\"Fred Foobar\" NIL \"foobar\" \"Blurdybloop.example\")) ((\"Fred Foobar\" NIL \"foobar\" \"Blurdybloop.example\")) ((\"Fred Foobar\" NIL \"foobar\" \"Blurdybloop.example\")) ((NIL NIL \"mooch\" \"owatagu.siam.edu.example\")) NIL NIL NIL \"<B27397-0100000@Blurdybloop.example>\")"
    );
    assert_eq!(
        String::from_utf8_lossy(s.body()),
        "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 55 1)"
    );
    assert_eq!(
        String::from_utf8_lossy(s.body_structure()),
        "(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 55 1 NIL NIL NIL NIL)"
    );
    assert!(at(SIMPLE, s.header_range()).ends_with(b"\r\n\r\n"));
    assert_eq!(at(SIMPLE, s.text_range()), &SIMPLE[SIMPLE.len() - 55..]);
    let p = s.part(&[1]).unwrap();
    assert_eq!(at(SIMPLE, p.body_range()), at(SIMPLE, s.text_range()));
    assert!(s.part(&[2]).is_none());
}

#[test]
fn nested_multiparts_and_encapsulated_message() {
    let s = Structure::parse(MIXED);
    let bs = String::from_utf8_lossy(s.body_structure()).into_owned();
    assert!(
        bs.starts_with(
            "(((\"text\" \"plain\" (\"charset\" \"utf-8\") NIL NIL \"quoted-printable\" 9 1"
        ),
        "{bs}"
    );
    assert!(bs.contains("\"alternative\""), "{bs}");
    assert!(
        bs.contains("(\"attachment\" (\"filename\" \"x.bin\"))"),
        "{bs}"
    );
    assert!(bs.contains("\"message\" \"rfc822\""), "{bs}");
    assert!(bs.contains("\"inner\""), "{bs}");
    assert!(
        bs.ends_with("\"mixed\" (\"boundary\" \"XX\") NIL NIL NIL)"),
        "{bs}"
    );
    assert_eq!(
        at(MIXED, s.part(&[1, 1]).unwrap().body_range()),
        b"caf=C3=A9"
    );
    assert_eq!(
        at(MIXED, s.part(&[1, 2]).unwrap().body_range()),
        b"<p>cafe</p>"
    );
    let bin = s.part(&[2]).unwrap();
    assert_eq!(bin.encoding(), Encoding::Base64);
    assert_eq!(
        decode_binary(bin.encoding(), at(MIXED, bin.body_range())).unwrap(),
        vec![0, 1, 2, 3]
    );
    assert!(
        at(MIXED, bin.mime_header_range()).starts_with(b"Content-Type: application/octet-stream")
    );
    let qp = s.part(&[1, 1]).unwrap();
    assert_eq!(
        decode_binary(qp.encoding(), at(MIXED, qp.body_range())).unwrap(),
        "café".as_bytes()
    );
    let msg = s.part(&[3]).unwrap();
    assert_eq!(at(MIXED, msg.message_text_range().unwrap()), b"inner body");
    assert!(at(MIXED, msg.message_header_range().unwrap()).starts_with(b"From: inner@c.example"));
    assert_eq!(
        at(MIXED, s.part(&[3, 1]).unwrap().body_range()),
        b"inner body"
    );
    // The subject stays encoded: clients decode it.
    assert!(String::from_utf8_lossy(s.envelope()).contains("\"=?utf-8?q?caf=C3=A9?=\""));
}

#[test]
fn groups_quoting_and_literals() {
    let m = b"From: \"Quote \\\"Me\\\"\" <q@x.example>\r\nTo: friends: a@x.example, b@x.example;\r\nSubject: caf\xc3\xa9\r\n\r\nx\r\n";
    let s = Structure::parse(m);
    let env = String::from_utf8_lossy(s.envelope()).into_owned();
    assert!(env.contains("{5}\r\ncaf\u{e9}"), "{env}");
    assert!(env.contains("((NIL NIL \"friends\" NIL)(NIL NIL \"a\" \"x.example\")(NIL NIL \"b\" \"x.example\")(NIL NIL NIL NIL))"), "{env}");
    assert!(env.contains("\"Quote \\\"Me\\\"\""), "{env}");
    let mut out = Vec::new();
    write_nstring(&mut out, None);
    write_nstring(&mut out, Some(b"a\\b"));
    assert_eq!(out, b"NIL\"a\\\\b\"");
}

#[test]
fn header_field_filtering_keeps_folded_lines() {
    let h = b"Subject: one\r\n two\r\nFrom: a@b\r\nX-Other: y\r\n\r\n";
    assert_eq!(
        filter_header_fields(h, &[b"subject"], false),
        b"Subject: one\r\n two\r\n\r\n"
    );
    assert_eq!(
        filter_header_fields(h, &[b"SUBJECT", b"x-other"], true),
        b"From: a@b\r\n\r\n"
    );
    assert_eq!(filter_header_fields(h, &[b"nothing"], false), b"\r\n");
}

#[test]
fn unknown_transfer_encoding_is_reported() {
    assert_eq!(decode_binary(Encoding::Other, b"x"), Err(UnknownCte));
    let m = b"Content-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nbegin\r\n";
    let s = Structure::parse(m);
    assert_eq!(s.part(&[1]).unwrap().encoding(), Encoding::Other);
}

#[test]
fn round_trip_and_damage() {
    for m in [SIMPLE, MIXED, b"".as_slice(), b"no header at all"] {
        let s = Structure::parse(m);
        let bytes = s.to_bytes();
        assert_eq!(Structure::from_bytes(&bytes).unwrap(), s);
        for cut in 0..bytes.len() {
            assert!(Structure::from_bytes(&bytes[..cut]).is_err());
        }
    }
    assert!(Structure::from_bytes(&[9]).is_err());
}

#[test]
fn deep_nesting_and_many_parts_are_bounded() {
    let mut m = String::new();
    for i in 0..100 {
        m.push_str(&format!(
            "Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n"
        ));
    }
    m.push_str("Content-Type: text/plain\r\n\r\nleaf\r\n");
    let s = Structure::parse(m.as_bytes());
    assert!(s.to_bytes().len() < 64 << 10);
    let mut wide = String::from("Content-Type: multipart/mixed; boundary=w\r\n\r\n");
    for _ in 0..(PARTS_MAX + 50) {
        wide.push_str("--w\r\nContent-Type: text/plain\r\n\r\nx\r\n");
    }
    wide.push_str("--w--\r\n");
    let s = Structure::parse(wide.as_bytes());
    assert!(s.part(&[PARTS_MAX as u32 + 10]).is_none());
    assert!(Structure::from_bytes(&s.to_bytes()).is_ok());
}

proptest::proptest! {
    #[test]
    fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000)) {
        let s = Structure::parse(&bytes);
        let _ = Structure::from_bytes(&bytes);
        proptest::prop_assert_eq!(Structure::from_bytes(&s.to_bytes()).unwrap(), s.clone());
        for p in &s.parts {
            proptest::prop_assert!(p.body.end as usize <= bytes.len());
        }
    }
}
