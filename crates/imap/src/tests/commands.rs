//! Transcripts of every command outside FETCH: states, errors, the response codes.

use super::*;

transcript! {
    fn greeting_capability_login_logout() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        let greeting = c.greeting();
        assert!(
            greeting.starts_with(
                // RFC 7888: LITERAL- before login, LITERAL+ after.
                "* OK [CAPABILITY IMAP4rev1 IMAP4rev2 STARTTLS AUTH=PLAIN SASL-IR LITERAL-"
            ),
            "{greeting}"
        );
        assert!(greeting.ends_with("] test.example IMAP ready\r\n"));
        let out = c.send("a CAPABILITY\r\n");
        assert!(
            out.starts_with("* CAPABILITY IMAP4rev1 IMAP4rev2 STARTTLS AUTH=PLAIN"),
            "{out}"
        );
        assert!(
            out.contains(" MOVE ")
                && out.contains(" UIDPLUS ")
                && out.contains(" APPENDLIMIT=67108864")
        );
        assert!(out.ends_with("a OK CAPABILITY completed\r\n"));
        assert_eq!(c.send("b SELECT INBOX\r\n"), "b BAD Log in first\r\n");
        assert_eq!(
            c.send("c LOGIN bob wrong\r\n"),
            "c NO [AUTHENTICATIONFAILED] Authentication failed\r\n"
        );
        assert_eq!(
            c.send("c LOGIN bob busy\r\n"),
            "c NO [LIMIT] Too many sessions for this user\r\n"
        );
        assert_eq!(
            c.send("c LOGIN bob down\r\n"),
            "c NO [UNAVAILABLE] directory\r\n"
        );
        let out = c.send("d LOGIN bob secret\r\n");
        assert!(
            out.starts_with("d OK [CAPABILITY IMAP4rev1 IMAP4rev2 LITERAL+"),
            "{out}"
        );
        assert!(!out.contains("AUTH=") && out.ends_with("] Logged in\r\n"));
        assert_eq!(
            c.send("e LOGIN bob secret\r\n"),
            "e BAD Already authenticated\r\n"
        );
        assert_eq!(
            c.send("f LOGOUT\r\n"),
            "* BYE Logging out\r\nf OK LOGOUT completed\r\n"
        );
        assert!(c.closed);
    }
}

transcript! {
    fn login_without_tls_is_refused_unless_allowed() {
        let store = new_store();
        let mut c = Client::new(
            &store,
            Config {
                plaintext_auth: false,
                ..test_config()
            },
        );
        assert!(c.greeting().contains(" LOGINDISABLED"));
        assert_eq!(
            c.send("a LOGIN bob secret\r\n"),
            "a NO [PRIVACYREQUIRED] Use STARTTLS first\r\n"
        );
        assert_eq!(
            c.send("b AUTHENTICATE PLAIN AGJvYgBzZWNyZXQ=\r\n"),
            "b NO [PRIVACYREQUIRED] Use STARTTLS first\r\n"
        );
        // Input pipelined after STARTTLS is dropped (RFC 9051 6.2.1).
        assert_eq!(
            c.send("c STARTTLS\r\nd LOGIN bob secret\r\n"),
            "c OK Begin TLS negotiation now\r\n"
        );
        assert!(c.starttls);
        let out = c.send("e CAPABILITY\r\n");
        assert!(
            out.contains("AUTH=PLAIN") && !out.contains("STARTTLS"),
            "{out}"
        );
        assert!(c.send("f LOGIN bob secret\r\n").contains("f OK"));
    }
}

transcript! {
    fn authenticate_plain_initial_response_and_continuation() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        // \0bob\0secret
        assert_eq!(c.send("a AUTHENTICATE PLAIN\r\n"), "+ \r\n");
        assert_eq!(c.send("*\r\n"), "a BAD Authentication cancelled\r\n");
        assert_eq!(c.send("b AUTHENTICATE PLAIN\r\n"), "+ \r\n");
        assert_eq!(c.send("!!!\r\n"), "b BAD Invalid base64\r\n");
        assert_eq!(
            c.send("c AUTHENTICATE PLAIN AGJvYgB3cm9uZw==\r\n"),
            "c NO [AUTHENTICATIONFAILED] Authentication failed\r\n"
        );
        assert_eq!(
            c.send("d AUTHENTICATE CRAM-MD5\r\n"),
            "d NO [CANNOT] Unsupported authentication mechanism\r\n"
        );
        assert!(
            c.send("e AUTHENTICATE PLAIN AGJvYgBzZWNyZXQ=\r\n")
                .starts_with("e OK [CAPABILITY")
        );
        assert_eq!(c.session.user(), Some("bob"));
    }
}

transcript! {
    fn select_examine_and_the_untagged_data() {
        let store = new_store();
        deliver(&store, "bob", 3);
        store
            .set_flags(
                "bob",
                "INBOX",
                &[1],
                mail_model::FlagOp::Add,
                mail_model::Flags::SEEN,
                &[],
            )
            .unwrap();
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a SELECT inbox\r\n"),
            "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n\
             * 3 EXISTS\r\n\
             * 3 RECENT\r\n\
             * OK [UNSEEN 2] First unseen\r\n\
             * OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft \\*)] Flags permitted\r\n\
             * OK [UIDVALIDITY V] UIDs valid\r\n\
             * OK [UIDNEXT 4] Predicted next UID\r\n\
             * OK [HIGHESTMODSEQ 5] Highest\r\n\
             a OK [READ-WRITE] SELECT completed\r\n"
        );
        let out = c.send("b EXAMINE INBOX\r\n");
        assert!(
            out.starts_with("* OK [CLOSED] Previous mailbox closed\r\n"),
            "{out}"
        );
        assert!(out.contains("* OK [PERMANENTFLAGS ()] Read-only mailbox\r\n"));
        assert!(out.ends_with("b OK [READ-ONLY] EXAMINE completed\r\n"));
        assert_eq!(
            c.send("c STORE 1 +FLAGS (\\Deleted)\r\n"),
            "c NO [READ-ONLY] Mailbox is read-only\r\n"
        );
        // A failed SELECT still closes the current mailbox (RFC 9051 6.3.2).
        assert_eq!(
            c.send("d SELECT nothere\r\n"),
            "* OK [CLOSED] Previous mailbox closed\r\nd NO [NONEXISTENT] No such mailbox\r\n"
        );
        assert_eq!(
            c.send("e FETCH 1 FLAGS\r\n"),
            "e BAD No mailbox selected\r\n"
        );
        // IMAP4rev2 clients get no RECENT and no UNSEEN code.
        assert_eq!(
            c.send("f ENABLE IMAP4rev2 CONDSTORE\r\n"),
            "* ENABLED IMAP4rev2 CONDSTORE\r\nf OK ENABLE completed\r\n"
        );
        let out = c.send("g SELECT INBOX\r\n");
        assert!(!out.contains("RECENT") && !out.contains("UNSEEN"), "{out}");
    }
}

