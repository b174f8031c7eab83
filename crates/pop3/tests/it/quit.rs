//! QUIT in AUTHORIZATION (RFC 1939 4) and in TRANSACTION, entering UPDATE (RFC 1939 6).

use crate::harness::{check, check_transaction, plain};

#[test]
fn quit_before_login() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C| QUIT\\r\\nNOOP\\r\\n
        S: +OK pop.example.org POP3 server signing off
        E: Close
        > wants-input
        = false
        C: USER alice
        ",
    );
}

#[test]
fn quit_without_deletions_needs_no_update() {
    check_transaction(
        "
        C: QUIT
        S: +OK pop.example.org POP3 server signing off (3 messages left)
        E: Close
        ",
    );
}

#[test]
fn quit_with_deletions_expunges_ascending_uids() {
    check_transaction(
        "
        C: DELE 3
        S: +OK message 3 deleted
        C: DELE 1
        S: +OK message 1 deleted
        C| QUIT\\r\\nSTAT\\r\\n
        E: Update { expunge: [3, 9] }
        > wants-input
        = false
        # Input during UPDATE is discarded.
        C: NOOP
        > update ok
        S: +OK pop.example.org POP3 server signing off (1 message left)
        E: Close
        ",
    );
}

#[test]
fn quit_with_everything_deleted() {
    check_transaction(
        "
        C: DELE 1
        S: +OK message 1 deleted
        C: DELE 2
        S: +OK message 2 deleted
        C: DELE 3
        S: +OK message 3 deleted
        C: QUIT
        E: Update { expunge: [3, 5, 9] }
        > update ok
        S: +OK pop.example.org POP3 server signing off (maildrop empty)
        E: Close
        ",
    );
}

#[test]
fn failed_expunge() {
    // RFC 1939 6; the shell logs its reason, the client gets the RFC's text.
    check_transaction(
        "
        C: DELE 2
        S: +OK message 2 deleted
        C: QUIT
        E: Update { expunge: [5] }
        > update error journal write failed
        S: -ERR some deleted messages not removed
        E: Close
        ",
    );
}

#[test]
fn quit_takes_no_arguments() {
    check_transaction(
        "
        C: QUIT now
        S: -ERR syntax: QUIT
        ",
    );
}
