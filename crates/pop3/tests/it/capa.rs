//! CAPA (RFC 2449 5).

use crate::harness::{check, check_transaction, plain, strict};

#[test]
fn capa_on_plaintext_hides_logins_and_offers_stls() {
    check(
        strict(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: CAPA
        S: +OK Capability list follows
        S: TOP
        S: UIDL
        S: RESP-CODES
        S: AUTH-RESP-CODE
        S: PIPELINING
        S: STLS
        S: IMPLEMENTATION mailstow
        S: .
        ",
    );
}

#[test]
fn capa_on_tls_offers_logins_and_no_stls() {
    check(
        strict(),
        true,
        "
        S: +OK pop.example.org POP3 server ready
        C: capa
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
        ",
    );
}

#[test]
fn capa_with_plaintext_auth_allowed_and_no_tls() {
    check(
        plain(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
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
        ",
    );
}

#[test]
fn capa_in_transaction_is_the_same_list() {
    // RFC 2449 5: AUTHORIZATION capabilities are announced in both states.
    check_transaction(
        "
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
        C: CAPA x
        S: -ERR syntax: CAPA
        ",
    );
}
