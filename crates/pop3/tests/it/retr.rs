//! RETR (RFC 1939 5): the shell reads, the session stuffs and terminates.

use crate::harness::{check, check_transaction, plain};

#[test]
fn retr_sends_the_message() {
    check_transaction(
        r"
        C: RETR 1
        E: Retrieve { uid: 3, top_lines: None }
        > message Subject: hi\r\n\r\nHello.\r\n
        S: +OK 120 octets
        S: Subject: hi
        S:
        S: Hello.
        S: .
        ",
    );
}

#[test]
fn lines_starting_with_a_dot_are_stuffed() {
    check_transaction(
        r"
        C: RETR 2
        E: Retrieve { uid: 5, top_lines: None }
        > message A: b\r\n\r\n.\r\n..\r\n.hidden\r\nnot.first\r\n
        S: +OK 200 octets
        S: A: b
        S:
        S: ..
        S: ...
        S: ..hidden
        S: not.first
        S: .
        ",
    );
}

#[test]
fn message_without_final_crlf_still_ends_with_crlf_dot_crlf() {
    check_transaction(
        r"
        C: RETR 3
        E: Retrieve { uid: 9, top_lines: None }
        > message A: b\r\n\r\nno newline at end
        S: +OK 30 octets
        S: A: b
        S:
        S: no newline at end
        S: .
        C: RETR 3
        E: Retrieve { uid: 9, top_lines: None }
        > message A: b\r\n\r\n.
        S: +OK 30 octets
        S: A: b
        S:
        S: ..
        S: .
        ",
    );
}

#[test]
fn bare_lf_becomes_crlf() {
    // A lenient client must not take a bare-LF "." for the end of the response.
    check_transaction(
        r"
        C: RETR 1
        E: Retrieve { uid: 3, top_lines: None }
        > message A: b\n\nx\n.\nmore\n
        S: +OK 120 octets
        S: A: b
        S:
        S: x
        S: ..
        S: more
        S: .
        ",
    );
}

#[test]
fn empty_message() {
    check_transaction(
        "
        C: RETR 1
        E: Retrieve { uid: 3, top_lines: None }
        > message
        S: +OK 120 octets
        S: .
        ",
    );
}

#[test]
fn read_failure_is_a_temporary_error() {
    // Not the client's fault: RFC 3206 [SYS/TEMP], and the session goes on.
    check_transaction(
        "
        C: RETR 1
        E: Retrieve { uid: 3, top_lines: None }
        > message-error checksum mismatch
        S: -ERR [SYS/TEMP] checksum mismatch
        C: NOOP
        S: +OK
        ",
    );
}

#[test]
fn retr_refuses_bad_and_deleted_numbers() {
    check_transaction(
        "
        C: RETR
        S: -ERR syntax: RETR msg
        C: RETR 1 2
        S: -ERR syntax: RETR msg
        C: RETR 4
        S: -ERR no such message, only 3 messages in maildrop
        C: RETR x
        S: -ERR invalid message number
        C: DELE 1
        S: +OK message 1 deleted
        C: RETR 1
        S: -ERR message 1 already deleted
        ",
    );
}

#[test]
fn retr_before_login_is_wrong_state() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: RETR 1
        S: -ERR command not valid in this state
        ",
    );
}

#[test]
fn commands_pipelined_behind_retr_wait_for_the_message() {
    check_transaction(
        r"
        C| RETR 1\r\nDELE 1\r\nSTAT\r\n
        E: Retrieve { uid: 3, top_lines: None }
        > buffered
        = 14
        > message x
        S: +OK 120 octets
        S: x
        S: .
        S: +OK message 1 deleted
        S: +OK 2 230
        ",
    );
}

#[test]
fn answers_that_were_not_asked_for_are_ignored() {
    check_transaction(
        r"
        > message stray
        > update ok
        > auth bad
        > tls
        C: NOOP
        S: +OK
        ",
    );
}