transcript! {
    fn create_delete_rename_list_and_special_use() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a LIST \"\" *\r\n"),
            "* LIST (\\HasNoChildren \\Archive) \"/\" Archive\r\n\
             * LIST (\\HasNoChildren \\Drafts) \"/\" Drafts\r\n\
             * LIST (\\HasNoChildren) \"/\" INBOX\r\n\
             * LIST (\\HasNoChildren \\Junk) \"/\" Junk\r\n\
             * LIST (\\HasNoChildren \\Sent) \"/\" Sent\r\n\
             * LIST (\\HasNoChildren \\Trash) \"/\" Trash\r\n\
             a OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("b CREATE Projects/2025/Q1\r\n"),
            "b OK CREATE completed\r\n"
        );
        assert_eq!(
            c.send("b CREATE Projects\r\n"),
            "b NO [ALREADYEXISTS] Mailbox already exists\r\n"
        );
        assert_eq!(
            c.send("c CREATE INBOX\r\n"),
            "c NO [ALREADYEXISTS] INBOX always exists\r\n"
        );
        assert_eq!(
            c.send("d LIST \"\" Projects/%\r\n"),
            "* LIST (\\HasChildren) \"/\" Projects/2025\r\nd OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("e LIST \"\" \"\"\r\n"),
            "* LIST (\\Noselect) \"/\" \"\"\r\ne OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("f DELETE Projects\r\n"),
            "f NO [INUSE] Mailbox has children; delete them first\r\n"
        );
        assert_eq!(
            c.send("g RENAME Projects/2025/Q1 \"Old Q1\"\r\n"),
            "g OK RENAME completed\r\n"
        );
        assert_eq!(
            c.send("h LIST \"\" \"Old*\"\r\n"),
            "* LIST (\\HasNoChildren) \"/\" \"Old Q1\"\r\nh OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("i DELETE \"Old Q1\"\r\n"),
            "i OK DELETE completed\r\n"
        );
        assert_eq!(
            c.send("j DELETE INBOX\r\n"),
            "j NO [CANNOT] INBOX cannot be deleted\r\n"
        );
        assert_eq!(
            c.send("k DELETE nothere\r\n"),
            "k NO [NONEXISTENT] No such mailbox\r\n"
        );
        assert_eq!(
            c.send("l LIST (SPECIAL-USE) \"\" *\r\n").lines().count(),
            6,
            "five special-use folders and the tagged OK"
        );
    }
}

transcript! {
    fn subscriptions_lsub_and_list_extended() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a SUBSCRIBE INBOX\r\n"),
            "a OK SUBSCRIBE completed\r\n"
        );
        assert_eq!(
            c.send("b SUBSCRIBE Gone\r\n"),
            "b OK SUBSCRIBE completed\r\n"
        );
        assert_eq!(
            c.send("c LSUB \"\" *\r\n"),
            "* LSUB (\\Noselect) \"/\" Gone\r\n* LSUB () \"/\" INBOX\r\nc OK LSUB completed\r\n"
        );
        assert_eq!(
            c.send("d LIST (SUBSCRIBED) \"\" * RETURN (STATUS (MESSAGES UIDNEXT))\r\n"),
            "* LIST (\\NonExistent \\HasNoChildren \\Subscribed) \"/\" Gone\r\n\
             * LIST (\\HasNoChildren \\Subscribed) \"/\" INBOX\r\n\
             * STATUS INBOX (MESSAGES 0 UIDNEXT 1)\r\n\
             d OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("e UNSUBSCRIBE Gone\r\n"),
            "e OK UNSUBSCRIBE completed\r\n"
        );
        assert_eq!(
            c.send("f LSUB \"\" *\r\n"),
            "* LSUB () \"/\" INBOX\r\nf OK LSUB completed\r\n"
        );
    }
}

transcript! {
    fn status_namespace_id_noop() {
        let store = new_store();
        deliver(&store, "bob", 2);
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a STATUS INBOX (MESSAGES UIDNEXT UIDVALIDITY UNSEEN DELETED SIZE HIGHESTMODSEQ RECENT)\r\n"),
            format!(
                "* STATUS INBOX (MESSAGES 2 UIDNEXT 3 UIDVALIDITY V UNSEEN 2 DELETED 0 SIZE {} HIGHESTMODSEQ 3 RECENT 2)\r\na OK STATUS completed\r\n",
                store.status("bob", "INBOX").unwrap().bytes
            )
        );
        assert_eq!(
            c.send("b STATUS nothere (MESSAGES)\r\n"),
            "b NO [NONEXISTENT] No such mailbox\r\n"
        );
        assert_eq!(
            c.send("c NAMESPACE\r\n"),
            "* NAMESPACE ((\"\" \"/\")) NIL NIL\r\nc OK NAMESPACE completed\r\n"
        );
        assert!(
            c.send("d ID NIL\r\n")
                .starts_with("* ID (\"name\" \"mailstow\"")
        );
        assert_eq!(c.send("e NOOP\r\n"), "e OK NOOP completed\r\n");
        assert_eq!(c.send("f CHECK\r\n"), "f BAD No mailbox selected\r\n");
    }
}

transcript! {
    fn append_multiappend_and_appenduid() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a APPEND INBOX (\\Seen) {11}\r\n"),
            "+ Ready for literal data\r\n"
        );
        assert_eq!(
            c.send("hello world\r\n"),
            "a OK [APPENDUID V 1] APPEND completed\r\n"
        );
        assert_eq!(
            c.send("b APPEND Sent {2+}\r\nhi {3+}\r\nyou\r\n"),
            "b OK [APPENDUID V 1:2] APPEND completed\r\n"
        );
        assert_eq!(
            c.send("c APPEND Nope {1+}\r\nx\r\n"),
            "c NO [TRYCREATE] No such mailbox\r\n"
        );
        assert_eq!(store.read("bob", "Sent", 2).unwrap(), b"you");
        let (_, messages) = store.shared_view("bob", "INBOX").unwrap();
        assert_eq!(messages[0].flags, mail_model::Flags::SEEN);
        // Appending to the selected folder reports EXISTS.
        c.send("d SELECT INBOX\r\n");
        assert_eq!(
            c.send("e APPEND INBOX {1+}\r\nx\r\n"),
            "* 2 EXISTS\r\n* 2 RECENT\r\ne OK [APPENDUID V 2] APPEND completed\r\n"
        );
    }
}

