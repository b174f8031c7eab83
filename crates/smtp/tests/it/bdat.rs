//! BDAT (RFC 3030): counted chunks, never dot-stuffed, read even when refused.

use smtp::Event;

use crate::shell::{EHLO_MX, GREETING_MX, mx};

fn transaction() -> String {
    format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<b@example.net>
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok"
    )
}

#[test]
fn chunks_make_one_message() {
    let shell = mx().run(&format!(
        "{}
        C~ BDAT 7\\r\\n.\\r\\nab\\r\\n
        S: 250 2.0.0 7 octets received
        C~ BDAT 2\\r\\ncd
        S: 250 2.0.0 2 octets received
        C: BDAT 0 LAST
        S: 250 2.0.0 Ok: queued
        C~ MAIL FROM:<a@example.org>\\r\\nRCPT TO:<b@example.net>\\r\\nBDAT 3 LAST\\r\\nxyz
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 250 2.0.0 Ok: queued",
        transaction()
    ));
    let messages = shell.messages();
    assert_eq!(messages.len(), 2);
    // Exact bytes: the leading dot stays, no unstuffing in BDAT.
    assert_eq!(messages[0].1, b".\r\nab\r\ncd");
    assert_eq!(messages[1].1, b"xyz");
}

#[test]
fn refused_chunks_are_still_read() {
    // The chunk's bytes look like commands; they are discarded, not run.
    let shell = mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C~ BDAT 6\\r\\nQUIT\\r\\n
        S: 503 5.5.1 Need MAIL command
        C: MAIL FROM:<a@example.org>
        S: 250 2.1.0 Ok
        C~ BDAT 6 LAST\\r\\nQUIT\\r\\n
        S: 554 5.5.1 No valid recipients
        C: RCPT TO:<b@example.net>
        S: 250 2.1.5 Ok
        C~ BDAT 1\\r\\nx
        S: 250 2.0.0 1 octets received
        C: DATA
        S: 503 5.5.1 DATA not allowed after BDAT
        C: RCPT TO:<c@example.net>
        S: 503 5.5.1 RCPT not allowed after BDAT
        C: BDAT x
        S: 501 5.5.4 Syntax: BDAT chunk-size [LAST]"
    ));
    assert!(!shell.events.contains(&Event::Close));
}

#[test]
fn over_the_size_limit_fails_the_transaction() {
    // 552 right after the chunk that crosses the limit; pipelined chunks after it get the
    // same reply and are discarded; LAST ends the transaction.
    let shell = mx()
        .config(|config| config.message_bytes_max = 10)
        .run(&format!(
            "{}
            C~ BDAT 8\\r\\n01234567
            C~ BDAT 8\\r\\n01234567
            C~ BDAT 8\\r\\n01234567
            C~ BDAT 1 LAST\\r\\nx
            S: 250 2.0.0 8 octets received
            S: 552 5.3.4 Message size exceeds fixed maximum message size of 10 bytes
            S: 552 5.3.4 Message size exceeds fixed maximum message size of 10 bytes
            S: 552 5.3.4 Message size exceeds fixed maximum message size of 10 bytes
            C: MAIL FROM:<a@example.org>
            S: 250 2.1.0 Ok",
            transaction().replace("SIZE 52428800", "SIZE 10")
        ));
    assert!(shell.messages().is_empty());
}

#[test]
fn text_body_checks_apply_binarymime_does_not_need_them() {
    let shell = mx().run(&format!(
        "{}
        C~ BDAT 5 LAST\\r\\na\\nb\\r\\n
        S: 550 5.5.2 Message contains bare CR or LF (RFC 5321 2.3.8)
        C: MAIL FROM:<a@example.org> BODY=BINARYMIME
        C: RCPT TO:<b@example.net>
        C: DATA
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 503 5.5.1 BINARYMIME requires BDAT
        C~ BDAT 4 LAST\\r\\n\\0\\n\\r.
        S: 250 2.0.0 Ok: queued",
        transaction()
    ));
    let messages = shell.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].1, b"\0\n\r.");
    assert!(messages[0].0.body_8bit);
}

#[test]
fn bdat_zero_last_is_an_empty_message() {
    let shell = mx().run(&format!(
        "{}
        C: BDAT 0 LAST
        S: 250 2.0.0 Ok: queued",
        transaction()
    ));
    assert_eq!(shell.messages()[0].1, b"");
}
