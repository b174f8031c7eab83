//! Two sessions on one folder: each sees the other's appends, flag changes and expunges at
//! the moments RFC 9051 allows, including in IDLE.

use super::*;

transcript! {
    fn appends_flags_and_expunges_reach_the_other_session() {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        a.send("s SELECT INBOX\r\n");
        b.send("s SELECT INBOX\r\n");
        assert!(
            a.send("x APPEND INBOX {4+}\r\nnew!\r\n")
                .contains("* 4 EXISTS")
        );
        assert_eq!(
            b.send("n NOOP\r\n"),
            "* 4 EXISTS\r\nn OK NOOP completed\r\n"
        );
        a.send("y STORE 2 +FLAGS (\\Flagged)\r\n");
        assert_eq!(
            b.send("n NOOP\r\n"),
            "* 2 FETCH (UID 2 FLAGS (\\Flagged))\r\nn OK NOOP completed\r\n"
        );
        a.send("z STORE 1 +FLAGS.SILENT (\\Deleted)\r\n");
        assert_eq!(
            a.send("e EXPUNGE\r\n"),
            "* 1 EXPUNGE\r\ne OK EXPUNGE completed\r\n"
        );
        // No EXPUNGE during FETCH by sequence number: b still numbers the old way.
        assert_eq!(
            b.send("f FETCH 1 (UID)\r\n"),
            "* 1 FETCH (UID 1)\r\nf OK FETCH completed\r\n"
        );
        assert_eq!(
            b.send("n NOOP\r\n"),
            "* 1 EXPUNGE\r\nn OK NOOP completed\r\n"
        );
        assert_eq!(
            b.send("g FETCH 1 (UID)\r\n"),
            "* 1 FETCH (UID 2)\r\ng OK FETCH completed\r\n"
        );
    }
}

transcript! {
    fn idle_pushes_changes_and_ends_with_done() {
        let store = new_store();
        deliver(&store, "bob", 1);
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        b.send("s SELECT INBOX\r\n");
        assert_eq!(b.send("i IDLE\r\n"), "+ idling\r\n");
        assert!(b.session.is_idle());
        deliver(&store, "bob", 1);
        // The shell polls again when the store says the user's mail changed.
        // RFC 3501 7.3.2: the new message is recent to b, the first session told of it.
        assert_eq!(b.send(""), "* 2 EXISTS\r\n* 2 RECENT\r\n");
        a.send("s SELECT INBOX\r\n");
        a.send("t STORE 1 +FLAGS.SILENT (\\Seen)\r\n");
        assert_eq!(b.send(""), "* 1 FETCH (UID 1 FLAGS (\\Recent \\Seen))\r\n");
        a.send("u STORE 2 +FLAGS.SILENT (\\Deleted)\r\n");
        a.send("v EXPUNGE\r\n");
        assert_eq!(b.send(""), "* 2 EXPUNGE\r\n");
        assert_eq!(b.send("DONE\r\n"), "i OK IDLE terminated\r\n");
        assert!(!b.session.is_idle());
        assert_eq!(b.send("j IDLE\r\n"), "+ idling\r\n");
        assert_eq!(b.send("NOPE\r\n"), "j BAD Expected DONE\r\n");
    }
}

transcript! {
    // What the shell parks (RFC 2177 IDLE with nothing in flight) wakes as it was: its
    // folder, what it enabled, its `\Recent` and saved search, its tag and its deadline.
    fn a_hibernated_idle_session_wakes_as_it_was() {
        let store = new_store();
        deliver(&store, "bob", 2);
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        b.send("e ENABLE CONDSTORE\r\n");
        b.send("s SELECT INBOX\r\n");
        b.send("r SEARCH RETURN (SAVE) 2\r\n");
        // Not in IDLE: nothing to park.
        assert!(!b.hibernate_and_wake());
        assert_eq!(b.send("i IDLE\r\n"), "+ idling\r\n");
        let deadlines = b.session.deadlines();
        // Part of a line in: its clock runs, so the session stays as it is.
        b.session.feed(b"DO");
        assert!(!b.hibernate_and_wake());
        assert_eq!(b.send("NE\r\n"), "i OK IDLE terminated\r\n");
        assert_eq!(b.send("j IDLE\r\n"), "+ idling\r\n");
        let deadlines_j = b.session.deadlines();
        assert_ne!(deadlines.phase, deadlines_j.phase, "a new IDLE, a new step");
        assert!(b.hibernate_and_wake());
        assert!(b.session.is_idle());
        assert_eq!(b.session.deadlines().phase, deadlines_j.phase);
        a.send("s SELECT INBOX\r\n");
        a.send("t STORE 1 +FLAGS.SILENT (\\Seen)\r\n");
        deliver(&store, "bob", 1);
        // RFC 7162 3.1: MODSEQ stays on; RFC 3501 2.3.2: the new message is recent here.
        let woke = b.send("");
        assert!(woke.contains("* 3 EXISTS\r\n* 3 RECENT\r\n"), "{woke}");
        assert!(
            woke.contains("* 1 FETCH (UID 1 FLAGS (\\Recent \\Seen) MODSEQ ("),
            "{woke}"
        );
        assert_eq!(b.send("DONE\r\n"), "j OK IDLE terminated\r\n");
        // RFC 5182: `$` survived.
        assert_eq!(
            b.send("f FETCH $ (UID)\r\n"),
            "* 2 FETCH (UID 2 MODSEQ (3))\r\nf OK FETCH completed\r\n"
        );
        // A session that is not logged in never hibernates.
        let mut c = Client::new(&store, test_config());
        c.greeting();
        assert!(!c.hibernate_and_wake());
    }
}

