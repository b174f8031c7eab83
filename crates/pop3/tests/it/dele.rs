//! DELE (RFC 1939 5).

use crate::harness::check_transaction;

#[test]
fn dele_marks_once() {
    check_transaction(
        "
        C: DELE 1
        S: +OK message 1 deleted
        C: DELE 1
        S: -ERR message 1 already deleted
        C: STAT
        S: +OK 2 230
        ",
    );
}

#[test]
fn dele_refuses_bad_numbers() {
    check_transaction(
        "
        C: DELE
        S: -ERR syntax: DELE msg
        C: DELE 4
        S: -ERR no such message, only 3 messages in maildrop
        C: DELE 0
        S: -ERR no such message, only 3 messages in maildrop
        C: DELE one
        S: -ERR invalid message number
        C: DELE 1 2
        S: -ERR syntax: DELE msg
        ",
    );
}

#[test]
fn message_numbers_do_not_move_after_dele() {
    // RFC 1939 5: numbers stay fixed for the session.
    check_transaction(
        "
        C: DELE 1
        S: +OK message 1 deleted
        C: LIST 3
        S: +OK 3 30
        ",
    );
}
