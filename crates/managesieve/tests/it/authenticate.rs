//! AUTHENTICATE (RFC 5804 2.1) with PLAIN (RFC 4616).

use managesieve::Config;

use crate::harness::{GREETING, check, check_authenticated, login, plain, strict};

#[test]
fn initial_response_as_a_literal() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C| authenticate "plain" {{20+}}\r\nAGFsaWNlAHNlY3JldA==\r\n
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth ok alice
            S: OK "Logged in"
            C: CAPABILITY
            S: "IMPLEMENTATION" "mailstow"
            S: "SASL" ""
            S: "SIEVE" "fileinto vacation"
            S: "OWNER" "alice"
            S: "UNAUTHENTICATE"
            S: "VERSION" "1.0"
            S: OK "Capability completed"
            "#
        ),
    );
}

#[test]
fn continuation_with_a_quoted_string_and_a_literal() {
    // RFC 5804 2.1: the server's challenge is a string (PLAIN's is empty), the client's
    // response a string on its own line.
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: AUTHENTICATE "PLAIN"
            S: ""
            C: "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth bad
            S: NO "Authentication failed"
            C: AUTHENTICATE "PLAIN"
            S: ""
            C| {{20}}\r\nAGFsaWNlAHNlY3JldA==\r\n
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth ok alice
            S: OK "Logged in"
            "#
        ),
    );
}

#[test]
fn abort_and_malformed_responses() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: AUTHENTICATE "PLAIN"
            S: ""
            C: "*"
            S: NO "Authentication cancelled"
            C: AUTHENTICATE "PLAIN" "not base64!"
            S: NO "Invalid base64 in SASL response"
            # base64 of "alice\0secret": one NUL only.
            C: AUTHENTICATE "PLAIN" "YWxpY2UAc2VjcmV0"
            S: NO "Malformed PLAIN response"
            C: AUTHENTICATE "PLAIN"
            S: ""
            C: NOOP
            S: NO "Syntax: a SASL response string"
            C: NOOP
            S: OK "Done"
            "#
        ),
    );
}

#[test]
fn mechanisms_and_syntax() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: AUTHENTICATE "LOGIN"
            S: NO "Unsupported SASL mechanism"
            C: AUTHENTICATE PLAIN
            S: NO "Syntax: AUTHENTICATE \\"PLAIN\\" [initial-response]"
            C: AUTHENTICATE
            S: NO "Syntax: AUTHENTICATE \\"PLAIN\\" [initial-response]"
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA==" "x"
            S: NO "Syntax: AUTHENTICATE \\"PLAIN\\" [initial-response]"
            "#
        ),
    );
}

#[test]
fn failures_are_bounded() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHdyb25n"
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "wrong", authzid: "" }}
            > auth bad
            S: NO "Authentication failed"
            C: AUTHENTICATE "PLAIN" "YWxpY2UAc2VjcmV0"
            S: NO "Malformed PLAIN response"
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHdyb25n"
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "wrong", authzid: "" }}
            > auth bad
            S: NO "Authentication failed"
            S: BYE "Too many authentication failures"
            E: Close
            C: NOOP
            "#
        ),
    );
}

#[test]
fn authzid_is_refused_unless_allowed() {
    // "bob\0alice\0secret": alice asks to act as bob.
    let script = |outcome: &str| {
        format!(
            r#"{GREETING}
            C: AUTHENTICATE "PLAIN" "Ym9iAGFsaWNlAHNlY3JldA=="
            {outcome}
            # "alice\0alice\0secret" is no other user.
            C: AUTHENTICATE "PLAIN" "YWxpY2UAYWxpY2UAc2VjcmV0"
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "alice" }}
            "#
        )
    };
    check(
        plain(),
        false,
        &script(r#"S: NO "Authorization identity must be the authentication identity""#),
    );
    check(
        Config {
            authzid_allowed: true,
            ..plain()
        },
        false,
        &script(
            r#"E: Authenticate { mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "bob" }
            > auth bad
            S: NO "Authentication failed""#,
        ),
    );
}

#[test]
fn plaintext_needs_tls() {
    // RFC 5804 1.3 ENCRYPT-NEEDED; SASL announced empty before TLS.
    check(
        strict(),
        false,
        r#"
        S: "IMPLEMENTATION" "mailstow"
        S: "SASL" ""
        S: "SIEVE" "fileinto vacation"
        S: "STARTTLS"
        S: "UNAUTHENTICATE"
        S: "VERSION" "1.0"
        S: OK "ManageSieve ready"
        C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
        S: NO (ENCRYPT-NEEDED) "Plaintext authentication disallowed without TLS"
        "#,
    );
}

#[test]
fn the_shells_other_answers() {
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth weak
            S: NO (AUTH-TOO-WEAK) "Mechanism too weak for this user"
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth transition
            S: NO (TRANSITION-NEEDED) "Log in with PLAIN once to upgrade the stored credentials"
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth referral sieve://node2.example.org
            S: NO (REFERRAL "sieve://node2.example.org") "Your scripts are on another server"
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth unavailable directory down
            S: NO (TRYLATER) "directory down"
            C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
            E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
            > auth ok alice
            S: OK "Logged in"
            "#
        ),
    );
}

#[test]
fn not_twice() {
    check_authenticated(
        r#"
        C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
        S: NO "Already authenticated"
        "#,
    );
}

#[test]
fn script_commands_need_a_login() {
    let commands = [
        r#"LISTSCRIPTS"#,
        r#"GETSCRIPT "a""#,
        r#"PUTSCRIPT "a" "keep;""#,
        r#"CHECKSCRIPT "keep;""#,
        r#"SETACTIVE "a""#,
        r#"DELETESCRIPT "a""#,
        r#"RENAMESCRIPT "a" "b""#,
        r#"HAVESPACE "a" 10"#,
        r#"UNAUTHENTICATE"#,
    ];
    let mut script = GREETING.to_owned();
    for command in commands {
        script.push_str(&format!("C: {command}\nS: NO \"Authenticate first\"\n"));
    }
    let config = Config {
        errors_max: 20,
        ..plain()
    };
    check(config, false, &script);
    // The login itself is unaffected.
    check(plain(), false, &login());
}

#[test]
fn hand_over_returns_the_input_after_the_login() {
    use std::sync::Arc;

    use managesieve::{Event, Session};

    let mut session = Session::new(Arc::new(plain()), false);
    while session.poll().is_some() {}
    assert_eq!(session.hand_over(), None, "no login waiting");
    session.feed(b"AUTHENTICATE \"PLAIN\" \"AGFsaWNlAHNlY3JldA==\"\r\nLISTSCRIPTS\r\nNO");
    assert!(matches!(session.poll(), Some(Event::Authenticate { .. })));
    assert_eq!(
        session.hand_over().as_deref(),
        Some(&b"LISTSCRIPTS\r\nNO"[..])
    );
    assert!(session.is_closed());
    assert_eq!(
        session.poll(),
        None,
        "no Close: the shell owns the connection"
    );
    session.feed(b"NOOP\r\n");
    assert_eq!(session.poll(), None);
}
