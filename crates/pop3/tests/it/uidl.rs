//! UIDL (RFC 1939 7): ids from (UIDVALIDITY, UID), the same in every session.

use crate::harness::{check, check_transaction, plain};

#[test]
fn uidl_all() {
    check_transaction(
        "
        C: UIDL
        S: +OK
        S: 1 0000000700000003
        S: 2 0000000700000005
        S: 3 0000000700000009
        S: .
        ",
    );
}

#[test]
fn uidl_one_and_deleted() {
    check_transaction(
        "
        C: UIDL 3
        S: +OK 3 0000000700000009
        C: DELE 1
        S: +OK message 1 deleted
        C: UIDL 1
        S: -ERR message 1 already deleted
        C: UIDL
        S: +OK
        S: 2 0000000700000005
        S: 3 0000000700000009
        S: .
        C: UIDL 4
        S: -ERR no such message, only 3 messages in maildrop
        C: UIDL x
        S: -ERR invalid message number
        ",
    );
}

#[test]
fn uidl_is_stable_when_message_numbers_move() {
    // UID 3 was expunged since the last session: UID 5 is now message 1, same unique-id.
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth ok 7 5:200 9:30 4294967295:1
        S: +OK maildrop has 3 messages (231 octets)
        C: UIDL
        S: +OK
        S: 1 0000000700000005
        S: 2 0000000700000009
        S: 3 00000007ffffffff
        S: .
        "#,
    );
}
