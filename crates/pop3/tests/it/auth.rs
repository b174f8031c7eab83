//! AUTH (RFC 5034) with PLAIN (RFC 4616).

use crate::harness::{check, check_transaction, plain, strict};

const GREETING: &str = "S: +OK pop.example.org POP3 server ready\n";

fn check_plain(script: &str) {
    check(plain(), false, &format!("{GREETING}{script}"));
}

#[test]
fn bare_auth_lists_mechanisms() {
    check_plain(
        "
        C: AUTH
        S: +OK
        S: PLAIN
        S: .
        ",
    );
}

#[test]
fn plain_with_initial_response() {
    check_plain(
        r#"
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        E: Auth { mechanism: "PLAIN", username: "alice", password: "secret", authzid: "" }
        > auth ok 7 3:120
        S: +OK maildrop has 1 message (120 octets)
        "#,
    );
}

#[test]
fn plain_with_authzid_and_without_padding() {
    check_plain(
        r#"
        C: auth plain YWRtaW4AYWxpY2UAc2VjcmV0
        E: Auth { mechanism: "PLAIN", username: "alice", password: "secret", authzid: "admin" }
        "#,
    );
}

#[test]
fn plain_with_continuation() {
    // RFC 5034 4: "+ " and an empty challenge, then the response line.
    check_plain(
        r#"
        C: AUTH PLAIN
        S: +\x20
        C: AGFsaWNlAG15IHNlY3JldA==
        E: Auth { mechanism: "PLAIN", username: "alice", password: "my secret", authzid: "" }
        > auth bad
        S: -ERR [AUTH] Authentication failed
        "#,
    );
}

#[test]
fn pipelined_auth_and_response() {
    check_plain(
        r#"
        C| AUTH PLAIN\r\nAGFsaWNlAHNlY3JldA==\r\nSTAT\r\n
        S: +\x20
        E: Auth { mechanism: "PLAIN", username: "alice", password: "secret", authzid: "" }
        > auth ok 7
        S: +OK maildrop has 0 messages (0 octets)
        S: +OK 0 0
        "#,
    );
}

#[test]
fn star_cancels() {
    // RFC 5034 4: the server must reject the AUTH command.
    check_plain(
        "
        C: AUTH PLAIN
        S: +\\x20
        C: *
        S: -ERR authentication cancelled
        C: NOOP
        S: -ERR command not valid in this state
        ",
    );
}

#[test]
fn response_lines_are_not_commands() {
    // QUIT after the challenge is a (bad) response, not QUIT.
    check_plain(
        "
        C: AUTH PLAIN
        S: +\\x20
        C: QUIT
        S: -ERR malformed PLAIN response
        ",
    );
}

#[test]
fn bad_base64_and_malformed_plain() {
    check_plain(
        "
        C: AUTH PLAIN !!!!
        S: -ERR invalid base64 in SASL response
        # \"alice\": no NULs
        C: AUTH PLAIN YWxpY2U=
        S: -ERR malformed PLAIN response
        # \"\\0alice\\0\": empty password
        C: AUTH PLAIN AGFsaWNlAA==
        S: -ERR malformed PLAIN response
        # RFC 5034 4: \"=\" is an empty initial response
        C: AUTH PLAIN =
        S: -ERR malformed PLAIN response
        C: AUTH PLAIN
        S: +\\x20
        C:
        S: -ERR malformed PLAIN response
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA== extra
        S: -ERR syntax: AUTH [mechanism [initial-response]]
        ",
    );
}

#[test]
fn unknown_mechanism() {
    check_plain(
        "
        C: AUTH CRAM-MD5
        S: -ERR unsupported SASL mechanism
        C: AUTH GSSAPI abcd
        S: -ERR unsupported SASL mechanism
        ",
    );
}

#[test]
fn auth_is_refused_without_tls_by_default() {
    check(
        strict(),
        false,
        "
        S: +OK pop.example.org POP3 server ready
        C: AUTH
        S: -ERR [AUTH] Plaintext authentication disallowed without TLS
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: -ERR [AUTH] Plaintext authentication disallowed without TLS
        ",
    );
}

#[test]
fn auth_after_user_forgets_the_user() {
    check_plain(
        "
        C: USER alice
        S: +OK send PASS
        C: AUTH PLAIN
        S: +\\x20
        C: *
        S: -ERR authentication cancelled
        C: PASS secret
        S: -ERR USER first
        ",
    );
}

#[test]
fn auth_in_transaction_is_wrong_state() {
    check_transaction(
        "
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: -ERR command not valid in this state
        ",
    );
}

/// A cluster node that checked the password hands the connection to the user's node, which
/// answers the login itself: the session gives back what the client sent after the login
/// (pipelined commands) and says nothing more.
#[test]
fn a_login_handed_over_gives_back_the_input_after_it() {
    use pop3::{Event, Session};
    let mut session = Session::new(std::sync::Arc::new(plain()), false);
    while session.poll().is_some() {}
    assert_eq!(session.hand_over(), None, "no login is waiting");
    session.feed(b"USER alice\r\nPASS secret\r\nSTAT\r\nLIST 1\r\n");
    let mut asked = false;
    while let Some(event) = session.poll() {
        asked |= matches!(event, Event::Auth { .. });
    }
    assert!(asked);
    assert_eq!(
        session.hand_over().as_deref(),
        Some(&b"STAT\r\nLIST 1\r\n"[..])
    );
    session.feed(b"NOOP\r\n");
    assert_eq!(session.poll(), None, "the session is over and silent");
    assert_eq!(session.hand_over(), None);
}
