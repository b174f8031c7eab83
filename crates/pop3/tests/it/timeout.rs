//! The autologout timer (RFC 1939 3).

use std::sync::Arc;
use std::time::Duration;

use pop3::{AUTOLOGOUT, AuthResult, Maildrop, Session};

use crate::harness::{check, check_transaction, plain};

#[test]
fn timer_is_at_least_ten_minutes() {
    let session = Session::new(Arc::new(plain()), false);
    assert!(session.timeout() >= Duration::from_secs(600));
    assert_eq!(session.timeout(), AUTOLOGOUT);
}

#[test]
fn timeout_in_transaction_does_not_expunge() {
    // No UPDATE state, no reply: only Close.
    check_transaction(
        "
        C: DELE 1
        S: +OK message 1 deleted
        > timeout
        E: Close
        > wants-input
        = false
        C: QUIT
        > timeout
        ",
    );
}

#[test]
fn timeout_before_login() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C| USER alice\\r\\nPA
        S: +OK send PASS
        > timeout
        E: Close
        > buffered
        = 0
        ",
    );
}

#[test]
fn answers_after_a_timeout_are_ignored() {
    let mut session = Session::new(Arc::new(plain()), false);
    session.feed(b"USER alice\r\nPASS secret\r\n");
    while session.poll().is_some() {}
    session.timed_out();
    assert_eq!(session.poll(), Some(pop3::Event::Close));
    session.auth_result(AuthResult::Success {
        maildrop: Maildrop::default(),
    });
    session.feed(b"STAT\r\n");
    session.timed_out();
    assert_eq!(session.poll(), None);
    assert!(session.is_closed());
    assert!(!session.wants_input());
}

#[test]
fn deadlines_bound_authorization_and_each_line() {
    let config = pop3::Config {
        login_deadline: Duration::from_secs(13),
        command_deadline: Duration::from_secs(5),
        ..plain()
    };
    let mut session = Session::new(Arc::new(config), false);
    while session.poll().is_some() {}
    let d = session.deadlines();
    assert_eq!(d.phase.map(|d| d.within), Some(Duration::from_secs(13)));
    assert_eq!(d.request, None);

    session.feed(b"US");
    let first = session.deadlines().request.expect("a partial line");
    assert_eq!(first.within, Duration::from_secs(5));
    session.feed(b"ER alice");
    assert_eq!(
        session.deadlines().request,
        Some(first),
        "same line, same step"
    );
    session.feed(b"\r\n");
    while session.poll().is_some() {}
    assert_eq!(session.deadlines().request, None);
    session.feed(b"P");
    assert_ne!(session.deadlines().request.unwrap().step, first.step);
    session.feed(b"ASS secret\r\n");
    while let Some(event) = session.poll() {
        if let pop3::Event::Auth { .. } = event {
            session.auth_result(AuthResult::Success {
                maildrop: Maildrop::default(),
            });
        }
    }
    assert_eq!(session.deadlines().phase, None, "logged in");

    session.feed(b"NO");
    session.deadline_passed();
    let mut replies = Vec::new();
    while let Some(event) = session.poll() {
        replies.push(event);
    }
    assert_eq!(
        replies,
        vec![
            pop3::Event::Reply(b"-ERR [SYS/TEMP] too slow, closing\r\n".to_vec()),
            pop3::Event::Close
        ]
    );
    assert_eq!(session.deadlines(), limits::Deadlines::default());
}

#[test]
fn shutdown_and_revocation_say_why_and_close() {
    for (end, text) in [
        (
            Session::shutting_down as fn(&mut Session),
            "-ERR [SYS/TEMP] server shutting down\r\n",
        ),
        (Session::revoked, "-ERR [AUTH] account removed\r\n"),
        (
            Session::moving,
            "-ERR [SYS/TEMP] mailbox moving, reconnect\r\n",
        ),
    ] {
        let mut session = Session::new(Arc::new(plain()), false);
        while session.poll().is_some() {}
        end(&mut session);
        assert_eq!(
            session.poll(),
            Some(pop3::Event::Reply(text.as_bytes().to_vec()))
        );
        assert_eq!(session.poll(), Some(pop3::Event::Close));
        assert!(session.is_closed());
    }
}