transcript! {
    fn store_flags_and_keywords() {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut c = Client::login(&store, "bob");
        c.send("a SELECT INBOX\r\n");
        assert_eq!(
            c.send("b STORE 1:2 +FLAGS (\\Flagged $Work)\r\n"),
            // RFC 3501 7.2.6: the new keyword is announced first.
            "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work)\r\n\
             * OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work \\*)] Flags permitted\r\n\
             * 1 FETCH (FLAGS (\\Recent \\Flagged $Work))\r\n* 2 FETCH (FLAGS (\\Recent \\Flagged $Work))\r\nb OK STORE completed\r\n"
        );
        assert_eq!(
            c.send("c STORE 2 -FLAGS.SILENT (\\Flagged)\r\n"),
            "c OK STORE completed\r\n"
        );
        assert_eq!(
            c.send("d UID STORE 3 FLAGS (\\Seen)\r\n"),
            "* 3 FETCH (UID 3 FLAGS (\\Recent \\Seen))\r\nd OK UID STORE completed\r\n"
        );
        assert_eq!(
            c.send("e STORE 9 +FLAGS (\\Seen)\r\n"),
            "e BAD Invalid message sequence number\r\n"
        );
        assert_eq!(
            c.send("f STORE 1 +FLAGS (\\Recent)\r\n"),
            "f BAD Cannot store flag \\Recent\r\n"
        );
        assert_eq!(
            c.send("g FETCH 1:3 FLAGS\r\n"),
            "* 1 FETCH (FLAGS (\\Recent \\Flagged $Work))\r\n* 2 FETCH (FLAGS (\\Recent $Work))\r\n* 3 FETCH (FLAGS (\\Recent \\Seen))\r\ng OK FETCH completed\r\n"
        );
        // CONDSTORE: UNCHANGEDSINCE below the message's MODSEQ refuses to touch it.
        let out = c.send("h STORE 1 (UNCHANGEDSINCE 1) +FLAGS (\\Answered)\r\n");
        assert_eq!(
            out,
            // RFC 7162 3.1: UNCHANGEDSINCE enabled CONDSTORE in a selected mailbox.
            "* OK [HIGHESTMODSEQ 7] Highest\r\n\
             h OK [MODIFIED 1] Conditional STORE failed for some messages\r\n"
        );
    }
}

transcript! {
    fn expunge_uid_expunge_and_close() {
        let store = new_store();
        deliver(&store, "bob", 5);
        let mut c = Client::login(&store, "bob");
        c.send("a SELECT INBOX\r\n");
        c.send("b STORE 1,2,4 +FLAGS.SILENT (\\Deleted)\r\n");
        assert_eq!(
            c.send("c UID EXPUNGE 4:5\r\n"),
            "* 4 EXPUNGE\r\nc OK UID EXPUNGE completed\r\n"
        );
        assert_eq!(
            c.send("d EXPUNGE\r\n"),
            "* 1 EXPUNGE\r\n* 1 EXPUNGE\r\nd OK EXPUNGE completed\r\n"
        );
        assert_eq!(
            c.send("e UID SEARCH ALL\r\n"),
            "* SEARCH 3 5\r\ne OK UID SEARCH completed\r\n"
        );
        c.send("f STORE 1 +FLAGS.SILENT (\\Deleted)\r\n");
        assert_eq!(c.send("g CLOSE\r\n"), "g OK CLOSE completed\r\n");
        assert_eq!(store.uids("bob", "INBOX").unwrap(), vec![5]);
        assert_eq!(c.send("h EXPUNGE\r\n"), "h BAD No mailbox selected\r\n");
        c.send("i SELECT INBOX\r\n");
        assert_eq!(c.send("j UNSELECT\r\n"), "j OK UNSELECT completed\r\n");
    }
}

transcript! {
    fn copy_and_move_with_copyuid() {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut c = Client::login(&store, "bob");
        c.send("a SELECT INBOX\r\n");
        assert_eq!(
            c.send("b COPY 1:2 Archive\r\n"),
            "b OK [COPYUID V 1:2 1:2] COPY completed\r\n"
        );
        assert_eq!(
            c.send("c COPY 1 Nope\r\n"),
            "c NO [TRYCREATE] No such mailbox\r\n"
        );
        assert_eq!(
            c.send("d UID MOVE 2:3 Trash\r\n"),
            "* OK [COPYUID V 2:3 1:2] Moved\r\n* 2 EXPUNGE\r\n* 2 EXPUNGE\r\nd OK UID MOVE completed\r\n"
        );
        assert_eq!(store.uids("bob", "Trash").unwrap(), vec![1, 2]);
        assert_eq!(
            store.read("bob", "Archive", 2).unwrap(),
            store.read("bob", "Trash", 1).unwrap()
        );
    }
}

transcript! {
    fn search_keys_and_esearch() {
        let store = new_store();
        deliver(&store, "bob", 4);
        store
            .set_flags(
                "bob",
                "INBOX",
                &[2],
                mail_model::FlagOp::Add,
                mail_model::Flags::SEEN,
                &[],
            )
            .unwrap();
        let mut c = Client::login(&store, "bob");
        c.send("a SELECT INBOX\r\n");
        assert_eq!(
            c.send("b SEARCH UNSEEN\r\n"),
            "* SEARCH 1 3 4\r\nb OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("c SEARCH SUBJECT m3\r\n"),
            "* SEARCH 3\r\nc OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("d UID SEARCH HEADER Message-ID <m4@example.org>\r\n"),
            "* SEARCH 4\r\nd OK UID SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("e SEARCH BODY \"body 2\"\r\n"),
            "* SEARCH 2\r\ne OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("f SEARCH OR 1 4 NOT SEEN\r\n"),
            "* SEARCH 1 4\r\nf OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("g SEARCH FROM alice SENTON 7-Feb-1994 2:3\r\n"),
            "* SEARCH 2 3\r\ng OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("h SEARCH TEXT nothing-like-it\r\n"),
            "* SEARCH\r\nh OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("i UID SEARCH RETURN (MIN MAX COUNT ALL) UNSEEN\r\n"),
            "* ESEARCH (TAG \"i\") UID MIN 1 MAX 4 COUNT 3 ALL 1,3:4\r\ni OK UID SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("j SEARCH RETURN () SEEN\r\n"),
            "* ESEARCH (TAG \"j\") ALL 2\r\nj OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("k SEARCH CC nobody LARGER 1\r\n"),
            "* SEARCH\r\nk OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("l SEARCH MODSEQ 5\r\n"),
            // RFC 7162 3.1: the search enabled CONDSTORE: HIGHESTMODSEQ first, once.
            "* OK [HIGHESTMODSEQ 6] Highest\r\n* SEARCH 2 4 (MODSEQ 6)\r\nl OK SEARCH completed\r\n"
        );
        // RFC 7162 3.1.5: with only MIN and/or MAX, the MODSEQ is that of the messages named.
        let min = c.send("l2 FETCH 2 (MODSEQ)\r\n");
        let (m2, m4) = (
            min.split("MODSEQ (")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap()
                .to_string(),
            c.send("l3 FETCH 4 (MODSEQ)\r\n")
                .split("MODSEQ (")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap()
                .to_string(),
        );
        // Message 4 changed before message 2: MAX names a MODSEQ below the highest (6).
        assert_eq!((m2.as_str(), m4.as_str()), ("6", "5"));
        assert_eq!(
            c.send("l4 SEARCH RETURN (MIN) MODSEQ 5\r\n"),
            format!("* ESEARCH (TAG \"l4\") MIN 2 MODSEQ {m2}\r\nl4 OK SEARCH completed\r\n")
        );
        assert_eq!(
            c.send("l5 SEARCH RETURN (MAX) MODSEQ 5\r\n"),
            format!("* ESEARCH (TAG \"l5\") MAX 4 MODSEQ {m4}\r\nl5 OK SEARCH completed\r\n")
        );
        assert_eq!(
            c.send("l6 SEARCH RETURN (MIN COUNT) MODSEQ 5\r\n"),
            "* ESEARCH (TAG \"l6\") MIN 2 COUNT 2 MODSEQ 6\r\nl6 OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("m SEARCH BEFORE 1-Jan-1990\r\n"),
            "* SEARCH\r\nm OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("n SEARCH SINCE 1-Jan-1990 UID 3:*\r\n"),
            "* SEARCH 3 4\r\nn OK SEARCH completed\r\n"
        );
    }
}

