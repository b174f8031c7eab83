//! TOP (RFC 1939 7): header, blank line, n body lines, cut by the session.

use crate::harness::check_transaction;

const MESSAGE: &str = r"From: a\r\nSubject: s\r\n\r\none\r\n.two\r\nthree\r\n";

fn check_top(command: &str, top_lines: u32, expected: &str) {
    check_transaction(&format!(
        "
        C: {command}
        E: Retrieve {{ uid: 5, top_lines: Some({top_lines}) }}
        > message {MESSAGE}
        {expected}
        "
    ));
}

#[test]
fn top_zero_is_header_and_blank_line() {
    check_top(
        "TOP 2 0",
        0,
        "
        S: +OK top of message follows
        S: From: a
        S: Subject: s
        S:
        S: .
        ",
    );
}

#[test]
fn top_two_lines_with_stuffing() {
    check_top(
        "top 2 2",
        2,
        "
        S: +OK top of message follows
        S: From: a
        S: Subject: s
        S:
        S: one
        S: ..two
        S: .
        ",
    );
}

#[test]
fn top_more_lines_than_the_body_has() {
    check_top(
        "TOP 2 100",
        100,
        "
        S: +OK top of message follows
        S: From: a
        S: Subject: s
        S:
        S: one
        S: ..two
        S: three
        S: .
        ",
    );
}

#[test]
fn top_line_count_saturates() {
    check_top(
        "TOP 2 99999999999999",
        u32::MAX,
        "
        S: +OK top of message follows
        S: From: a
        S: Subject: s
        S:
        S: one
        S: ..two
        S: three
        S: .
        ",
    );
}

#[test]
fn top_of_a_message_without_body_or_final_crlf() {
    check_transaction(
        r"
        C: TOP 1 5
        E: Retrieve { uid: 3, top_lines: Some(5) }
        > message From: a\r\nSubject: s
        S: +OK top of message follows
        S: From: a
        S: Subject: s
        S: .
        ",
    );
}

#[test]
fn top_refuses_bad_arguments() {
    check_transaction(
        "
        C: TOP 1
        S: -ERR syntax: TOP msg n
        C: TOP 1 x
        S: -ERR syntax: TOP msg n
        C: TOP 1 -1
        S: -ERR syntax: TOP msg n
        C: TOP 1 1 1
        S: -ERR syntax: TOP msg n
        C: TOP x 1
        S: -ERR invalid message number
        C: TOP 4 1
        S: -ERR no such message, only 3 messages in maildrop
        C: DELE 1
        S: +OK message 1 deleted
        C: TOP 1 0
        S: -ERR message 1 already deleted
        ",
    );
}
