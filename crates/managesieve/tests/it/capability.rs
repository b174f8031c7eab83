//! The capability response (RFC 5804 1.7) and CAPABILITY (2.4).

use managesieve::Config;

use crate::harness::{GREETING, check, check_authenticated, plain};

#[test]
fn capability_before_login() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: capability
            S: "IMPLEMENTATION" "mailstow"
            S: "SASL" "PLAIN"
            S: "SIEVE" "fileinto vacation"
            S: "UNAUTHENTICATE"
            S: "VERSION" "1.0"
            S: OK "Capability completed"
            C: CAPABILITY x
            S: NO "Syntax: CAPABILITY"
            "#
        ),
    );
}

#[test]
fn capability_after_login_names_the_owner() {
    check_authenticated(
        r#"
        C: CAPABILITY
        S: "IMPLEMENTATION" "mailstow"
        S: "SASL" ""
        S: "SIEVE" "fileinto vacation"
        S: "OWNER" "alice"
        S: "UNAUTHENTICATE"
        S: "VERSION" "1.0"
        S: OK "Capability completed"
        "#,
    );
}

#[test]
fn optional_capabilities_and_mechanisms_offered() {
    // Only PLAIN is implemented, so LOGIN is never announced.
    let config = Config {
        implementation: "mailstow \"1.0\"".to_owned(),
        sasl_mechanisms: vec!["LOGIN".to_owned(), "plain".to_owned()],
        max_redirects: Some(4),
        notify_methods: vec!["mailto".to_owned()],
        tls_available: true,
        ..plain()
    };
    check(
        config,
        false,
        r#"
        S: "IMPLEMENTATION" "mailstow \\"1.0\\""
        S: "SASL" "plain"
        S: "SIEVE" "fileinto vacation"
        S: "STARTTLS"
        S: "NOTIFY" "mailto"
        S: "MAXREDIRECTS" "4"
        S: "UNAUTHENTICATE"
        S: "VERSION" "1.0"
        S: OK "ManageSieve ready"
        C: AUTHENTICATE "LOGIN"
        S: NO "Unsupported SASL mechanism"
        "#,
    );
}