transcript! {
    fn pipelined_commands_and_bytewise_input_give_the_same_output() {
        let store = new_store();
        deliver(&store, "bob", 2);
        let script = "a SELECT INBOX\r\nb FETCH 1:* (UID FLAGS)\r\nc APPEND INBOX {5}\r\nhello\r\nd NOOP\r\ne LOGOUT\r\n";
        let mut whole = Client::login(&store, "bob");
        let a = whole.send(script);
        let store2 = new_store();
        deliver(&store2, "bob", 2);
        let mut bytewise = Client::login(&store2, "bob");
        let b = bytewise.send_bytewise(script);
        assert_eq!(a, b);
        assert!(a.contains("+ Ready for literal data\r\n"));
        assert!(a.ends_with("e OK LOGOUT completed\r\n"), "{a}");
    }
}

transcript! {
    fn malformed_input_gets_bad_and_too_many_end_the_session() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        assert_eq!(
            c.send("a FROB\r\n"),
            "a BAD Syntax error or unknown command\r\n"
        );
        assert_eq!(c.send("\r\n"), "* BAD Invalid tag\r\n");
        assert_eq!(c.send("b\r\n"), "b BAD Missing command\r\n");
        assert_eq!(
            c.send("c FETCH 1 (FLAGS\r\n"),
            "c BAD Syntax error or unknown command\r\n"
        );
        let mut out = String::new();
        for i in 0..30 {
            out.push_str(&c.send(&format!("x{i} BOGUS\r\n")));
            if c.closed {
                break;
            }
        }
        assert!(
            out.ends_with("* BYE Too many invalid commands\r\n"),
            "{out}"
        );
        assert!(c.closed);
    }
}

transcript! {
    fn users_never_see_each_other() {
        let store = new_store();
        deliver(&store, "alice", 2);
        let mut bob = Client::login(&store, "bob");
        assert!(!bob.send("a LIST \"\" *\r\n").contains("alice"));
        assert_eq!(
            bob.send("b STATUS ../alice/INBOX (MESSAGES)\r\n"),
            "b NO [CANNOT] Invalid mailbox name: '.' and '..' are not folder names\r\n"
        );
        let out = bob.send("c SELECT INBOX\r\n");
        assert!(out.contains("* 0 EXISTS"), "{out}");
    }
}

transcript! {
    /// A cluster node that checked the password hands the connection to the user's node, which
    /// answers the login itself (under the client's tag): the session gives back the tag and
    /// what the client sent after the login, and says nothing more.
    fn a_login_handed_over_gives_back_its_tag_and_the_input_after_it() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        assert_eq!(c.session.hand_over(), None, "no login is waiting");
        c.session
            .feed(b"t1 LOGIN alice secret\r\nt2 SELECT INBOX\r\nt3 NOOP\r\n");
        // Before login nothing needs the store.
        let mut asked = false;
        while let Some(event) = c.session.poll() {
            asked |= matches!(event, Event::Auth { .. });
            if asked {
                break;
            }
        }
        assert!(asked);
        assert_eq!(c.session.auth_tag(), Some("t1"));
        let (tag, unread) = c.session.hand_over().unwrap();
        assert_eq!(tag, "t1");
        assert_eq!(unread, b"t2 SELECT INBOX\r\nt3 NOOP\r\n");
        c.session.feed(b"t4 NOOP\r\n");
        assert_eq!(
            c.session.poll(),
            None,
            "the session is over and silent"
        );
        assert!(c.session.is_closed());
        assert_eq!(c.session.hand_over(), None);
    }
}

transcript! {
    /// RFC 3501 6.3.9: `LSUB "" box/%` with only `box/a/b` subscribed lists `box/a` as
    /// \Noselect; RFC 5258 3.5: `LIST (SUBSCRIBED RECURSIVEMATCH)` lists an unsubscribed parent
    /// of a subscribed child the pattern does not reach with CHILDINFO ("SUBSCRIBED").
    fn subscribed_children_show_their_unsubscribed_parents() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        c.send("a CREATE box/a/b\r\n");
        c.send("b SUBSCRIBE box/a/b\r\n");
        assert_eq!(
            c.send("c LSUB \"\" box/%\r\n"),
            "* LSUB (\\Noselect) \"/\" box/a\r\nc OK LSUB completed\r\n"
        );
        assert_eq!(
            c.send("d LSUB \"\" %\r\n"),
            "* LSUB (\\Noselect) \"/\" box\r\nd OK LSUB completed\r\n"
        );
        // `*` reaches the subscribed name itself: no stand-in for its parents.
        assert_eq!(
            c.send("e LSUB \"\" box/*\r\n"),
            "* LSUB () \"/\" box/a/b\r\ne OK LSUB completed\r\n"
        );
        assert_eq!(
            c.send("f LIST (SUBSCRIBED RECURSIVEMATCH) \"\" %\r\n"),
            "* LIST (\\HasChildren) \"/\" box (\"CHILDINFO\" (\"SUBSCRIBED\"))\r\nf OK LIST completed\r\n"
        );
        c.send("g SUBSCRIBE box\r\n");
        assert_eq!(
            c.send("h LIST (SUBSCRIBED RECURSIVEMATCH) \"\" %\r\n"),
            "* LIST (\\HasChildren \\Subscribed) \"/\" box (\"CHILDINFO\" (\"SUBSCRIBED\"))\r\n\
             h OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("i LIST (SUBSCRIBED) \"\" %\r\n"),
            "* LIST (\\HasChildren \\Subscribed) \"/\" box\r\ni OK LIST completed\r\n"
        );
    }
}

