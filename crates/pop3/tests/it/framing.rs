//! Greeting, line framing, pipelining (RFC 2449 6.6) and command syntax (RFC 1939 3).

use std::sync::Arc;

use pop3::{Config, Event, Session};

use crate::harness::{check, check_transaction, plain};

#[test]
fn greeting_names_the_host_on_one_line() {
    check(
        Config {
            hostname: "evil\r\n+OK injected".to_owned(),
            ..plain()
        },
        false,
        "
        S: +OK evil  +OK injected POP3 server ready
        ",
    );
}

#[test]
fn pipelined_session_in_one_feed() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C| CAPA\r\nUSER alice\r\nPASS secret\r\nSTAT\r\nLIST 1\r\nUIDL 1\r\nDELE 1\r\nQUIT\r\n
        S: +OK Capability list follows
        S: TOP
        S: UIDL
        S: RESP-CODES
        S: AUTH-RESP-CODE
        S: PIPELINING
        S: USER
        S: SASL PLAIN
        S: IMPLEMENTATION mailstow
        S: .
        S: +OK send PASS
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth ok 7 3:120 5:200
        S: +OK maildrop has 2 messages (320 octets)
        S: +OK 2 320
        S: +OK 1 120
        S: +OK 1 0000000700000003
        S: +OK message 1 deleted
        E: Update { expunge: [3] }
        > update ok
        S: +OK pop.example.org POP3 server signing off (1 message left)
        E: Close
        "#,
    );
}

#[test]
fn commands_split_anywhere_and_bare_lf() {
    check_transaction(
        r"
        C| ST
        C| AT\r
        C| \nNOOP\nLI
        S: +OK 3 350
        S: +OK
        C| ST 3\r\n
        S: +OK 3 30
        ",
    );
}

#[test]
fn unknown_and_empty_commands() {
    check_transaction(
        "
        C: XTND XMIT
        S: -ERR unknown command
        C: APOP alice 0123456789abcdef
        S: -ERR unknown command
        C:
        S: -ERR unknown command
        C| \\x00\\xff\\r\\n
        S: -ERR unknown command
        C| \\tSTAT\\r\\n
        S: -ERR unknown command
        C|  STAT\\r\\n
        S: -ERR unknown command
        C| STAT \\r\\n
        S: -ERR syntax: STAT
        ",
    );
}

#[test]
fn replies_of_pipelined_commands_come_coalesced() {
    let mut session = Session::new(Arc::new(plain()), false);
    assert!(matches!(session.poll(), Some(Event::Reply(_))));
    session.feed(b"QUIT\r\n");
    let mut reply = Vec::new();
    let mut events = Vec::new();
    while let Some(event) = session.poll() {
        match event {
            Event::Reply(bytes) => reply.extend(bytes),
            other => events.push(other),
        }
    }
    assert_eq!(reply, b"+OK pop.example.org POP3 server signing off\r\n");
    assert_eq!(events, [Event::Close]);

    let mut session = Session::new(Arc::new(plain()), false);
    session.feed(b"CAPA\r\nCAPA\r\nCAPA\r\n");
    let Some(Event::Reply(bytes)) = session.poll() else {
        panic!("expected a reply")
    };
    assert!(bytes.starts_with(b"+OK pop.example.org POP3 server ready\r\n"));
    assert_eq!(
        bytes.windows(3).filter(|window| window == b"\r\n.").count(),
        3
    );
    assert_eq!(session.poll(), None);
    assert!(session.wants_input());
}

#[test]
fn many_pipelined_replies_wait_for_polls() {
    // A flood of big replies is produced as the shell polls, not all at once in feed.
    let mut session = Session::new(Arc::new(plain()), false);
    session.feed(b"USER alice\r\nPASS secret\r\n");
    while session.poll().is_some() {}
    let maildrop = crate::harness::maildrop(
        &std::iter::once("7".to_owned())
            .chain((1..=5000).map(|uid| format!("{uid}:1000")))
            .collect::<Vec<_>>()
            .join(" "),
    );
    session.auth_result(pop3::AuthResult::Success { maildrop });
    while session.poll().is_some() {}
    let commands = b"LIST\r\n".repeat(1000);
    session.feed(&commands);
    assert!(!session.wants_input());
    assert!(
        session.buffered_len() > 0,
        "commands wait in the input buffer"
    );
    let mut replies = 0;
    let mut largest = 0;
    while let Some(event) = session.poll() {
        let Event::Reply(bytes) = event else {
            panic!("unexpected {event:?}")
        };
        replies += bytes
            .windows(5)
            .filter(|window| window == b"\r\n.\r\n")
            .count();
        largest = largest.max(bytes.len());
    }
    assert_eq!(replies, 1000);
    assert!(largest < 256 * 1024, "one poll returned {largest} bytes");
    assert!(session.wants_input());
}

#[test]
fn debug_of_an_auth_event_hides_the_password() {
    let event = Event::Auth {
        mechanism: "USER",
        username: "alice".to_owned(),
        password: "hunter2".to_owned(),
        authzid: String::new(),
    };
    let debug = format!("{event:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert_eq!(
        debug,
        r#"Auth { username: "alice", password: <redacted>, authzid: "" }"#
    );
}

#[test]
fn session_can_move_between_threads() {
    // The tokio shell runs each session in a task that may move between worker threads.
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Session>();
    assert_send::<Event>();
}
