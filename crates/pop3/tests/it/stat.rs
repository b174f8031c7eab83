//! STAT (RFC 1939 5).

use crate::harness::{check, check_transaction, plain};

#[test]
fn stat_counts_messages_not_marked_deleted() {
    check_transaction(
        "
        C: STAT
        S: +OK 3 350
        C: DELE 2
        S: +OK message 2 deleted
        C: stat
        S: +OK 2 150
        ",
    );
}

#[test]
fn stat_takes_no_arguments() {
    check_transaction(
        "
        C: STAT 1
        S: -ERR syntax: STAT
        ",
    );
}

#[test]
fn stat_before_login_is_wrong_state() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: STAT
        S: -ERR command not valid in this state
        ",
    );
}
