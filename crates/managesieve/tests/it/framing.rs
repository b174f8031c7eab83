//! Command framing (RFC 5804 4): atoms, quoted strings, literals of both kinds, and what
//! breaks the rules.

use managesieve::Config;

use crate::harness::{GREETING, check, check_authenticated, plain};

#[test]
fn case_line_endings_and_synchronizing_literals() {
    // RFC 5804 4: clients send {n+}; a {n} gets no continuation either, it is just read.
    check_authenticated(
        r#"
        C| nOoP\n
        S: OK "Done"
        C| GetScript {1}\r\na\n
        E: GetScript { user: "alice", name: "a" }
        > get x
        S: {1}
        S: x
        S: OK "Getscript completed"
        C| GETSCRIPT {0+}\r\n\r\n
        S: NO "Invalid script name: empty"
        "#,
    );
}

#[test]
fn unknown_empty_and_malformed_commands() {
    check(
        Config {
            errors_max: 20,
            ..plain()
        },
        false,
        &format!(
            r#"{GREETING}
            C: FROB
            S: NO "Unknown command"
            C: "NOOP"
            S: NO "Unknown command"
            C:
            S: NO "Empty command"
            C: NOOP  "x"
            S: NO "Syntax: tokens separated by single spaces"
            C: NOOP\x20
            S: NO "Syntax: tokens separated by single spaces"
            C: NOOP "unterminated
            S: NO "Syntax: tokens separated by single spaces"
            C| NOOP "bad \\escape"\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C: NOOP "a"b
            S: NO "Syntax: tokens separated by single spaces"
            C| NOOP {{x}}\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C| NOOP {{}}\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C| NOOP {{1+}}x\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C| NOOP \x00\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C| NOOP "a\rb"\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C: NOOP
            S: OK "Done"
            "#
        ),
    );
}

#[test]
fn a_literal_after_an_error_is_skipped_not_run() {
    // The command is dropped, but its literal is still read as data: the LOGOUT inside it is
    // not a command.
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C| NOOP x"y {{8+}}\r\nLOGOUT\r\n\r\n
            S: NO "Syntax: tokens separated by single spaces"
            C: NOOP
            S: OK "Done"
            "#
        ),
    );
}

#[test]
fn long_lines_and_name_literals_count_against_line_max() {
    let config = Config {
        line_max: 32,
        ..plain()
    };
    check(
        config,
        false,
        &format!(
            r#"{GREETING}
            C: NOOP "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            S: NO "Line too long"
            C| NOOP {{30+}}\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n
            S: NO "Line too long"
            > buffered
            = 0
            C: NOOP "aaaaaaaaaaaaaaaaaaaaaaa"
            S: OK (TAG "aaaaaaaaaaaaaaaaaaaaaaa") "Done"
            "#
        ),
    );
}

#[test]
fn literal_lengths_beyond_32_bits_close_the_connection() {
    // RFC 5804 4: a number is 32-bit; a longer literal cannot be skipped reliably.
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C| NOOP {{4294967296+}}\r\nNOOP\r\n
            S: BYE "Literal length too large"
            E: Close
            "#
        ),
    );
}
