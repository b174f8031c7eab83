//! STLS (RFC 2595 4).

use pop3::Config;

use crate::harness::{check, check_transaction, plain, strict};

#[test]
fn stls_then_login() {
    check(
        strict(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: STLS
        S: +OK Begin TLS negotiation
        E: StartTls
        > wants-input
        = false
        > tls
        > wants-input
        = true
        C: CAPA
        S: +OK Capability list follows
        S: TOP
        S: UIDL
        S: RESP-CODES
        S: AUTH-RESP-CODE
        S: PIPELINING
        S: USER
        S: SASL PLAIN
        S: IMPLEMENTATION mailstow
        S: .
        C: USER alice
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
        "#,
    );
}

#[test]
fn input_buffered_after_stls_is_discarded() {
    // CVE-2011-0411: commands injected behind STLS in plaintext must not run after the
    // handshake. The injected USER is gone, so PASS has nothing to go with.
    check(
        strict(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C| STLS\\r\\nUSER evil\\r\\nPASS x\\r\\n
        S: +OK Begin TLS negotiation
        E: StartTls
        C: USER mallory
        > buffered
        = 0
        > tls
        C: PASS secret
        S: -ERR USER first
        ",
    );
}

#[test]
fn stls_forgets_the_user_sent_before() {
    check(
        Config {
            plaintext_auth: true,
            ..strict()
        },
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: STLS
        S: +OK Begin TLS negotiation
        E: StartTls
        > tls
        C: PASS secret
        S: -ERR USER first
        ",
    );
}

#[test]
fn stls_on_tls_is_refused() {
    check(
        strict(),
        true,
        "
        S: +OK pop.example.org POP3 server ready
        C: STLS
        S: -ERR command not permitted when TLS active
        ",
    );
}

#[test]
fn stls_twice_is_refused() {
    check(
        strict(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: STLS
        S: +OK Begin TLS negotiation
        E: StartTls
        > tls
        C: STLS
        S: -ERR command not permitted when TLS active
        ",
    );
}

#[test]
fn stls_unavailable() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: STLS
        S: -ERR STLS not available
        C: STLS now
        S: -ERR syntax: STLS
        ",
    );
}

#[test]
fn stls_in_transaction_is_wrong_state() {
    // RFC 2595 4: "only permitted in AUTHORIZATION state".
    check_transaction(
        "
        C: STLS
        S: -ERR command not valid in this state
        ",
    );
}
