//! LOGOUT (RFC 5804 2.3).

use crate::harness::{GREETING, check, check_authenticated, plain};

#[test]
fn logout_before_login() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C| LOGOUT\r\nNOOP\r\n
            S: OK "Logout complete"
            E: Close
            > wants-input
            = false
            "#
        ),
    );
}

#[test]
fn logout_after_login_and_syntax() {
    check_authenticated(
        r#"
        C: LOGOUT now
        S: NO "Syntax: LOGOUT"
        C: Logout
        S: OK "Logout complete"
        E: Close
        "#,
    );
}
