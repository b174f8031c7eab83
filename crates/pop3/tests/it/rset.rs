//! RSET (RFC 1939 5).

use crate::harness::check_transaction;

#[test]
fn dele_then_rset_unmarks_everything() {
    check_transaction(
        "
        C: DELE 1
        S: +OK message 1 deleted
        C: DELE 3
        S: +OK message 3 deleted
        C: RSET
        S: +OK maildrop has 3 messages (350 octets)
        C: LIST
        S: +OK 3 messages (350 octets)
        S: 1 120
        S: 2 200
        S: 3 30
        S: .
        C: QUIT
        S: +OK pop.example.org POP3 server signing off (3 messages left)
        E: Close
        ",
    );
}

#[test]
fn rset_takes_no_arguments() {
    check_transaction(
        "
        C: RSET 1
        S: -ERR syntax: RSET
        ",
    );
}
