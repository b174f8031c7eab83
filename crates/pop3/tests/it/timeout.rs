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
