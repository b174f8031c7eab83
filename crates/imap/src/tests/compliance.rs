//! What Dovecot's imaptest compliance suite found (issue 36): each case as imaptest sends it,
//! with the RFC section it holds to.

use super::*;

/// Appends each message with the internal date given (`dd-Mon-yyyy hh:mm:ss`, UTC), as
/// imaptest loads its mbox files (the `From ` line's date is the internal date).
fn append_all(c: &mut Client, messages: &[(&str, &str)]) {
    for (i, (date, message)) in messages.iter().enumerate() {
        let out = c.send(&format!(
            "a{i} APPEND INBOX \"{date} +0000\" {{{}+}}\r\n{message}\r\n",
            message.len()
        ));
        assert!(out.contains(&format!("a{i} OK")), "{out}");
    }
}

transcript! {
    /// RFC 3501 6.3.8, RFC 9051 6.3.9: a LIST pattern is not a mailbox name. One that is not
    /// valid modified UTF-7 (imaptest's `atoms`: a `&` that starts no shift sequence)
    /// matches nothing and is answered OK, as Dovecot does; SELECT of the same name is NO.
    fn a_list_pattern_that_is_not_modified_utf7_matches_nothing() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a LIST \"\" !#$&'+,-.0123456789:;<=>?@^_`|[}%*\r\n"),
            "a OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("b SELECT !#$&'+,-.0123456789:;<=>?@^_`|[}\r\n"),
            "b NO [CANNOT] Mailbox name is not valid modified UTF-7\r\n"
        );
        // Other patterns of the same command still match.
        assert_eq!(
            c.send("c LIST \"\" (&x* INBOX)\r\n"),
            "* LIST (\\HasNoChildren) \"/\" INBOX\r\nc OK LIST completed\r\n"
        );
        assert_eq!(c.send("d LIST &x *\r\n"), "d OK LIST completed\r\n");
    }
}

transcript! {
    /// RFC 3501 7.4.2 / RFC 9051 7.5.2: addr-adl is the at-domain-list source route of an
    /// RFC 822 route-addr, `<@route:user@domain>` (imaptest's `fetch-envelope`).
    fn an_envelope_gives_a_source_route_as_the_adl() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        let message = "From: <@route:user@domain>\r\n\
                       To: Ann <@r1.example,@r2.example:ann@x.example>\r\n\r\nx\r\n";
        append_all(&mut c, &[("22-Feb-2008 17:06:23", message)]);
        c.send("s SELECT INBOX\r\n");
        assert_eq!(
            c.send("f FETCH 1 ENVELOPE\r\n"),
            "* 1 FETCH (ENVELOPE (NIL NIL ((NIL \"@route\" \"user\" \"domain\")) \
             ((NIL \"@route\" \"user\" \"domain\")) ((NIL \"@route\" \"user\" \"domain\")) \
             ((\"Ann\" \"@r1.example,@r2.example\" \"ann\" \"x.example\")) NIL NIL NIL NIL))\r\n\
             f OK FETCH completed\r\n"
        );
    }
}

transcript! {
    /// RFC 5256 3: FROM, TO and CC sort by the first address's addr-mailbox; a list that
    /// opens with a group sorts by the group's name (its start marker is the first address,
    /// as Dovecot reads it). imaptest's `sort-addresses`.
    fn sort_by_addresses_as_imaptest_does() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        append_all(
            &mut c,
            &[
                (
                    "22-Feb-2008 00:06:23",
                    "From: user2@domain2.org\r\nTo: foo bar <user2@domain2.org>\r\n\
                     Cc: user2@domain2.org (foo bar)\r\n\r\n1\r\n",
                ),
                (
                    "22-Feb-2008 01:06:23",
                    "From: user2@domain1.org\r\nTo: user2@domain1.org\r\n\
                     Cc: user2: blah@domain1.org;\r\n\r\n2\r\n",
                ),
                (
                    "22-Feb-2008 02:06:23",
                    "From: user1@domain1.org\r\nTo: user1@domain1.org\r\n\
                     Cc: user1@domain1.org\r\n\r\n3\r\n",
                ),
            ],
        );
        c.send("s SELECT INBOX\r\n");
        for (keys, answer) in [
            ("FROM", "3 1 2"),
            ("TO", "3 1 2"),
            ("CC", "3 1 2"),
            ("REVERSE FROM", "1 2 3"),
            ("REVERSE TO", "1 2 3"),
            ("REVERSE CC", "1 2 3"),
            ("FROM REVERSE ARRIVAL", "3 2 1"),
            ("TO REVERSE ARRIVAL", "3 2 1"),
            ("CC REVERSE ARRIVAL", "3 2 1"),
        ] {
            assert_eq!(
                c.send(&format!("x SORT ({keys}) US-ASCII ALL\r\n")),
                format!("* SORT {answer}\r\nx OK SORT completed\r\n"),
                "{keys}"
            );
        }
    }
}

