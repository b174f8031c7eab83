//! Every limit answered on the wire, and the session still usable after.

use super::*;

fn small() -> Config {
    Config {
        line_bytes_max: 200,
        literal_bytes_max: 100,
        command_bytes_max: 400,
        nesting_depth_max: 4,
        append_messages_max: 3,
        ..test_config()
    }
}

fn client(store: &Store) -> Client {
    let mut c = Client::new(store, small());
    c.greeting();
    assert!(c.send("l LOGIN bob secret\r\n").contains("l OK"));
    c
}

#[test]
fn literal_over_appendlimit_is_refused_before_it_is_sent() {
    let store = new_store();
    let mut c = client(&store);
    assert_eq!(
        c.send("a APPEND INBOX {101}\r\n"),
        "a BAD [TOOBIG] literal larger than 100 octets\r\n"
    );
    let mut plus = b"b APPEND INBOX {101+}\r\n".to_vec();
    plus.extend_from_slice(&[b'x'; 101]);
    plus.extend_from_slice(b"\r\nc NOOP\r\n");
    assert_eq!(
        c.send_bytes(&plus),
        "b BAD [TOOBIG] literal larger than 100 octets\r\nc OK NOOP completed\r\n"
    );
    assert!(c.send("d CAPABILITY\r\n").contains("APPENDLIMIT=100"));
}

#[test]
fn long_lines_deep_nesting_and_many_messages() {
    let store = new_store();
    let mut c = client(&store);
    let long = format!("a NOOP {}\r\n", "x".repeat(300));
    assert_eq!(c.send(&long), "a BAD line longer than 200 octets\r\n");
    assert_eq!(
        c.send("b SEARCH (((((ALL)))))\r\n"),
        "b BAD parenthesised lists nested deeper than 4\r\n"
    );
    assert_eq!(
        c.send("c APPEND INBOX {1+}\r\na {1+}\r\nb {1+}\r\nc {1+}\r\nd\r\n"),
        "c NO [LIMIT] At most 3 messages per APPEND\r\n"
    );
    assert_eq!(c.send("d NOOP\r\n"), "d OK NOOP completed\r\n");
}

#[test]
fn autologout_and_shutdown() {
    let store = new_store();
    let mut c = client(&store);
    assert_eq!(c.session.timeout(), crate::AUTOLOGOUT);
    c.session.timed_out();
    assert_eq!(
        normalise(&c.run()),
        "* BYE Autologout; idle for too long\r\n"
    );
    assert!(c.closed);
    let mut fresh = Client::new(&store, small());
    fresh.greeting();
    assert_eq!(fresh.session.timeout(), crate::LOGIN_TIMEOUT);
    fresh.session.shutdown();
    assert_eq!(fresh.run(), "* BYE Server shutting down\r\n");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Arbitrary bytes after login never panic the session, and every output line ends in
    /// CRLF.
    #[test]
    fn garbage_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), 0..12)) {
        let store = new_store();
        deliver(&store, "bob", 2);
        let mut c = client(&store);
        c.send("s SELECT INBOX\r\n");
        for chunk in &chunks {
            let out = c.send_bytes(chunk);
            proptest::prop_assert!(out.is_empty() || out.ends_with("\r\n"));
        }
    }

    /// Command-shaped garbage: valid tags and command names with random arguments.
    #[test]
    fn command_shaped_garbage_gets_an_answer(
        name in proptest::sample::select(vec!["FETCH", "UID FETCH", "STORE", "SEARCH", "UID SEARCH", "COPY", "MOVE", "LIST", "STATUS", "APPEND", "SELECT", "EXPUNGE", "UID EXPUNGE", "ENABLE", "ID", "IDLE"]),
        args in "[ -~]{0,60}",
    ) {
        let store = new_store();
        deliver(&store, "bob", 3);
        let mut c = client(&store);
        c.send("s SELECT INBOX\r\n");
        let out = c.send(&format!("t {name} {args}\r\n"));
        let answered = out.contains("t OK") || out.contains("t NO") || out.contains("t BAD") || out.starts_with('+');
        proptest::prop_assert!(answered, "{}", out);
    }
}