transcript! {
    /// RFC 3501 6.4.4 SEARCH TO matches the To field as written, group names included.
    fn search_to_finds_a_group_by_name() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        c.send("s SELECT INBOX\r\n");
        let message = "To: friends: b@x.example, c@x.example;\r\nSubject: g\r\n\r\nx\r\n";
        c.send(&format!(
            "a APPEND INBOX {{{}+}}\r\n{message}\r\n",
            message.len()
        ));
        let other = "To: d@x.example\r\nSubject: h\r\n\r\nx\r\n";
        c.send(&format!(
            "b APPEND INBOX {{{}+}}\r\n{other}\r\n",
            other.len()
        ));
        assert_eq!(
            c.send("c SEARCH TO friends\r\n"),
            "* SEARCH 1\r\nc OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("d SEARCH TO c@x.example\r\n"),
            "* SEARCH 1\r\nd OK SEARCH completed\r\n"
        );
    }
}

transcript! {
    /// RFC 5256 SORT and THREAD=ORDEREDSUBJECT, RFC 5957 DISPLAYFROM, over the summaries.
    fn sort_and_thread_by_subject() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        c.send("s SELECT INBOX\r\n");
        let messages = [
            // 1
            "From: Zed <a@x.example>\r\nTo: m@x.example\r\nCc: q@x.example\r\n\
             Date: Tue, 03 Jan 2023 10:00:00 +0000\r\nSubject: Re: plans\r\n\r\nxxxxxxxxxx\r\n",
            // 2
            "From: b@x.example\r\nTo: k@x.example\r\nDate: Sun, 01 Jan 2023 10:00:00 +0000\r\n\
             Subject: plans\r\n\r\nx\r\n",
            // 3: no Date: the internal date (now) counts, the latest.
            "From: \"Amy\" <c@x.example>\r\nTo: a@x.example\r\nCc: p@x.example\r\n\
             Subject: [list] lunch\r\n\r\nxxxxx\r\n",
            // 4
            "From: d@x.example\r\nTo: z@x.example\r\nDate: Mon, 02 Jan 2023 10:00:00 +0000\r\n\
             Subject: Fwd: [list] Re: plans (fwd)\r\n\r\nxxx\r\n",
        ];
        for (i, m) in messages.iter().enumerate() {
            let out = c.send(&format!("a{i} APPEND INBOX {{{}+}}\r\n{m}\r\n", m.len()));
            assert!(out.contains("OK"), "{out}");
        }
        let sort = |c: &mut Client, keys: &str| {
            let out = c.send(&format!("x SORT ({keys}) UTF-8 ALL\r\n"));
            out.lines().next().unwrap().to_string()
        };
        assert_eq!(sort(&mut c, "DATE"), "* SORT 2 4 1 3");
        assert_eq!(sort(&mut c, "REVERSE DATE"), "* SORT 3 1 4 2");
        assert_eq!(sort(&mut c, "ARRIVAL"), "* SORT 1 2 3 4");
        // 132, 96, 93 and 120 bytes.
        assert_eq!(sort(&mut c, "SIZE"), "* SORT 3 2 4 1");
        // Base subjects: lunch, plans, plans, plans; ties by sequence number.
        assert_eq!(sort(&mut c, "SUBJECT"), "* SORT 3 1 2 4");
        assert_eq!(sort(&mut c, "SUBJECT REVERSE DATE"), "* SORT 3 1 4 2");
        // The first address's mailbox: a, b, c, d; To: m, k, a, z; Cc: q, "", p, "".
        assert_eq!(sort(&mut c, "FROM"), "* SORT 1 2 3 4");
        assert_eq!(sort(&mut c, "TO"), "* SORT 3 2 1 4");
        assert_eq!(sort(&mut c, "CC"), "* SORT 2 4 3 1");
        // DISPLAYFROM: Zed, b@x.example, Amy, d@x.example.
        assert_eq!(sort(&mut c, "DISPLAYFROM"), "* SORT 3 2 4 1");
        assert_eq!(
            c.send("u UID SORT (REVERSE SIZE) US-ASCII SUBJECT plans\r\n"),
            "* SORT 1 4 2\r\nu OK UID SORT completed\r\n"
        );
        assert_eq!(
            c.send("b SORT (DATE) KOI8-R ALL\r\n"),
            "b NO [BADCHARSET (US-ASCII UTF-8)] Unsupported charset\r\n"
        );
        // Threads: "plans" (first sent: 2, then 4 and 1 as its children), "lunch" (3).
        assert_eq!(
            c.send("t THREAD ORDEREDSUBJECT UTF-8 ALL\r\n"),
            "* THREAD (2 (4)(1))(3)\r\nt OK THREAD completed\r\n"
        );
        assert_eq!(
            c.send("t2 UID THREAD ORDEREDSUBJECT UTF-8 NOT FROM d@x\r\n"),
            "* THREAD (2 1)(3)\r\nt2 OK UID THREAD completed\r\n"
        );
        assert!(
            c.send("c CAPABILITY\r\n")
                .contains(" SORT SORT=DISPLAY THREAD=ORDEREDSUBJECT")
        );
    }
}

transcript! {
    /// RFC 5256 3 THREAD=REFERENCES: parents from References (or In-Reply-To), a missing
    /// parent's only child promoted, threads of one base subject merged, siblings by sent date.
    fn thread_by_references() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        c.send("s SELECT INBOX\r\n");
        let message = |id: u32, refs: &str, subject: &str, day: u32| {
            format!(
                "Message-ID: <{id}@x>\r\n{refs}Subject: {subject}\r\n\
                 Date: {day:02} Jan 2023 10:00:00 +0000\r\n\r\nx\r\n"
            )
        };
        let messages = [
            message(1, "", "plans", 1),
            message(2, "In-Reply-To: <1@x>\r\n", "Re: plans", 2),
            message(3, "References: <1@x> <2@x>\r\n", "Re: plans", 3),
            message(4, "References: <1@x>\r\n", "Re: plans", 4),
            message(5, "", "lunch", 5),
            message(6, "References: <missing@x>\r\n", "Re: lunch", 6),
            message(7, "", "other", 7),
            // Each names the other: no loop.
            message(8, "References: <9@x>\r\n", "loop", 8),
            message(9, "References: <8@x>\r\n", "loop", 9),
        ];
        for (i, m) in messages.iter().enumerate() {
            let out = c.send(&format!("a{i} APPEND INBOX {{{}+}}\r\n{m}\r\n", m.len()));
            assert!(out.contains("OK"), "{out}");
        }
        assert_eq!(
            c.send("t THREAD REFERENCES UTF-8 ALL\r\n"),
            // 8 came first and took 9 (a dummy then) as its parent; 9 naming 8 would be a loop.
            "* THREAD (1 (2 3)(4))(5 6)(7)(9 8)\r\nt OK THREAD completed\r\n"
        );
        // Without message 1: its container is a dummy with two children, kept at the top.
        assert_eq!(
            c.send("u THREAD REFERENCES UTF-8 2:4\r\n"),
            "* THREAD ((2 3)(4))\r\nu OK THREAD completed\r\n"
        );
        assert!(c.send("c CAPABILITY\r\n").contains(" THREAD=REFERENCES"));
    }
}

