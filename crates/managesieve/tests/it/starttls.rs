//! STARTTLS (RFC 5804 2.2).

use crate::harness::{check, check_authenticated, plain, strict};

const STRICT_GREETING: &str = r#"
    S: "IMPLEMENTATION" "mailstow"
    S: "SASL" ""
    S: "SIEVE" "fileinto vacation"
    S: "STARTTLS"
    S: "UNAUTHENTICATE"
    S: "VERSION" "1.0"
    S: OK "ManageSieve ready"
"#;

#[test]
fn starttls_then_capabilities_then_login() {
    // RFC 5804 2.2: after the handshake the server re-issues the capabilities, now with
    // PLAIN and without STARTTLS.
    check(
        strict(),
        false,
        &format!(
            r#"{STRICT_GREETING}
            C: STARTTLS
            S: OK "Begin TLS negotiation now"
            E: StartTls
            > wants-input
            = false
            > tls
            S: "IMPLEMENTATION" "mailstow"
            S: "SASL" "PLAIN"
            S: "SIEVE" "fileinto vacation"
            S: "UNAUTHENTICATE"
            S: "VERSION" "1.0"
            S: OK "TLS negotiation successful"
            > wants-input
            = true
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            "#
        ),
    );
}

#[test]
fn input_pipelined_after_starttls_is_discarded() {
    // CVE-2011-0411: commands injected behind STARTTLS in plaintext must not run after the
    // handshake, nor may a literal begun in plaintext swallow what comes over TLS.
    check(
        strict(),
        false,
        &format!(
            r#"{STRICT_GREETING}
            C| STARTTLS\r\nLOGOUT\r\nNOOP {{5+}}\r\n
            S: OK "Begin TLS negotiation now"
            E: StartTls
            C: LOGOUT
            > buffered
            = 0
            > tls
            S: "IMPLEMENTATION" "mailstow"
            S: "SASL" "PLAIN"
            S: "SIEVE" "fileinto vacation"
            S: "UNAUTHENTICATE"
            S: "VERSION" "1.0"
            S: OK "TLS negotiation successful"
            C: NOOP
            S: OK "Done"
            "#
        ),
    );
}

#[test]
fn starttls_refused() {
    check(
        strict(),
        true,
        r#"
        S: "IMPLEMENTATION" "mailstow"
        S: "SASL" "PLAIN"
        S: "SIEVE" "fileinto vacation"
        S: "UNAUTHENTICATE"
        S: "VERSION" "1.0"
        S: OK "ManageSieve ready"
        C: STARTTLS
        S: NO "TLS already active"
        "#,
    );
    check(
        plain(),
        false,
        &format!(
            r#"{}
            C: STARTTLS
            S: NO "STARTTLS not available"
            C: STARTTLS now
            S: NO "Syntax: STARTTLS"
            "#,
            crate::harness::GREETING
        ),
    );
    check_authenticated(
        r#"
        C: STARTTLS
        S: NO "Already authenticated"
        "#,
    );
}
