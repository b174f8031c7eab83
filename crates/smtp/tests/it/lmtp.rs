//! LMTP (RFC 2033): LHLO, and one reply per accepted recipient after the data.

use smtp::{Reply, Verdict};

use crate::shell::{lmtp, reject};

const LHLO: &str = "
    S: 220 lmtp.example LMTP ready
    C: LHLO mx.example
    S: 250-lmtp.example
    S: 250-PIPELINING
    S: 250-SIZE 52428800
    S: 250-8BITMIME
    S: 250-ENHANCEDSTATUSCODES
    S: 250-SMTPUTF8
    S: 250-CHUNKING
    S: 250 BINARYMIME
";

#[test]
fn ehlo_and_helo_are_refused() {
    lmtp().run(
        "S: 220 lmtp.example LMTP ready
        C: EHLO mx.example
        S: 500 5.5.1 Use LHLO in LMTP
        C: HELO mx.example
        S: 500 5.5.1 Use LHLO in LMTP
        C: MAIL FROM:<a@example.org>
        S: 503 5.5.1 Send LHLO first",
    );
}

#[test]
fn one_reply_per_recipient() {
    let shell = lmtp()
        .rcpt(Verdict::Accept)
        .rcpt(reject(550, (5, 1, 1), "No such user"))
        .rcpt(Verdict::Accept)
        .message(vec![
            Verdict::Accept,
            Verdict::Reject(Reply::new(452, (4, 2, 2), "Mailbox full")),
        ])
        .run(&format!(
            "{LHLO}
            C: MAIL FROM:<a@example.org>
            C: RCPT TO:<b@example.net>
            C: RCPT TO:<nobody@example.net>
            C: RCPT TO:<c@example.net>
            C: DATA
            S: 250 2.1.0 Ok
            S: 250 2.1.5 Ok
            S: 550 5.1.1 No such user
            S: 250 2.1.5 Ok
            S: 354 End data with <CR><LF>.<CR><LF>
            C: hi
            C: .
            S: 250 2.0.0 <b@example.net> Delivered
            S: 452 4.2.2 Mailbox full"
        ));
    let messages = shell.messages();
    assert_eq!(messages[0].0.protocol, "LMTP");
    assert_eq!(
        messages[0].0.recipients,
        vec!["b@example.net".to_string(), "c@example.net".to_string()]
    );
}

#[test]
fn missing_verdicts_are_temporary_failures() {
    lmtp().message(vec![Verdict::Accept]).run(&format!(
        "{LHLO}
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<b@example.net>
        C: RCPT TO:<c@example.net>
        C: DATA
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 250 2.1.5 Ok
        S: 354 End data with <CR><LF>.<CR><LF>
        C: .
        S: 250 2.0.0 <b@example.net> Delivered
        S: 451 4.3.0 Temporary failure, try again later"
    ));
}

#[test]
fn refused_content_gets_one_reply_per_recipient() {
    let shell = lmtp()
        .config(|config| config.message_bytes_max = 4)
        .run(&format!(
            "{}
            C: MAIL FROM:<a@example.org>
            C: RCPT TO:<b@example.net>
            C: RCPT TO:<c@example.net>
            C: DATA
            S: 250 2.1.0 Ok
            S: 250 2.1.5 Ok
            S: 250 2.1.5 Ok
            S: 354 End data with <CR><LF>.<CR><LF>
            C: hello
            C: .
            S: 552 5.3.4 Message size exceeds fixed maximum message size of 4 bytes
            S: 552 5.3.4 Message size exceeds fixed maximum message size of 4 bytes",
            LHLO.replace("SIZE 52428800", "SIZE 4")
        ));
    assert!(shell.messages().is_empty());
}

#[test]
fn bdat_last_gets_one_reply_per_recipient() {
    lmtp().run(&format!(
        "{LHLO}
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<b@example.net>
        C: RCPT TO:<c@example.net>
        C~ BDAT 4\\r\\nab\\r\\n
        C: BDAT 0 LAST
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 250 2.1.5 Ok
        S: 250 2.0.0 4 octets received
        S: 250 2.0.0 <b@example.net> Delivered
        S: 250 2.0.0 <c@example.net> Delivered"
    ));
}

#[test]
fn data_without_recipients_is_503() {
    // RFC 2033 4.2 (SMTP says 554, RFC 5321 3.3).
    lmtp()
        .rcpt(reject(550, (5, 1, 1), "No such user"))
        .run(&format!(
            "{LHLO}
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<nobody@example.net>
        C: DATA
        S: 250 2.1.0 Ok
        S: 550 5.1.1 No such user
        S: 503 5.5.1 No valid recipients"
        ));
}

/// mailstow's cluster parameters (`Config::cluster_routes`): the origin of a handed-over
/// message and the owner epoch of each recipient reach the shell in the envelope; without
/// the option they are unknown parameters (RFC 5321 4.1.1.11: 555).
#[test]
fn cluster_route_parameters_reach_the_envelope() {
    let shell = lmtp().config(|config| config.cluster_routes = true).run(
        "S: 220 lmtp.example LMTP ready
            C: LHLO n1.example
            S: 250-lmtp.example
            S: 250-PIPELINING
            S: 250-SIZE 52428800
            S: 250-8BITMIME
            S: 250-ENHANCEDSTATUSCODES
            S: 250-SMTPUTF8
            S: 250-CHUNKING
            S: 250-BINARYMIME
            S: 250 XMAILSTOW-ROUTE
            C: MAIL FROM:<a@example.org> XORIGIN=n1:42 BODY=8BITMIME
            S: 250 2.1.0 Ok
            C: RCPT TO:<b@example.net> XEPOCH=3
            S: 250 2.1.5 Ok
            C: RCPT TO:<c@example.net>
            S: 250 2.1.5 Ok
            C: RCPT TO:<d@example.net> xepoch=x
            S: 501 5.5.4 Invalid value for XEPOCH
            C: DATA
            S: 354 End data with <CR><LF>.<CR><LF>
            C: hi
            C: .
            S: 250 2.0.0 <b@example.net> Delivered
            S: 250 2.0.0 <c@example.net> Delivered",
    );
    let messages = shell.messages();
    let envelope = &messages[0].0;
    assert_eq!(envelope.origin.as_deref(), Some("n1:42"));
    assert_eq!(envelope.epochs, vec![Some(3), None]);
    assert!(envelope.body_8bit);

    lmtp().run(&format!(
        "{LHLO}
        C: MAIL FROM:<a@example.org> XORIGIN=n1:42
        S: 555 5.5.4 Unsupported parameter XORIGIN=N1:42"
    ));
}