transcript! {
    fn a_deleted_selected_folder_ends_the_session() {
        let store = new_store();
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        a.send("c CREATE Work\r\n");
        b.send("s SELECT Work\r\n");
        a.send("d DELETE Work\r\n");
        assert_eq!(
            b.send("n NOOP\r\n"),
            "* BYE Selected mailbox was deleted\r\n"
        );
        assert!(b.closed);
    }
}

transcript! {
    fn sessions_share_a_folder_view_until_one_changes_it() {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        a.send("s SELECT INBOX\r\n");
        b.send("s SELECT INBOX\r\n");
        let (sa, sb) = (
            a.session.selected.as_ref().unwrap(),
            b.session.selected.as_ref().unwrap(),
        );
        assert!(
            Arc::ptr_eq(&sa.messages, &sb.messages),
            "the second SELECT reused the view"
        );
        a.send("t STORE 1 +FLAGS.SILENT (\\Flagged)\r\n");
        // b's numbering and flags are untouched until it is told.
        assert_eq!(
            b.send("f FETCH 1 (FLAGS)\r\n"),
            "* 1 FETCH (FLAGS ())\r\n* 1 FETCH (UID 1 FLAGS (\\Flagged))\r\nf OK FETCH completed\r\n"
        );
        // A changed folder is copied again, not served stale.
        let mut c = Client::login(&store, "bob");
        assert!(c.send("s SELECT INBOX\r\n").contains("* 3 EXISTS"));
        assert_eq!(
            c.send("f FETCH 1 (FLAGS)\r\n"),
            "* 1 FETCH (FLAGS (\\Flagged))\r\nf OK FETCH completed\r\n"
        );
    }
}

transcript! {
    /// RFC 3501 7.2.6, RFC 9051 7.3.5: a keyword introduced by a STORE (here or in another
    /// session) or an APPEND is announced in an untagged FLAGS (and PERMANENTFLAGS) before any
    /// FETCH response uses it.
    fn a_new_keyword_is_announced_before_it_is_used() {
        let store = new_store();
        deliver(&store, "bob", 2);
        let mut a = Client::login(&store, "bob");
        let mut b = Client::login(&store, "bob");
        a.send("s SELECT INBOX\r\n");
        b.send("s SELECT INBOX\r\n");
        const FLAGS: &str = "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work)\r\n\
                             * OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Work \\*)] Flags permitted\r\n";
        assert_eq!(
            a.send("t STORE 1 +FLAGS ($Work)\r\n"),
            // a selected first: the messages are recent to a, not to b.
            format!("{FLAGS}* 1 FETCH (FLAGS (\\Recent $Work))\r\nt OK STORE completed\r\n")
        );
        // Known now: not announced again.
        assert_eq!(
            a.send("u STORE 2 +FLAGS ($Work)\r\n"),
            "* 2 FETCH (FLAGS (\\Recent $Work))\r\nu OK STORE completed\r\n"
        );
        assert_eq!(
            b.send("n NOOP\r\n"),
            format!(
                "{FLAGS}* 1 FETCH (UID 1 FLAGS ($Work))\r\n* 2 FETCH (UID 2 FLAGS ($Work))\r\n\
                 n OK NOOP completed\r\n"
            )
        );
        // An APPEND with a keyword new to the folder: FLAGS before the EXISTS that brings it.
        a.send("x APPEND INBOX ($Later) {4+}\r\nnew!\r\n");
        let seen = b.send("n NOOP\r\n");
        let flags = seen.find("* FLAGS (").expect("a FLAGS update");
        assert!(
            seen[flags..].starts_with(
                "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Later $Work)\r\n"
            )
        );
        assert!(flags < seen.find("* 3 EXISTS").unwrap(), "{seen}");
        // SELECT names the folder's keywords in PERMANENTFLAGS too.
        assert!(b.send("s SELECT INBOX\r\n").contains(
            "* OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Later $Work \\*)]"
        ));
    }
}

