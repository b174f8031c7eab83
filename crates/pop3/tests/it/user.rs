//! USER (RFC 1939 7).

use crate::harness::{check, check_transaction, plain, strict};

#[test]
fn user_then_pass_logs_in() {
    check_transaction("");
}

#[test]
fn every_name_gets_the_same_answer() {
    // Whether a user exists is not revealed before PASS.
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        C: USER nobody-by-this-name
        S: +OK send PASS
        C: PASS secret
        E: Auth { mechanism: "USER", username: "nobody-by-this-name", password: "secret", authzid: "" }
        > auth bad
        S: -ERR [AUTH] Authentication failed
        "#,
    );
}

#[test]
fn keyword_is_case_insensitive_and_name_is_kept_as_sent() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: uSeR Alice@Example.ORG
        S: +OK send PASS
        C: pass x
        E: Auth { mechanism: "USER", username: "Alice@Example.ORG", password: "x", authzid: "" }
        "#,
    );
}

#[test]
fn user_needs_exactly_one_name() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER
        S: -ERR syntax: USER name
        C: USER alice smith
        S: -ERR syntax: USER name
        C| USER alice \r\n
        S: -ERR syntax: USER name
        C| USER  alice\r\n
        S: -ERR syntax: USER name
        "#,
    );
}

#[test]
fn control_characters_and_bad_utf8_in_names_are_refused() {
    check(
        plain(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C| USER ali\x01ce\r\n
        S: -ERR arguments must be UTF-8 without control characters
        C| USER \xff\xfe\r\n
        S: -ERR arguments must be UTF-8 without control characters
        # A refused USER is forgotten, so PASS has nothing to go with.
        C: PASS secret
        S: -ERR USER first
        C: USER jöns
        S: +OK send PASS
        "#,
    );
}

#[test]
fn user_is_refused_without_tls_by_default() {
    // RFC 2595 2.3, RFC 3206: [AUTH], whatever the name.
    check(
        strict(),
        false,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: -ERR [AUTH] Plaintext authentication disallowed without TLS
        C: PASS secret
        S: -ERR [AUTH] Plaintext authentication disallowed without TLS
        "#,
    );
}

#[test]
fn user_is_accepted_on_a_tls_connection() {
    check(
        strict(),
        true,
        r#"
        S: +OK pop.example.org POP3 server ready
        C: USER alice
        S: +OK send PASS
        "#,
    );
}

#[test]
fn user_in_transaction_is_wrong_state() {
    check_transaction(
        "
        C: USER bob
        S: -ERR command not valid in this state
        ",
    );
}
