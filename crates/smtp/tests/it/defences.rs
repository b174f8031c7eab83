//! Limits and defences, each with its exact reply.

use smtp::{Event, Verdict};

use crate::shell::{EHLO_MX, GREETING_MX, Split, mx};

/// EHLO, MAIL, RCPT and DATA, answered; what the defence tests start from.
fn open_data() -> String {
    format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<b@example.net>
        C: DATA
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 354 End data with <CR><LF>.<CR><LF>"
    )
}

#[test]
fn command_line_too_long() {
    // RFC 5321 4.5.3.1.4: 16 bytes allowed here, CRLF included. The rest of the line is
    // dropped through its LF; the next command works.
    let shell = mx()
        .config(|config| config.command_line_max = 16)
        .run(&format!(
            "{GREETING_MX}
        C: NOOP 012345678
        S: 250 2.0.0 Ok
        C: NOOP 0123456789
        S: 500 5.5.6 Line too long
        C~ NOOP 0123456789012345678901234567890123456789
        S: 500 5.5.6 Line too long
        C~ 0123456789012345678901234567890123456789
        C: 0123456789012345678901234567890123456789 QUIT
        C: NOOP
        S: 250 2.0.0 Ok"
        ));
    assert!(shell.buffered_max <= 16 + 1, "{}", shell.buffered_max);
}

#[test]
fn a_line_that_cannot_fit_the_input_buffer_is_too_long() {
    mx().config(|config| {
        config.command_line_max = 1 << 20;
        config.input_buffer_max = 32;
    })
    .run(&format!(
        "{GREETING_MX}
        C: NOOP 0123456789012345678901234
        S: 250 2.0.0 Ok
        C: NOOP 01234567890123456789012345
        S: 500 5.5.6 Line too long"
    ));
}

#[test]
fn bare_newlines_nul_and_bad_utf8_in_commands() {
    mx().run(&format!(
        "{GREETING_MX}
        C~ NOOP\\n
        S: 500 5.5.2 Bare CR or LF in command (RFC 5321 2.3.8)
        C: NO\\rOP
        S: 500 5.5.2 Bare CR or LF in command (RFC 5321 2.3.8)
        C: NOOP\\0
        S: 500 5.5.2 NUL byte in command
        C: NOOP \\xff
        S: 500 5.5.2 Command is not UTF-8
        C: NOOP
        S: 250 2.0.0 Ok"
    ));
}

#[test]
fn smuggling_bare_lf_dot_does_not_end_data() {
    // RFC 5321 2.3.8: `\n.\n`, `\n.\r\n`, `\r.\r` and `\r\n.\n` are not the end of the data;
    // what follows them stays message content, and the message is refused after the real end.
    let shell = mx().run(&format!(
        "{}
        C~ Subject: x\\r\\n\\r\\nhello\\n.\\nMAIL FROM:<evil@example.org>\\r\\n
        C~ more\\n.\\r\\nRCPT TO:<victim@example.net>\\r\\n
        C~ again\\r.\\rDATA\\r\\n.\\nQUIT\\r\\n
        C: .
        S: 550 5.5.2 Message contains bare CR or LF (RFC 5321 2.3.8)
        C: RCPT TO:<b@example.net>
        S: 503 5.5.1 Need MAIL command",
        open_data()
    ));
    assert!(shell.messages().is_empty());
    let mails = shell
        .events
        .iter()
        .filter(|event| matches!(event, Event::MailFrom { .. }))
        .count();
    assert_eq!(mails, 1, "the smuggled MAIL was never a command");
}

#[test]
fn bare_cr_in_data_is_refused() {
    let shell = mx().run(&format!(
        "{}
        C: line with a bare\\rCR
        C: .
        S: 550 5.5.2 Message contains bare CR or LF (RFC 5321 2.3.8)",
        open_data()
    ));
    assert!(shell.messages().is_empty());
}

#[test]
fn nul_in_data_is_refused() {
    let shell = mx().run(&format!(
        "{}
        C: a NUL \\0 here
        C: .
        S: 554 5.6.0 Message contains NUL bytes",
        open_data()
    ));
    assert!(shell.messages().is_empty());
}