transcript! {
    /// RFC 3501 2.3.2, 6.3.1, 6.3.2, 6.3.10, 6.4.4, 7.3.2: a message is \Recent to the first
    /// read-write session told of it only; EXAMINE and STATUS see recent messages without taking
    /// them; SEARCH RECENT, NEW and OLD follow; an IMAP4rev2 session neither sees nor takes them.
    fn recent_goes_to_the_first_session_only() {
        let store = new_store();
        deliver(&store, "bob", 2);
        let mut look = Client::login(&store, "bob");
        assert!(
            look.send("s STATUS INBOX (RECENT)\r\n")
                .starts_with("* STATUS INBOX (RECENT 2)")
        );
        // An EXAMINE sees them, and leaves them.
        assert!(look.send("e EXAMINE INBOX\r\n").contains("* 2 RECENT\r\n"));
        assert_eq!(
            look.send("f FETCH 1 (FLAGS)\r\n"),
            "* 1 FETCH (FLAGS (\\Recent))\r\nf OK FETCH completed\r\n"
        );
        // An IMAP4rev2 session: no \Recent, and it takes nothing.
        let mut rev2 = Client::login(&store, "bob");
        rev2.send("v ENABLE IMAP4rev2\r\n");
        assert!(!rev2.send("s SELECT INBOX\r\n").contains("RECENT"));
        assert_eq!(
            rev2.send("f FETCH 1 (FLAGS)\r\n"),
            "* 1 FETCH (FLAGS ())\r\nf OK FETCH completed\r\n"
        );
        // The first read-write SELECT takes them.
        let mut a = Client::login(&store, "bob");
        assert!(a.send("s SELECT INBOX\r\n").contains("* 2 RECENT\r\n"));
        a.send("t STORE 1 +FLAGS.SILENT (\\Seen)\r\n");
        assert_eq!(
            a.send("n SEARCH NEW\r\n"),
            "* SEARCH 2\r\nn OK SEARCH completed\r\n"
        );
        assert_eq!(
            a.send("r SEARCH RECENT\r\n"),
            "* SEARCH 1 2\r\nr OK SEARCH completed\r\n"
        );
        let mut b = Client::login(&store, "bob");
        assert!(b.send("s SELECT INBOX\r\n").contains("* 0 RECENT\r\n"));
        assert_eq!(
            b.send("o SEARCH OLD\r\n"),
            "* SEARCH 1 2\r\no OK SEARCH completed\r\n"
        );
        assert!(
            b.send("s STATUS INBOX (RECENT)\r\n")
                .starts_with("* STATUS INBOX (RECENT 0)")
        );
        // New mail: recent to the first selected session told of it, not to the other.
        deliver(&store, "bob", 1);
        assert_eq!(
            b.send("n NOOP\r\n"),
            "* 3 EXISTS\r\n* 1 RECENT\r\nn OK NOOP completed\r\n"
        );
        assert_eq!(
            a.send("n NOOP\r\n"),
            "* 3 EXISTS\r\nn OK NOOP completed\r\n"
        );
        assert_eq!(
            b.send("f FETCH 3 (FLAGS)\r\n"),
            "* 3 FETCH (FLAGS (\\Recent))\r\nf OK FETCH completed\r\n"
        );
        assert_eq!(
            a.send("f FETCH 3 (FLAGS)\r\n"),
            "* 3 FETCH (FLAGS ())\r\nf OK FETCH completed\r\n"
        );
        // \Recent cannot be stored.
        assert_eq!(
            a.send("x STORE 1 +FLAGS (\\Recent)\r\n"),
            "x BAD Cannot store flag \\Recent\r\n"
        );
    }
}