transcript! {
    /// RFC 4978: COMPRESS=DEFLATE after login only, once; the answer goes in plain, then the
    /// shell compresses.
    fn compress_deflate_once_after_login() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        assert!(!c.send("a CAPABILITY\r\n").contains("COMPRESS"));
        assert_eq!(c.send("b COMPRESS DEFLATE\r\n"), "b BAD Log in first\r\n");
        c.send("l LOGIN bob secret\r\n");
        assert!(c.send("a CAPABILITY\r\n").contains(" COMPRESS=DEFLATE"));
        assert_eq!(
            c.send("c COMPRESS DEFLATE\r\nx NOOP\r\n"),
            "c OK DEFLATE active\r\n",
            "what came after the command was dropped"
        );
        assert!(c.compressed);
        assert_eq!(
            c.send("d COMPRESS DEFLATE\r\n"),
            "d NO [COMPRESSIONACTIVE] DEFLATE active already\r\n"
        );
        // The shell bounds how many connections are compressed: past it, NO [LIMIT] and the
        // connection goes on uncompressed.
        let mut full = Client::login(&store, "bob");
        full.compress_refused = true;
        assert_eq!(
            full.send("e COMPRESS DEFLATE\r\n"),
            "e NO [LIMIT] Too many compressed connections, try later\r\n"
        );
        assert!(!full.compressed);
        assert_eq!(full.send("f NOOP\r\n"), "f OK NOOP completed\r\n");
    }
}

transcript! {
    /// RFC 3501 5.1.3 and RFC 6855 3: the store keeps names in UTF-8; a client that has not
    /// enabled UTF8=ACCEPT sends and reads modified UTF-7, one that has reads UTF-8.
    fn mailbox_names_are_utf8_in_the_store_and_modified_utf7_for_old_clients() {
        let store = new_store();
        let mut old = Client::login(&store, "bob");
        assert_eq!(
            old.send("a CREATE Entw&APw-rfe\r\n"),
            "a OK CREATE completed\r\n"
        );
        assert!(store.list_folders("bob").contains(&"Entwürfe".to_string()));
        assert_eq!(
            old.send("b CREATE \"Entw&APx-rfe\"\r\n"),
            "b NO [CANNOT] Mailbox name is not valid modified UTF-7\r\n"
        );
        let mut new = Client::login(&store, "bob");
        assert!(new.send("c CAPABILITY\r\n").contains(" UTF8=ACCEPT"));
        assert_eq!(
            new.send("d ENABLE UTF8=ACCEPT\r\n"),
            "* ENABLED UTF8=ACCEPT\r\nd OK ENABLE completed\r\n"
        );
        assert_eq!(
            new.send("e CREATE \"台北/日本語\"\r\n"),
            "e OK CREATE completed\r\n"
        );
        assert_eq!(
            new.send("f LIST \"\" \"台北*\"\r\n"),
            "* LIST (\\HasChildren) \"/\" \"台北\"\r\n\
             * LIST (\\HasNoChildren) \"/\" \"台北/日本語\"\r\n\
             f OK LIST completed\r\n"
        );
        assert_eq!(
            new.send("g LIST \"\" Entw*\r\n"),
            "* LIST (\\HasNoChildren) \"/\" \"Entwürfe\"\r\ng OK LIST completed\r\n"
        );
        // The old client sees the same folders in modified UTF-7 (RFC 3501 5.1.3's example).
        assert_eq!(
            old.send("h LIST \"\" &U,BTFw-*\r\n"),
            "* LIST (\\HasChildren) \"/\" &U,BTFw-\r\n\
             * LIST (\\HasNoChildren) \"/\" &U,BTFw-/&ZeVnLIqe-\r\n\
             h OK LIST completed\r\n"
        );
        assert_eq!(
            old.send("i STATUS &U,BTFw-/&ZeVnLIqe- (MESSAGES)\r\n"),
            "* STATUS &U,BTFw-/&ZeVnLIqe- (MESSAGES 0)\r\ni OK STATUS completed\r\n"
        );
        // RFC 6855 4: APPEND's UTF8 data item, a literal8.
        let message = "Subject: Grüße\r\n\r\nhi\r\n";
        assert_eq!(
            new.send(&format!(
                "j APPEND \"台北/日本語\" UTF8 (~{{{}+}}\r\n{message})\r\n",
                message.len()
            )),
            "j OK [APPENDUID V 1] APPEND completed\r\n"
        );
        assert_eq!(
            old.send("k APPEND &U,BTFw- UTF8 ({3+}\r\nabc)\r\n"),
            "k BAD UTF8 append data is a literal8\r\n"
        );
    }
}

transcript! {
    /// Folders a round-1 server stored under their modified UTF-7 names are renamed to UTF-8
    /// at the owner's next login, children with them.
    fn modified_utf7_names_stored_by_old_versions_become_utf8_at_login() {
        let store = new_store();
        store.create_folder("bob", "INBOX").unwrap();
        store.create_folder("bob", "Entw&APw-rfe").unwrap();
        store.create_folder("bob", "Entw&APw-rfe/&U,BTFw-").unwrap();
        store.create_folder("bob", "A&-B").unwrap();
        store.create_folder("bob", "Not&valid").unwrap();
        let _c = Client::login(&store, "bob");
        let folders = store.list_folders("bob");
        for name in ["Entwürfe", "Entwürfe/台北", "A&B", "Not&valid"] {
            assert!(folders.contains(&name.to_string()), "{name} in {folders:?}");
        }
        assert!(!folders.iter().any(|f| f.contains("&APw-")), "{folders:?}");
    }
}