#[test]
fn long_text_line_is_refused_after_the_data() {
    // 16 bytes per line allowed, CRLF included: 14 characters pass, 15 do not.
    let shell = mx()
        .config(|config| config.text_line_max = 16)
        .run(&format!(
            "{}
        C: 01234567890123
        C: .
        S: 250 2.0.0 Ok: queued
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<b@example.net>
        C: DATA
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 354 End data with <CR><LF>.<CR><LF>
        C: 012345678901234
        C: .
        S: 500 5.5.6 Message has a line over 16 bytes",
            open_data()
        ));
    assert_eq!(shell.messages().len(), 1);
}

#[test]
fn message_over_the_size_limit_is_read_to_the_end_and_refused() {
    let shell = mx()
        .config(|config| config.message_bytes_max = 10)
        .run(&format!(
            "{}
        C: 0123456789
        C: MAIL FROM:<still-content@example.org>
        C: .
        S: 552 5.3.4 Message size exceeds fixed maximum message size of 10 bytes
        C: NOOP
        S: 250 2.0.0 Ok",
            open_data().replace("SIZE 52428800", "SIZE 10")
        ));
    assert!(shell.messages().is_empty());
    // The limit counts content bytes: exactly 10 is fine ("12345678" and CRLF).
    let shell = mx()
        .config(|config| config.message_bytes_max = 10)
        .run(&format!(
            "{}
        C: 12345678
        C: .
        S: 250 2.0.0 Ok: queued",
            open_data().replace("SIZE 52428800", "SIZE 10")
        ));
    assert_eq!(shell.messages().len(), 1);
}

#[test]
fn too_many_errors_close_the_session() {
    mx().config(|config| config.errors_max = 3).run(&format!(
        "{GREETING_MX}
        C: FROB
        C: MAIL FROM:<a@example.org>
        C: FROB
        C: NOOP
        S: 500 5.5.1 Command unrecognized
        S: 503 5.5.1 Send EHLO/HELO first
        S: 500 5.5.1 Command unrecognized
        S: 421 4.7.0 mx.example Error: too many errors"
    ));
}

#[test]
fn too_many_commands_without_progress_close_the_session() {
    let shell = mx()
        .config(|config| config.commands_without_progress_max = 3)
        .run(&format!(
            "{GREETING_MX}
            C: EHLO client.example
            {EHLO_MX}
            C: NOOP
            C: MAIL FROM:<a@example.org>
            C: NOOP
            C: RSET
            C: VRFY x
            C: NOOP
            S: 250 2.0.0 Ok
            S: 250 2.1.0 Ok
            S: 250 2.0.0 Ok
            S: 250 2.0.0 Ok
            S: 252 2.5.2 Cannot VRFY user, but will accept message and attempt delivery
            S: 421 4.7.0 mx.example Error: too many commands without progress"
        ));
    assert_eq!(shell.events.last(), Some(&Event::Close));
}

#[test]
fn pipelined_input_waits_behind_a_decision() {
    let mut shell = mx().config(|config| config.input_buffer_max = 64).shell();
    shell.output.clear();
    let mut input = b"EHLO c\r\nMAIL FROM:<a@example.org>\r\n".to_vec();
    for _ in 0..20 {
        input.extend_from_slice(b"NOOP\r\n");
    }
    shell.session.feed(&input);
    // The shell does not answer yet: the session holds the rest and asks for no more.
    let mut mail = None;
    while let Some(event) = shell.session.poll() {
        if let Event::MailFrom { .. } = event {
            mail = Some(event);
        }
    }
    assert!(mail.is_some());
    assert!(!shell.session.wants_input());
    assert_eq!(shell.session.buffered_len(), 20 * 6);
    shell.session.mail_result(Verdict::Accept);
    shell.drain();
    assert_eq!(shell.session.buffered_len(), 0);
    assert!(shell.session.wants_input());
    let noops = String::from_utf8_lossy(&shell.output)
        .matches("250 2.0.0 Ok\r\n")
        .count();
    assert_eq!(noops, 20);
}

#[test]
fn close_ends_everything() {
    let mut shell = mx().shell();
    shell.feed(b"QUIT\r\nNOOP\r\n", Split::Lines);
    assert_eq!(
        String::from_utf8_lossy(&shell.output),
        "220 mx.example ESMTP ready\r\n221 2.0.0 mx.example closing connection\r\n"
    );
    shell.session.feed(b"NOOP\r\n");
    shell.session.mail_result(Verdict::Accept);
    shell.session.timed_out();
    assert_eq!(shell.session.poll(), None);
    assert!(!shell.session.wants_input());
    assert_eq!(shell.session.buffered_len(), 0);
}
