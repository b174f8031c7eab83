//! NOOP (RFC 1939 5).

use crate::harness::{check, check_transaction, plain};

#[test]
fn noop() {
    check_transaction(
        "
        C: NOOP
        S: +OK
        C: noop
        S: +OK
        C: NOOP x
        S: -ERR syntax: NOOP
        ",
    );
}

#[test]
fn noop_before_login_is_wrong_state() {
    // RFC 1939 5: NOOP is a TRANSACTION command.
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: NOOP
        S: -ERR command not valid in this state
        ",
    );
}