transcript! {
    /// RFC 5182 SEARCHRES: SEARCH RETURN (SAVE) keeps the result as `$` for FETCH, STORE,
    /// COPY, MOVE, UID EXPUNGE and SEARCH; SAVE alone gives no ESEARCH; SAVE with MIN keeps
    /// the minimum only; a failed SAVE empties `$`; a new SELECT forgets it.
    fn searchres_saves_a_result_for_later_commands() {
        let store = new_store();
        deliver(&store, "bob", 5);
        let mut c = Client::login(&store, "bob");
        assert!(c.send("c CAPABILITY\r\n").contains(" SEARCHRES"));
        c.send("s SELECT INBOX\r\n");
        // Before any SAVE, `$` names nothing.
        assert_eq!(c.send("a FETCH $ (UID)\r\n"), "a OK FETCH completed\r\n");
        assert_eq!(
            c.send("b UID SEARCH RETURN (SAVE) UID 2:4\r\n"),
            "b OK UID SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("d FETCH $ (UID)\r\n"),
            "* 2 FETCH (UID 2)\r\n* 3 FETCH (UID 3)\r\n* 4 FETCH (UID 4)\r\nd OK FETCH completed\r\n"
        );
        assert_eq!(
            c.send("e STORE $ +FLAGS.SILENT (\\Flagged)\r\n"),
            "e OK STORE completed\r\n"
        );
        assert_eq!(
            c.send("f SEARCH FLAGGED NOT $\r\n"),
            "* SEARCH\r\nf OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("g SEARCH OR $ 5 NOT SUBJECT $\r\n"),
            "* SEARCH 2 3 4 5\r\ng OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("h UID COPY $ Archive\r\n"),
            "h OK [COPYUID V 2:4 1:3] UID COPY completed\r\n"
        );
        // Expunged messages leave `$`.
        c.send("i0 UID STORE 3 +FLAGS.SILENT (\\Deleted)\r\n");
        assert_eq!(
            c.send("i UID EXPUNGE 3\r\n"),
            "* 3 EXPUNGE\r\ni OK UID EXPUNGE completed\r\n"
        );
        assert_eq!(
            c.send("j UID FETCH $ (FLAGS)\r\n"),
            "* 2 FETCH (UID 2 FLAGS (\\Recent \\Flagged))\r\n\
             * 3 FETCH (UID 4 FLAGS (\\Recent \\Flagged))\r\n\
             j OK UID FETCH completed\r\n"
        );
        // SAVE with MIN keeps the minimum; the ESEARCH still answers MIN.
        assert_eq!(
            c.send("k SEARCH RETURN (SAVE MIN) FLAGGED\r\n"),
            "* ESEARCH (TAG \"k\") MIN 2\r\nk OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("l UID SEARCH $\r\n"),
            "* SEARCH 2\r\nl OK UID SEARCH completed\r\n"
        );
        // A failed SAVE empties it.
        assert!(c.send("m SEARCH RETURN (SAVE) NOSUCHKEY\r\n").starts_with("m BAD"));
        assert_eq!(c.send("n SEARCH $\r\n"), "* SEARCH\r\nn OK SEARCH completed\r\n");
        c.send("o SEARCH RETURN (SAVE) ALL\r\n");
        c.send("p SELECT INBOX\r\n");
        assert_eq!(c.send("q SEARCH $\r\n"), "* SEARCH\r\nq OK SEARCH completed\r\n");
    }
}

transcript! {
    /// RFC 5267 3.2 ESORT and 4.4 PARTIAL: SORT RETURN answers ESEARCH in sort order, MIN
    /// and MAX the first and last of it; PARTIAL picks positions of the ordered results.
    fn esort_and_partial_results() {
        let store = new_store();
        for (subject, date) in [("b", 3), ("a", 1), ("c", 2)] {
            let mut m = message(subject, "x\r\n");
            m.internal_date = date;
            store.append("bob", "INBOX", m).unwrap();
        }
        let mut c = Client::login(&store, "bob");
        let caps = c.send("c CAPABILITY\r\n");
        assert!(caps.contains(" ESORT") && caps.contains(" CONTEXT=SEARCH"), "{caps}");
        c.send("s SELECT INBOX\r\n");
        assert_eq!(
            c.send("a SORT RETURN (MIN MAX COUNT ALL) (SUBJECT) UTF-8 ALL\r\n"),
            "* ESEARCH (TAG \"a\") MIN 2 MAX 3 COUNT 3 ALL 2,1,3\r\na OK SORT completed\r\n"
        );
        assert_eq!(
            c.send("b UID SORT RETURN () (REVERSE ARRIVAL) UTF-8 ALL\r\n"),
            "* ESEARCH (TAG \"b\") UID ALL 1,3,2\r\nb OK UID SORT completed\r\n"
        );
        assert_eq!(
            c.send("d UID SORT RETURN (PARTIAL 2:5) (SUBJECT) UTF-8 ALL\r\n"),
            "* ESEARCH (TAG \"d\") UID PARTIAL (2:5 1,3)\r\nd OK UID SORT completed\r\n"
        );
        assert_eq!(
            c.send("e SEARCH RETURN (PARTIAL 1:2 COUNT) ALL\r\n"),
            "* ESEARCH (TAG \"e\") PARTIAL (1:2 1:2) COUNT 3\r\ne OK SEARCH completed\r\n"
        );
        assert_eq!(
            c.send("f SEARCH RETURN (PARTIAL 4:9) ALL\r\n"),
            "* ESEARCH (TAG \"f\") PARTIAL (4:9 NIL)\r\nf OK SEARCH completed\r\n"
        );
        assert!(c.send("g SEARCH RETURN (PARTIAL 0:2) ALL\r\n").starts_with("g BAD"));
    }
}