transcript! {
    /// RFC 5957 2 DISPLAYTO: the first To address's display name, decoded (RFC 2047), else
    /// its address (a group: its name; no domain: the mailbox alone), compared under
    /// i;unicode-casemap; ties by sequence number (RFC 5256 3). imaptest's `sort-display-to`.
    fn sort_by_display_to_as_imaptest_does() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        let to = [
            "foo bar <a@b.c>",
            "b@c.d",
            "d",
            "=?iso-8859-1?q?foo_aar?= <e@f.g>",
            "=?iso-8859-1?q?foo_car?= <f@g.h>",
            "a: xx@xx.org, yy@yy.org;",
            "z: aa@aa.org, bb@bb.org;",
            "empty:;",
        ];
        let messages: Vec<String> = to
            .iter()
            .enumerate()
            .map(|(i, to)| format!("To: {to}\r\n\r\n{}\r\n", i + 1))
            .collect();
        let messages: Vec<(&str, &str)> = messages
            .iter()
            .map(|m| ("22-Feb-2008 21:00:00", m.as_str()))
            .collect();
        append_all(&mut c, &messages);
        c.send("s SELECT INBOX\r\n");
        assert_eq!(
            c.send("x SORT (DISPLAYTO) US-ASCII ALL\r\n"),
            "* SORT 6 2 3 8 4 1 5 7\r\nx OK SORT completed\r\n"
        );
        assert_eq!(
            c.send("y SORT (REVERSE DISPLAYTO) US-ASCII ALL\r\n"),
            "* SORT 7 5 1 4 8 3 2 6\r\ny OK SORT completed\r\n"
        );
    }
}

transcript! {
    /// RFC 5256 3 REFERENCES, step 1.B: a message's own last reference replaces the parent
    /// other messages' References gave it, and the old link goes even when the new one would
    /// close a loop and is not made. imaptest's `thread`: b references "a c", c references b;
    /// c's parent a (from b) is dropped and b under c stays: (3 2)(1), 3 sent before 1.
    fn thread_references_as_imaptest_does() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        append_all(
            &mut c,
            &[
                ("22-Feb-2008 17:06:23", "Message-ID: <a@b>\r\n\r\nbody\r\n"),
                (
                    "22-Feb-2008 15:06:23",
                    "Message-Id: <b@b>\r\nReferences: <a@b> <c@b>\r\n\r\nbody\r\n",
                ),
                (
                    "22-Feb-2008 16:06:25",
                    "Message-Id: <c@b>\r\nReferences: <b@b>\r\n\r\nbody\r\n",
                ),
            ],
        );
        c.send("s SELECT INBOX\r\n");
        assert_eq!(
            c.send("t THREAD REFERENCES US-ASCII ALL\r\n"),
            "* THREAD (3 2)(1)\r\nt OK THREAD completed\r\n"
        );
        c.send("d STORE 1 +FLAGS.SILENT (\\Deleted)\r\n");
        c.send("e EXPUNGE\r\n");
        assert_eq!(
            c.send("u THREAD REFERENCES US-ASCII ALL\r\n"),
            "* THREAD (2 1)\r\nu OK THREAD completed\r\n"
        );
    }
}