transcript! {
    /// RFC 7162 3.2: QRESYNC. ENABLE, SELECT with the client's state (VANISHED (EARLIER) and
    /// the changed flags), UID FETCH (CHANGEDSINCE VANISHED), and expunges seen by another
    /// session reported as VANISHED.
    fn qresync_resynchronises_after_expunges_elsewhere() {
        let store = new_store();
        deliver(&store, "bob", 5);
        let validity = store.status("bob", "INBOX").unwrap().uidvalidity;
        let since = store.status("bob", "INBOX").unwrap().highest_modseq;
        let mut a = Client::login(&store, "bob");
        assert_eq!(
            a.send("q SELECT INBOX (QRESYNC (1 1))\r\n"),
            "q BAD QRESYNC is not enabled\r\n"
        );
        assert_eq!(
            a.send("e ENABLE QRESYNC\r\n"),
            "* ENABLED QRESYNC\r\ne OK ENABLE completed\r\n"
        );
        a.send("s SELECT INBOX\r\n");
        let mut b = Client::login(&store, "bob");
        b.send("s SELECT INBOX\r\n");
        b.send("t STORE 2 +FLAGS.SILENT (\\Seen)\r\n");
        b.send("u STORE 4,5 +FLAGS.SILENT (\\Deleted)\r\n");
        b.send("x EXPUNGE\r\n");
        // a is told with VANISHED, not EXPUNGE; QRESYNC turned CONDSTORE on.
        let told = a.send("n NOOP\r\n");
        assert!(told.contains("* VANISHED 4:5\r\n"), "{told}");
        assert!(!told.contains("EXPUNGE"), "{told}");
        assert!(told.contains("FLAGS (\\Recent \\Seen) MODSEQ ("), "{told}");

        // A client that was away: its state was `since`, it knew UIDs 1:5.
        let mut c = Client::login(&store, "bob");
        c.send("e ENABLE QRESYNC\r\n");
        let out = c.send(&format!(
            "s SELECT INBOX (QRESYNC ({validity} {since} 1:5))\r\n"
        ));
        let vanished = out.find("* VANISHED (EARLIER) 4:5\r\n").expect(&out);
        let fetch = out
            .find("* 2 FETCH (UID 2 FLAGS (\\Seen) MODSEQ (")
            .expect(&out);
        assert!(vanished < fetch, "{out}");
        assert_eq!(
            out.matches(" FETCH ").count(),
            1,
            "only the changed message: {out}"
        );
        assert!(
            out.ends_with("s OK [READ-WRITE] SELECT completed\r\n"),
            "{out}"
        );
        // Another UIDVALIDITY: nothing to resynchronise from.
        let out = c.send("s SELECT INBOX (QRESYNC (1 1 1:5))\r\n");
        assert!(!out.contains("VANISHED") && !out.contains("FETCH"), "{out}");
        // UID FETCH with CHANGEDSINCE and VANISHED.
        assert_eq!(
            c.send(&format!(
                "f UID FETCH 1:* (FLAGS) (CHANGEDSINCE {since} VANISHED)\r\n"
            ))
            .lines()
            .next()
            .unwrap(),
            "* VANISHED (EARLIER) 4:5"
        );
        assert_eq!(
            c.send("g FETCH 1:* (FLAGS) (CHANGEDSINCE 1 VANISHED)\r\n"),
            "g BAD VANISHED needs UID FETCH\r\n"
        );
        assert_eq!(
            c.send("h UID FETCH 1:* (FLAGS) (VANISHED)\r\n"),
            "h BAD VANISHED needs CHANGEDSINCE\r\n"
        );
        assert!(c.send("c CAPABILITY\r\n").contains(" QRESYNC"));
    }
}

transcript! {
    /// In IDLE the session looks at the store only when the shell tells it the mail may have
    /// changed (`Session::mail_changed`, the server's observer): polling alone asks nothing.
    fn idle_looks_at_the_store_when_told_of_a_change() {
        let store = new_store();
        deliver(&store, "bob", 1);
        let mut b = Client::login(&store, "bob");
        b.send("s SELECT INBOX\r\n");
        assert_eq!(b.send("i IDLE\r\n"), "+ idling\r\n");
        deliver(&store, "bob", 1);
        assert_eq!(b.session.poll(), None);
        b.session.mail_changed();
        assert_eq!(b.session.poll(), Some(Event::Storage));
        assert_eq!(b.send(""), "* 2 EXISTS\r\n* 2 RECENT\r\n");
        assert_eq!(b.session.poll(), None);
    }
}