transcript! {
    /// RFC 5267 4.3: SEARCH RETURN (UPDATE) keeps the client told as another session's
    /// flags, deliveries and expunges change the result: REMOVEFROM before EXPUNGE, ADDTO after
    /// EXISTS and FETCH; CANCELUPDATE ends it; a tag in use is refused; past
    /// search_updates_max, NOUPDATE.
    fn context_search_updates_follow_the_folder() {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        // IMAP4rev2: no \Recent to follow here.
        a.send("e ENABLE IMAP4rev2\r\ns SELECT INBOX\r\n");
        b.send("e ENABLE IMAP4rev2\r\ns SELECT INBOX\r\n");
        assert_eq!(
            a.send("a1 UID SEARCH RETURN (UPDATE COUNT) UNSEEN\r\n"),
            "* ESEARCH (TAG \"a1\") UID COUNT 3\r\na1 OK UID SEARCH completed\r\n"
        );
        assert_eq!(
            a.send("a2 SEARCH RETURN (UPDATE) UNSEEN\r\n"),
            "* ESEARCH (TAG \"a2\") ALL 1:3\r\na2 OK SEARCH completed\r\n"
        );
        assert!(a.send("a1 SEARCH RETURN (UPDATE) ALL\r\n").starts_with("a1 BAD"));
        b.send("b1 STORE 2 +FLAGS (\\Seen)\r\n");
        assert_eq!(
            a.send("n1 NOOP\r\n"),
            "* 2 FETCH (UID 2 FLAGS (\\Seen))\r\n\
             * ESEARCH (TAG \"a1\") UID REMOVEFROM (0 2)\r\n\
             * ESEARCH (TAG \"a2\") REMOVEFROM (0 2)\r\n\
             n1 OK NOOP completed\r\n"
        );
        deliver(&store, "bob", 1);
        assert_eq!(
            a.send("n2 NOOP\r\n"),
            "* 4 EXISTS\r\n\
             * ESEARCH (TAG \"a1\") UID ADDTO (0 4)\r\n\
             * ESEARCH (TAG \"a2\") ADDTO (0 4)\r\n\
             n2 OK NOOP completed\r\n"
        );
        b.send("b2 STORE 3 +FLAGS.SILENT (\\Deleted)\r\nb3 EXPUNGE\r\n");
        assert_eq!(
            a.send("n3 NOOP\r\n"),
            "* ESEARCH (TAG \"a1\") UID REMOVEFROM (0 3)\r\n\
             * ESEARCH (TAG \"a2\") REMOVEFROM (0 3)\r\n\
             * 3 EXPUNGE\r\n\
             n3 OK NOOP completed\r\n"
        );
        assert_eq!(
            a.send("c1 CANCELUPDATE \"a1\" \"a2\"\r\n"),
            "c1 OK Updates cancelled\r\n"
        );
        assert_eq!(a.send("c2 CANCELUPDATE \"a1\"\r\n"), "c2 NO Unknown tag\r\n");
        b.send("b4 STORE 1 +FLAGS (\\Seen)\r\n");
        assert_eq!(
            a.send("n4 NOOP\r\n"),
            "* 1 FETCH (UID 1 FLAGS (\\Seen))\r\nn4 OK NOOP completed\r\n"
        );
        for i in 0..10 {
            a.send(&format!("u{i} SEARCH RETURN (UPDATE) ALL\r\n"));
        }
        assert_eq!(
            a.send("u10 SEARCH RETURN (UPDATE COUNT) ALL\r\n"),
            "* NO [NOUPDATE \"u10\"] Too many updating searches (search_updates_max)\r\n\
             * ESEARCH (TAG \"u10\") COUNT 3\r\nu10 OK SEARCH completed\r\n"
        );
        // Selecting again ends every update.
        a.send("s2 SELECT INBOX\r\n");
        assert!(a.send("v SEARCH RETURN (UPDATE) ALL\r\n").contains("v OK"));
    }
}

transcript! {
    /// RFC 6154 3 CREATE-SPECIAL-USE: CREATE gives a folder its special use, LIST shows it,
    /// RENAME carries it, DELETE forgets it; an attribute the server cannot give is
    /// NO [USEATTR] and nothing is created.
    fn create_gives_a_folder_its_special_use() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        assert!(c.send("c CAPABILITY\r\n").contains(" CREATE-SPECIAL-USE"));
        assert_eq!(
            c.send("a CREATE \"Sent Items\" (USE (\\Sent))\r\n"),
            "a OK CREATE completed\r\n"
        );
        assert_eq!(
            c.send("b LIST \"\" \"Sent*\"\r\n"),
            "* LIST (\\HasNoChildren \\Sent) \"/\" Sent\r\n\
             * LIST (\\HasNoChildren \\Sent) \"/\" \"Sent Items\"\r\n\
             b OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("d RENAME \"Sent Items\" Outbox/Sent\r\n"),
            "d OK RENAME completed\r\n"
        );
        assert_eq!(
            c.send("e LIST (SPECIAL-USE) \"\" Outbox*\r\n"),
            "* LIST (\\HasNoChildren \\Sent) \"/\" Outbox/Sent\r\ne OK LIST completed\r\n"
        );
        assert_eq!(c.send("f DELETE Outbox/Sent\r\n"), "f OK DELETE completed\r\n");
        c.send("g CREATE Outbox/Sent\r\n");
        assert_eq!(
            c.send("h LIST \"\" Outbox/*\r\n"),
            "* LIST (\\HasNoChildren) \"/\" Outbox/Sent\r\nh OK LIST completed\r\n"
        );
        assert_eq!(
            c.send("i CREATE Everything (USE (\\All))\r\n"),
            "i NO [USEATTR] \\All cannot be given to a folder here\r\n"
        );
        assert_eq!(
            c.send("j CREATE Odd (USE (\\Important))\r\n"),
            "j NO [USEATTR] \\Important cannot be given to a folder here\r\n"
        );
        assert!(!store.list_folders("bob").iter().any(|f| f == "Everything" || f == "Odd"));
        assert!(c.send("k CREATE Odd (COLOR (red))\r\n").starts_with("k BAD"));
        assert_eq!(
            c.send("l CREATE Bin (USE (\\trash \\Junk))\r\n"),
            "l OK CREATE completed\r\n"
        );
        assert_eq!(
            c.send("m LIST \"\" Bin\r\n"),
            "* LIST (\\HasNoChildren \\Junk \\Trash) \"/\" Bin\r\nm OK LIST completed\r\n"
        );
    }
}

transcript! {
    /// A session asks for the store only for what reads or changes mail: nothing before login
    /// does (CAPABILITY, NOOP, ID, a refused LOGIN), nor an ENABLE or a CAPABILITY with no
    /// folder selected; the login itself does (the default folders), and so does a NOOP in a
    /// selected folder (its updates).
    fn only_what_touches_mail_asks_for_the_store() {
        let store = new_store();
        let mut c = Client::new(&store, test_config());
        c.greeting();
        let out = c.send("a CAPABILITY\r\nb NOOP\r\nc ID NIL\r\nd LOGIN bob wrong\r\n");
        assert!(out.contains("d NO [AUTHENTICATIONFAILED]"), "{out}");
        assert_eq!(c.storage_steps, 0, "{out}");
        let out = c.send("e LOGIN bob secret\r\n");
        assert!(out.contains("e OK"), "{out}");
        assert_eq!(c.storage_steps, 1);
        c.send("f ENABLE CONDSTORE\r\ng CAPABILITY\r\n");
        assert_eq!(c.storage_steps, 1);
        c.send("h SELECT INBOX\r\n");
        let steps = c.storage_steps;
        c.send("i NOOP\r\n");
        assert_eq!(c.storage_steps, steps + 1);
    }
}

transcript! {
    /// The session reads no clock: an APPEND without a date-time gets the time the shell
    /// passes to `Session::run` as its INTERNALDATE (RFC 9051 6.3.12).
    fn an_append_without_a_date_gets_the_time_the_shell_passes() {
        let store = new_store();
        let mut c = Client::login(&store, "bob");
        c.now = Some(837_571_465);
        let out = c.send("a APPEND INBOX {5+}\r\nhello\r\n");
        assert!(out.contains("a OK [APPENDUID"), "{out}");
        c.send("b SELECT INBOX\r\n");
        assert_eq!(
            c.send("c FETCH 1 INTERNALDATE\r\n"),
            "* 1 FETCH (INTERNALDATE \"17-Jul-1996 02:44:25 +0000\")\r\nc OK FETCH completed\r\n"
        );
    }
}
