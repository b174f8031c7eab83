//! NOOP (RFC 5804 2.13).

use crate::harness::{GREETING, check, check_authenticated, plain};

#[test]
fn noop_with_and_without_a_tag() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: NOOP
            S: OK "Done"
            C: NOOP "STARTTLS-SYNC-42"
            S: OK (TAG "STARTTLS-SYNC-42") "Done"
            C| NOOP {{7+}}\r\na"b\\\r\nc\r\n
            S: OK (TAG {{7}}
            S: a"b\\
            S: c) "Done"
            C: NOOP tag
            S: NO "Syntax: NOOP [tag]"
            C: NOOP "a" "b"
            S: NO "Syntax: NOOP [tag]"
            "#
        ),
    );
}

#[test]
fn noop_after_login() {
    check_authenticated(
        r#"
        C: NOOP "x\\"y"
        S: OK (TAG "x\\"y") "Done"
        "#,
    );
}
