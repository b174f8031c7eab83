//! UNAUTHENTICATE (RFC 5804 2.14).

use crate::harness::check_authenticated;

#[test]
fn unauthenticate_then_login_again() {
    check_authenticated(
        r#"
        C: UNAUTHENTICATE
        S: OK "Unauthenticate completed"
        C: LISTSCRIPTS
        S: NO "Authenticate first"
        C: CAPABILITY
        S: "IMPLEMENTATION" "mailstow"
        S: "SASL" "PLAIN"
        S: "SIEVE" "fileinto vacation"
        S: "UNAUTHENTICATE"
        S: "VERSION" "1.0"
        S: OK "Capability completed"
        C: AUTHENTICATE "PLAIN" "AGJvYgBodW50ZXIy"
        E: Authenticate { mechanism: "PLAIN", authcid: "bob", password: "hunter2", authzid: "" }
        > auth ok bob
        S: OK "Logged in"
        C: LISTSCRIPTS
        E: ListScripts { user: "bob" }
        > list
        S: OK "Listscripts completed"
        C: UNAUTHENTICATE x
        S: NO "Syntax: UNAUTHENTICATE"
        "#,
    );
}
