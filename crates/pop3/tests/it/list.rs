//! LIST (RFC 1939 5).

use crate::harness::{check, check_transaction, plain};

#[test]
fn list_all() {
    check_transaction(
        "
        C: LIST
        S: +OK 3 messages (350 octets)
        S: 1 120
        S: 2 200
        S: 3 30
        S: .
        ",
    );
}

#[test]
fn list_one() {
    check_transaction(
        "
        C: LIST 2
        S: +OK 2 200
        C: list 003
        S: +OK 3 30
        ",
    );
}

#[test]
fn list_skips_deleted_and_refuses_them_by_number() {
    check_transaction(
        "
        C: DELE 2
        S: +OK message 2 deleted
        C: LIST
        S: +OK 2 messages (150 octets)
        S: 1 120
        S: 3 30
        S: .
        C: LIST 2
        S: -ERR message 2 already deleted
        ",
    );
}

#[test]
fn list_bad_numbers() {
    check_transaction(
        "
        C: LIST 4
        S: -ERR no such message, only 3 messages in maildrop
        C: LIST 0
        S: -ERR no such message, only 3 messages in maildrop
        C: LIST 99999999999999999999999999
        S: -ERR no such message, only 3 messages in maildrop
        C: LIST one
        S: -ERR invalid message number
        C: LIST -1
        S: -ERR invalid message number
        C: LIST +1
        S: -ERR invalid message number
        C: LIST 1 2
        S: -ERR syntax: LIST [msg]
        C| LIST  1\\r\\n
        S: -ERR syntax: LIST [msg]
        ",
    );
}

#[test]
fn list_of_an_empty_maildrop() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth ok 1
        S: +OK maildrop has 0 messages (0 octets)
        C: LIST
        S: +OK 0 messages (0 octets)
        S: .
        C: LIST 1
        S: -ERR no such message, only 0 messages in maildrop
        "#,
    );
}
