//! PASS (RFC 1939 7) and the shell's answers to the login decision.

use crate::harness::{check, check_transaction, plain};

#[test]
fn pass_without_user_is_refused() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: PASS secret
        S: -ERR USER first
        ",
    );
}

#[test]
fn spaces_belong_to_the_password() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C| PASS  my secret \r\n
        E: Auth { mechanism: "USER", username: "alice", password: " my secret ", authzid: "" }
        "#,
    );
}

#[test]
fn empty_or_nul_password_is_refused_and_user_must_be_sent_again() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS
        S: -ERR syntax: PASS string
        C: PASS secret
        S: -ERR USER first
        C: USER alice
        S: +OK send PASS
        C| PASS a\\0b\\r\\n
        S: -ERR arguments must be UTF-8 without control characters
        ",
    );
}

#[test]
fn failed_login_starts_authorization_over() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS wrong
        E: Auth { mechanism: "USER", username: "alice", password: "wrong", authzid: "" }
        > auth bad
        S: -ERR [AUTH] Authentication failed
        C: PASS secret
        S: -ERR USER first
        C: STAT
        S: -ERR command not valid in this state
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth ok 1
        S: +OK maildrop has 0 messages (0 octets)
        C: STAT
        S: +OK 0 0
        "#,
    );
}

#[test]
fn maildrop_in_use() {
    // RFC 2449 8.1.2; not counted as a client error, and the client may try again.
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth in-use
        S: -ERR [IN-USE] maildrop locked by another session
        C: STAT
        S: -ERR command not valid in this state
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth ok 7 3:1
        S: +OK maildrop has 1 message (1 octets)
        "#,
    );
}

#[test]
fn temporary_failure_text_is_one_line() {
    // RFC 3206 4. The shell's text cannot smuggle a second reply line.
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth temp index busy\r\n+OK fake
        S: -ERR [SYS/TEMP] index busy  +OK fake
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > auth temp
        S: -ERR [SYS/TEMP] temporary failure, try again later
        "#,
    );
}

#[test]
fn pass_in_transaction_is_wrong_state() {
    check_transaction(
        "
        C: PASS secret
        S: -ERR command not valid in this state
        ",
    );
}

#[test]
fn input_waits_while_the_login_is_decided() {
    // Pipelined commands behind PASS run only after the answer, in the new state.
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C| USER alice\r\nPASS secret\r\nSTAT\r\n
        S: +OK send PASS
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        > wants-input
        = false
        > auth ok 7 3:120
        S: +OK maildrop has 1 message (120 octets)
        S: +OK 1 120
        > wants-input
        = true
        "#,
    );
}
