//! AUTH PLAIN and LOGIN (RFC 4954, RFC 4616), over TLS unless allowed in plaintext.

use smtp::{AuthResult, Event};

use crate::shell::{EHLO_MX, EHLO_MX_TLS, GREETING_MX, lmtp, mx};

/// Greeting and EHLO over TLS.
fn hello_tls() -> String {
    format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX_TLS}"
    )
}

fn auth_events(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|event| matches!(event, Event::Auth { .. }))
        .collect()
}

#[test]
fn plain_with_initial_response() {
    let shell = mx()
        .tls()
        .auth(AuthResult::Success {
            user: "alice@example.org".to_string(),
        })
        .run(&format!(
            "{}
            C: AUTH PLAIN YXV0aHoAYWxpY2UAc2VjcmV0
            S: 235 2.7.0 Authentication successful
            C: MAIL FROM:<alice@example.org>
            C: RCPT TO:<bob@example.net>
            C: DATA
            S: 250 2.1.0 Ok
            S: 250 2.1.5 Ok
            S: 354 End data with <CR><LF>.<CR><LF>
            C: .
            S: 250 2.0.0 Ok: queued",
            hello_tls()
        ));
    assert_eq!(
        auth_events(&shell.events),
        vec![&Event::Auth {
            mechanism: "PLAIN",
            authzid: "authz".to_string(),
            username: "alice".to_string(),
            password: "secret".to_string(),
        }]
    );
    let messages = shell.messages();
    let [(envelope, _)] = messages.as_slice() else {
        panic!("one message expected");
    };
    assert_eq!(envelope.authenticated.as_deref(), Some("alice@example.org"));
    assert_eq!(envelope.protocol, "ESMTPSA");
    assert!(envelope.tls);
}

#[test]
fn plain_without_initial_response() {
    let shell = mx().tls().run(&format!(
        "{}
        C: AUTH PLAIN
        S: 334\\x20
        C: AGFsaWNlAHNlY3JldA
        S: 235 2.7.0 Authentication successful",
        hello_tls()
    ));
    assert_eq!(
        auth_events(&shell.events),
        vec![&Event::Auth {
            mechanism: "PLAIN",
            authzid: String::new(),
            username: "alice".to_string(),
            password: "secret".to_string(),
        }]
    );
}

#[test]
fn login() {
    let shell = mx().tls().auth(AuthResult::Failed).run(&format!(
        "{}
        C: AUTH LOGIN
        S: 334 VXNlcm5hbWU6
        C: YWxpY2U=
        S: 334 UGFzc3dvcmQ6
        C: c2VjcmV0
        S: 535 5.7.8 Authentication credentials invalid
        C: AUTH LOGIN YWxpY2U=
        S: 334 UGFzc3dvcmQ6
        C: c2VjcmV0
        S: 235 2.7.0 Authentication successful",
        hello_tls()
    ));
    let login = Event::Auth {
        mechanism: "LOGIN",
        authzid: String::new(),
        username: "alice".to_string(),
        password: "secret".to_string(),
    };
    assert_eq!(auth_events(&shell.events), vec![&login, &login]);
}

#[test]
fn cancel_bad_base64_and_failures() {
    mx().tls().auth(AuthResult::TemporaryFailure).run(&format!(
        "{}
            C: AUTH PLAIN
            S: 334\\x20
            C: *
            S: 501 5.0.0 Authentication canceled
            C: AUTH LOGIN
            S: 334 VXNlcm5hbWU6
            C: !!!
            S: 501 5.5.2 Invalid base64 data
            C: AUTH PLAIN !!!
            S: 501 5.5.2 Invalid base64 data
            C: AUTH PLAIN =
            S: 501 5.5.2 Invalid PLAIN response
            C: AUTH PLAIN YWxpY2U=
            S: 501 5.5.2 Invalid PLAIN response
            C: AUTH CRAM-MD5
            S: 504 5.5.4 Unrecognized authentication type
            C: AUTH
            S: 501 5.5.4 Syntax: AUTH mechanism [initial-response]
            C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
            S: 454 4.7.0 Temporary authentication failure
            C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
            S: 235 2.7.0 Authentication successful
            C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
            S: 503 5.5.1 Already authenticated",
        hello_tls()
    ));
}

#[test]
fn sequence_errors() {
    mx().tls().run(&format!(
        "{GREETING_MX}
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: 503 5.5.1 Send EHLO first
        C: EHLO client.example
        {EHLO_MX_TLS}
        C: MAIL FROM:<a@example.org>
        S: 250 2.1.0 Ok
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: 503 5.5.1 AUTH not allowed during a mail transaction"
    ));
}

#[test]
fn plaintext_needs_tls_unless_allowed() {
    mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: 538 5.7.11 Encryption required for requested authentication mechanism"
    ));
    let shell = mx()
        .config(|config| config.auth_without_tls = true)
        .run(&format!(
            "{GREETING_MX}
            C: EHLO client.example
            S: 250-mx.example
            S: 250-PIPELINING
            S: 250-SIZE 52428800
            S: 250-8BITMIME
            S: 250-ENHANCEDSTATUSCODES
            S: 250-SMTPUTF8
            S: 250-CHUNKING
            S: 250-BINARYMIME
            S: 250 AUTH PLAIN LOGIN
            C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
            S: 235 2.7.0 Authentication successful
            C: MAIL FROM:<a@example.org>
            C: RCPT TO:<b@example.net>
            C: BDAT 0 LAST
            S: 250 2.1.0 Ok
            S: 250 2.1.5 Ok
            S: 250 2.0.0 Ok: queued"
        ));
    assert_eq!(shell.messages()[0].0.protocol, "ESMTPA");
}

#[test]
fn sasl_line_too_long() {
    mx().tls()
        .config(|config| config.command_line_max = 24)
        .run(&format!(
            "{}
        C: AUTH PLAIN
        S: 334\\x20
        C: AAAAAAAAAAAAAAAAAAAAAAAAAAAA
        S: 500 5.5.6 Authentication Exchange line is too long
        C: NOOP
        S: 250 2.0.0 Ok",
            hello_tls()
        ));
}

#[test]
fn not_in_lmtp() {
    lmtp().tls().run(
        "S: 220 lmtp.example LMTP ready
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: 502 5.5.1 Command not implemented",
    );
}

#[test]
fn ehlo_mx_has_no_auth_on_plaintext() {
    assert!(!EHLO_MX.contains("AUTH"));
}
