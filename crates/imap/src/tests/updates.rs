//! Two sessions on one folder: each sees the other's appends, flag changes and expunges at
//! the moments RFC 9051 allows, including in IDLE.

use super::*;

#[test]
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

#[test]
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
    assert_eq!(b.send(""), "* 2 EXISTS\r\n");
    a.send("s SELECT INBOX\r\n");
    a.send("t STORE 1 +FLAGS.SILENT (\\Seen)\r\n");
    assert_eq!(b.send(""), "* 1 FETCH (UID 1 FLAGS (\\Seen))\r\n");
    a.send("u STORE 2 +FLAGS.SILENT (\\Deleted)\r\n");
    a.send("v EXPUNGE\r\n");
    assert_eq!(b.send(""), "* 2 EXPUNGE\r\n");
    assert_eq!(b.send("DONE\r\n"), "i OK IDLE terminated\r\n");
    assert!(!b.session.is_idle());
    assert_eq!(b.send("j IDLE\r\n"), "+ idling\r\n");
    assert_eq!(b.send("NOPE\r\n"), "j BAD Expected DONE\r\n");
}

#[test]
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

#[test]
fn sessions_share_a_folder_view_until_one_changes_it() {
    let store = new_store();
    deliver(&store, "bob", 3);
    let mut a = Client::login(&store, "bob");
    let mut b = Client::login(&store, "bob");
    b.views = a.views.clone();
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
    c.views = a.views.clone();
    assert!(c.send("s SELECT INBOX\r\n").contains("* 3 EXISTS"));
    assert_eq!(
        c.send("f FETCH 1 (FLAGS)\r\n"),
        "* 1 FETCH (FLAGS (\\Flagged))\r\nf OK FETCH completed\r\n"
    );
}

/// RFC 3501 7.2.6, RFC 9051 7.3.5: a keyword introduced by a STORE (here or in another
/// session) or an APPEND is announced in an untagged FLAGS (and PERMANENTFLAGS) before any
/// FETCH response uses it.
#[test]
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
        format!("{FLAGS}* 1 FETCH (FLAGS ($Work))\r\nt OK STORE completed\r\n")
    );
    // Known now: not announced again.
    assert_eq!(
        a.send("u STORE 2 +FLAGS ($Work)\r\n"),
        "* 2 FETCH (FLAGS ($Work))\r\nu OK STORE completed\r\n"
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
