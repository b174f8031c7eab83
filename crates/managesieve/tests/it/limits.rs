//! What bounds a client: errors, failed logins (in authenticate.rs), commands before login,
//! arguments, unread input.

use managesieve::Config;

use crate::harness::{GREETING, check, check_authenticated, login, plain};

#[test]
fn errors_are_bounded() {
    check(
        Config {
            errors_max: 2,
            ..plain()
        },
        false,
        &format!(
            r#"{GREETING}
            C: FROB
            S: NO "Unknown command"
            C| FROB\r\nNOOP\r\n
            S: NO "Unknown command"
            S: BYE "Too many errors"
            E: Close
            "#
        ),
    );
}

#[test]
fn storage_failures_are_not_client_errors() {
    let mut script = login();
    for _ in 0..12 {
        script.push_str(
            r#"
            C: GETSCRIPT "a"
            E: GetScript { user: "alice", name: "a" }
            > get error nonexistent
            S: NO (NONEXISTENT) "No such script"
            "#,
        );
    }
    check(plain(), false, &script);
}

#[test]
fn commands_before_login_are_bounded() {
    check(
        Config {
            commands_before_login_max: 3,
            ..plain()
        },
        false,
        &format!(
            r#"{GREETING}
            C: NOOP
            S: OK "Done"
            C: CAPABILITY
            S: "IMPLEMENTATION" "mailstow"
            S: "SASL" "PLAIN"
            S: "SIEVE" "fileinto vacation"
            S: "UNAUTHENTICATE"
            S: "VERSION" "1.0"
            S: OK "Capability completed"
            C: NOOP
            S: OK "Done"
            C: NOOP
            S: BYE "Too many commands before login"
            E: Close
            "#
        ),
    );
}

#[test]
fn commands_after_login_are_not_counted() {
    let config = Config {
        commands_before_login_max: 2,
        ..plain()
    };
    let mut script = format!(
        "{GREETING}\nC: NOOP\nS: OK \"Done\"\n{}",
        login().replace(GREETING, "")
    );
    for _ in 0..5 {
        script.push_str("C: NOOP\nS: OK \"Done\"\n");
    }
    check(config, false, &script);
}

#[test]
fn arguments_are_bounded() {
    check_authenticated(
        r#"
        C: NOOP "a" "b" "c" "d" "e"
        S: NO "Too many arguments"
        C: NOOP "a" "b" "c" "d"
        S: NO "Syntax: NOOP [tag]"
        "#,
    );
}

#[test]
fn unread_input_is_bounded() {
    // A shell that feeds while a decision is outstanding gets BYE once the buffer is full.
    check(
        Config {
            input_buffer_max: 16,
            ..plain()
        },
        false,
        &format!(
            r#"{}
            C: LISTSCRIPTS
            E: ListScripts {{ user: "alice" }}
            C| NOOP\r\nNOOP\r\n
            > buffered
            = 12
            C| NOOP\r\n
            S: BYE "Input buffer full"
            E: Close
            > buffered
            = 0
            "#,
            login()
        ),
    );
}