transcript! {
    /// imaptest's `thread2` to `thread7`: duplicate ids, missing parents, subjects merged.
    fn thread_references_edge_cases_as_imaptest_does() {
        let cases: [(&[(&str, &str)], &str); 5] = [
            (
                // Duplicate Message-IDs: the second gets an id of its own.
                &[
                    ("22-Feb-2008 15:06:23", "Message-Id: <a@b>\r\n\r\nbody\r\n"),
                    ("22-Feb-2008 15:06:23", "Message-Id: <a@b>\r\n\r\nbody\r\n"),
                ],
                "(1)(2)",
            ),
            (
                // The same, merged by subject (step 5: a reply under the original).
                &[
                    ("22-Feb-2008 15:06:23", "Message-Id: <a@b>\r\nSubject: foo\r\n\r\nb\r\n"),
                    ("22-Feb-2008 15:06:24", "Message-Id: <a@b>\r\nSubject: Re: foo\r\n\r\nb\r\n"),
                ],
                "(1 2)",
            ),
            (
                // A missing parent's only child promoted, then merged by subject.
                &[
                    ("22-Feb-2008 15:06:23", "Message-Id: <a@b>\r\nSubject: foo\r\n\r\nb\r\n"),
                    (
                        "22-Feb-2008 15:06:24",
                        "Message-Id: <b@b>\r\nReferences: <c@b>\r\nSubject: Re: foo\r\n\r\nb\r\n",
                    ),
                ],
                "(1 2)",
            ),
            (
                // A missing parent with two children stays as a dummy at the top.
                &[
                    ("22-Feb-2008 15:06:23", "References: <a@b>\r\n\r\nbody\r\n"),
                    ("22-Feb-2008 15:06:24", "References: <a@b>\r\n\r\nbody\r\n"),
                ],
                "((1)(2))",
            ),
            (
                &[
                    ("22-Feb-2008 15:06:23", "Message-Id: <a@b>\r\n\r\nbody1\r\n"),
                    ("22-Feb-2008 15:06:23", "Message-Id: <b@b>\r\nReferences: <a@b>\r\n\r\nb\r\n"),
                    ("22-Feb-2008 15:06:23", "Message-Id: <c@b>\r\nReferences: <b@b>\r\n\r\nb\r\n"),
                    ("22-Feb-2008 15:06:23", "Message-Id: <b@b>\r\nReferences: <a@b>\r\n\r\nb\r\n"),
                ],
                "(1 (2 3)(4))",
            ),
        ];
        for (messages, threads) in cases {
            let store = new_store();
            let mut c = Client::login(&store, "bob");
            append_all(&mut c, messages);
            c.send("s SELECT INBOX\r\n");
            assert_eq!(
                c.send("t THREAD REFERENCES US-ASCII ALL\r\n"),
                format!("* THREAD {threads}\r\nt OK THREAD completed\r\n")
            );
        }
    }
}

transcript! {
    /// RFC 2971 3.3: an ID may carry 30 pairs, fields of 30 octets, values of 1024; the
    /// largest fits the line cap before login (`prelogin_line_bytes_max`) and is answered.
    /// More, or longer, is BAD, and the connection stays open (imaptest's `id`).
    fn the_largest_id_fits_before_login_and_a_larger_one_is_bad() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        let pair = |i: usize, field_bytes: usize, value_bytes: usize| {
            let field = format!("{i:02}{}", "f".repeat(field_bytes - 2));
            format!("\"{field}\" \"{}\"", "v".repeat(value_bytes))
        };
        let id = |pairs: Vec<String>| format!("i ID ({})\r\n", pairs.join(" "));
        let largest = id((0..30).map(|i| pair(i, 30, 1024)).collect());
        assert!(largest.len() > 8 << 10 && largest.len() <= test_config().prelogin_line_bytes_max);
        assert_eq!(
            c.send(&largest),
            format!(
                "* ID (\"name\" \"mailstow\" \"version\" \"{}\")\r\ni OK ID completed\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(
            c.send(&id((0..31).map(|i| pair(i, 3, 1)).collect())),
            "i BAD ID: more than 30 field-value pairs (RFC 2971 3.3)\r\n"
        );
        assert_eq!(
            c.send(&id(vec![pair(0, 31, 1)])),
            "i BAD ID: a field longer than 30 octets (RFC 2971 3.3)\r\n"
        );
        assert_eq!(
            c.send(&id(vec![pair(0, 30, 1025)])),
            "i BAD ID: a value longer than 1024 octets (RFC 2971 3.3)\r\n"
        );
        assert!(!c.closed);
        assert!(c.send("n NOOP\r\n").ends_with("n OK NOOP completed\r\n"));
    }
}
