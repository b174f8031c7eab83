//! Every command's ordinary replies and sequence errors, MX and submission.

use std::time::Duration;

use smtp::{Event, Reply, Verdict};

use crate::shell::{EHLO_MX, GREETING_MX, mx, reject, submission};

#[test]
fn greeting_quit_and_close() {
    let mut shell = mx().run(&format!(
        "{GREETING_MX}
        C: QUIT
        S: 221 2.0.0 mx.example closing connection"
    ));
    assert_eq!(shell.events, vec![Event::Close]);
    // After Close nothing happens any more.
    shell.session.feed(b"NOOP\r\n");
    assert_eq!(shell.session.poll(), None);
    assert!(!shell.session.wants_input());
    assert!(shell.session.is_closed());
}

#[test]
fn ehlo_lists_extensions() {
    mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}"
    ));
    // STARTTLS when available on plaintext; AUTH on plaintext only when allowed.
    mx().config(|config| {
        config.tls_available = true;
        config.auth_without_tls = true;
    })
    .run(&format!(
        "{GREETING_MX}
        C: ehlo client.example
        S: 250-mx.example
        S: 250-PIPELINING
        S: 250-SIZE 52428800
        S: 250-8BITMIME
        S: 250-ENHANCEDSTATUSCODES
        S: 250-SMTPUTF8
        S: 250-CHUNKING
        S: 250-BINARYMIME
        S: 250-STARTTLS
        S: 250 AUTH PLAIN LOGIN"
    ));
}

#[test]
fn helo_and_syntax() {
    mx().run(&format!(
        "{GREETING_MX}
        C: EHLO
        S: 501 5.5.4 Syntax: EHLO domain
        C: HELO client.example
        S: 250 mx.example
        C: LHLO client.example
        S: 500 5.5.1 Command unrecognized"
    ));
}

#[test]
fn transaction_delivers_dot_unstuffed_content() {
    let shell = mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<alice@example.org>
        S: 250 2.1.0 Ok
        C: RCPT TO:<bob@example.net>
        S: 250 2.1.5 Ok
        C: DATA
        S: 354 End data with <CR><LF>.<CR><LF>
        C: Subject: hi
        C:
        C: ..leading dot
        C: .
        S: 250 2.0.0 Ok: queued
        C: QUIT
        S: 221 2.0.0 mx.example closing connection"
    ));
    let messages = shell.messages();
    let [(envelope, content)] = messages.as_slice() else {
        panic!("one message expected, got {messages:?}");
    };
    assert_eq!(*content, b"Subject: hi\r\n\r\n.leading dot\r\n");
    assert_eq!(envelope.helo, "client.example");
    assert_eq!(envelope.from, "alice@example.org");
    assert_eq!(envelope.recipients, vec!["bob@example.net".to_string()]);
    assert_eq!(envelope.protocol, "ESMTP");
    assert_eq!(envelope.authenticated, None);
    assert!(!envelope.tls);
}

#[test]
fn pipelined_mail_rcpt_data_in_one_feed() {
    // RFC 2920: the replies come in order, batched; DATA's 354 comes after the RCPT
    // decisions. The second recipient is refused by the shell.
    let shell = mx()
        .rcpt(Verdict::Accept)
        .rcpt(reject(550, (5, 1, 1), "No such user"))
        .run(&format!(
            "{GREETING_MX}
            C: EHLO client.example
            C: MAIL FROM:<> BODY=8BITMIME
            C: RCPT TO:<a@example.net>
            C: RCPT TO:<b@example.net>
            C: DATA
            {EHLO_MX}
            S: 250 2.1.0 Ok
            S: 250 2.1.5 Ok
            S: 550 5.1.1 No such user
            S: 354 End data with <CR><LF>.<CR><LF>
            C: body
            C: .
            S: 250 2.0.0 Ok: queued"
        ));
    let messages = shell.messages();
    let [(envelope, content)] = messages.as_slice() else {
        panic!("one message expected");
    };
    assert_eq!(envelope.from, "");
    assert_eq!(envelope.recipients, vec!["a@example.net".to_string()]);
    assert!(envelope.body_8bit);
    assert_eq!(*content, b"body\r\n");
}

#[test]
fn mail_parameters_reach_the_shell() {
    let shell = mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<j\u{f6}rg@example.org> SIZE=1000 BODY=8BITMIME SMTPUTF8 RET=HDRS ENVID=QQ+2B1 AUTH=<>
        S: 250 2.1.0 Ok
        C: RCPT TO:<bob@example.net> NOTIFY=SUCCESS,DELAY ORCPT=rfc822;bob+2Bx@example.net
        S: 250 2.1.5 Ok
        C: RCPT TO:<Postmaster> NOTIFY=NEVER
        S: 250 2.1.5 Ok"
    ));
    let events: Vec<&Event> = shell
        .events
        .iter()
        .filter(|event| matches!(event, Event::MailFrom { .. } | Event::RcptTo { .. }))
        .collect();
    assert_eq!(
        events,
        vec![
            &Event::MailFrom {
                from: "j\u{f6}rg@example.org".to_string(),
                size: Some(1000),
                body_8bit: true,
                smtputf8: true,
                ret_full: Some(false),
                envid: Some("QQ+1".to_string()),
            },
            &Event::RcptTo {
                to: "bob@example.net".to_string(),
                notify: Some("SUCCESS,DELAY".to_string()),
                orcpt: Some("rfc822;bob+x@example.net".to_string()),
            },
            &Event::RcptTo {
                to: "postmaster".to_string(),
                notify: Some("NEVER".to_string()),
                orcpt: None,
            },
        ]
    );
}

#[test]
fn mail_and_rcpt_errors() {
    mx().config(|config| {
        config.message_bytes_max = 1000;
        config.errors_max = 100;
    })
    .run(
        "S: 220 mx.example ESMTP ready
        C: MAIL FROM:<a@example.org>
        S: 503 5.5.1 Send EHLO/HELO first
        C: HELO client.example
        S: 250 mx.example
        C: RCPT TO:<b@example.net>
        S: 503 5.5.1 Need MAIL command
        C: DATA
        S: 503 5.5.1 Need MAIL command
        C: MAIL FROM:a@example.org
        S: 501 5.5.4 Syntax: MAIL FROM:<reverse-path> [parameters]
        C: MAIL FROM:<not an address>
        S: 553 5.1.7 Bad sender address syntax
        C: MAIL FROM:<postmaster>
        S: 553 5.1.7 Bad sender address syntax
        C: MAIL FROM:<a@example.org> FROB=1
        S: 555 5.5.4 Unsupported parameter FROB=1
        C: MAIL FROM:<a@example.org> REQUIRETLS
        S: 555 5.5.4 Unsupported parameter REQUIRETLS
        C: MAIL FROM:<a@example.org> SIZE=x
        S: 501 5.5.4 Invalid value for SIZE
        C: MAIL FROM:<j\u{f6}rg@example.org>
        S: 553 5.6.7 Non-ASCII address requires SMTPUTF8
        C: MAIL FROM:<a@example.org> SIZE=1001
        S: 552 5.3.4 Message size exceeds fixed maximum message size of 1000 bytes
        C: MAIL FROM:<a@example.org> SIZE=1000
        S: 250 2.1.0 Ok
        C: MAIL FROM:<a@example.org>
        S: 503 5.5.1 Nested MAIL command
        C: DATA
        S: 554 5.5.1 No valid recipients
        C: RCPT TO:<>
        S: 553 5.1.3 Bad recipient address syntax
        C: RCPT TO:<b@@example.net>
        S: 553 5.1.3 Bad recipient address syntax
        C: RCPT TO:<b@example.net> NOTIFY=NEVER,SUCCESS
        S: 501 5.5.4 Invalid value for NOTIFY
        C: RCPT TO:<b@example.net> FROB
        S: 555 5.5.4 Unsupported parameter FROB
        C: RCPT TO:<j\u{f6}rg@example.net>
        S: 553 5.6.7 Non-ASCII address requires SMTPUTF8",
    );
}

#[test]
fn shell_rejections_are_sent_and_must_be_failures() {
    mx().mail(reject(550, (5, 7, 1), "Sender rejected"))
        // A "rejection" with a success code must never read as success.
        .mail(Verdict::Reject(Reply::new(250, (2, 0, 0), "oops")))
        .message(vec![Verdict::Reject(Reply::temporary_failure())])
        .message(vec![])
        .run(&format!(
            "{GREETING_MX}
            C: EHLO client.example
            {EHLO_MX}
            C: MAIL FROM:<a@example.org>
            S: 550 5.7.1 Sender rejected
            C: MAIL FROM:<a@example.org>
            S: 451 4.3.0 oops
            C: MAIL FROM:<a@example.org>
            S: 250 2.1.0 Ok
            C: RCPT TO:<b@example.net>
            S: 250 2.1.5 Ok
            C: DATA
            S: 354 End data with <CR><LF>.<CR><LF>
            C: .
            S: 451 4.3.0 Temporary failure, try again later
            # The transaction is over either way.
            C: RCPT TO:<b@example.net>
            S: 503 5.5.1 Need MAIL command
            C: MAIL FROM:<a@example.org>
            C: RCPT TO:<b@example.net>
            C: DATA
            S: 250 2.1.0 Ok
            S: 250 2.1.5 Ok
            S: 354 End data with <CR><LF>.<CR><LF>
            # No verdict at all is a temporary failure, never success.
            C: .
            S: 451 4.3.0 Temporary failure, try again later"
        ));
}

#[test]
fn too_many_recipients() {
    // RFC 5321 4.5.3.1.10: 452 4.5.3, without asking the shell.
    let shell = mx()
        .config(|config| config.recipients_max = 2)
        .run(&format!(
            "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<a@example.org>
        C: RCPT TO:<b@example.net>
        C: RCPT TO:<c@example.net>
        C: RCPT TO:<d@example.net>
        S: 250 2.1.0 Ok
        S: 250 2.1.5 Ok
        S: 250 2.1.5 Ok
        S: 452 4.5.3 Too many recipients"
        ));
    let asked = shell
        .events
        .iter()
        .filter(|event| matches!(event, Event::RcptTo { .. }))
        .count();
    assert_eq!(asked, 2);
}

#[test]
fn rset_noop_vrfy_help_expn() {
    mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<a@example.org>
        S: 250 2.1.0 Ok
        C: RSET
        S: 250 2.0.0 Ok
        C: RCPT TO:<b@example.net>
        S: 503 5.5.1 Need MAIL command
        C: NOOP
        S: 250 2.0.0 Ok
        C: VRFY root
        S: 252 2.5.2 Cannot VRFY user, but will accept message and attempt delivery
        C: VRFY
        S: 501 5.5.4 Syntax: VRFY string
        C: HELP
        S: 214 2.0.0 Commands: EHLO HELO LHLO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY HELP STARTTLS AUTH
        C: EXPN staff
        S: 502 5.5.1 Command not implemented
        C: FROB
        S: 500 5.5.1 Command unrecognized"
    ));
}

#[test]
fn ehlo_resets_the_transaction() {
    mx().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<a@example.org>
        S: 250 2.1.0 Ok
        C: EHLO client.example
        {EHLO_MX}
        C: RCPT TO:<b@example.net>
        S: 503 5.5.1 Need MAIL command"
    ));
}

#[test]
fn submission_requires_auth() {
    submission().run(
        "S: 220 mx.example ESMTP ready
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
        C: MAIL FROM:<alice@example.org>
        S: 530 5.7.0 Authentication required
        C: AUTH PLAIN AGFsaWNlAHNlY3JldA==
        S: 235 2.7.0 Authentication successful
        C: MAIL FROM:<alice@example.org>
        S: 250 2.1.0 Ok",
    );
    // MX never requires it, whatever require_auth says.
    mx().config(|config| config.require_auth = true)
        .run(&format!(
            "{GREETING_MX}
        C: HELO client.example
        S: 250 mx.example
        C: MAIL FROM:<alice@example.org>
        S: 250 2.1.0 Ok"
        ));
}

#[test]
fn timeouts_follow_rfc_5321_4_5_3_2() {
    let mut shell = mx().shell();
    assert_eq!(shell.session.timeout(), Duration::from_secs(300));
    shell.feed(
        b"EHLO c\r\nMAIL FROM:<a@b.c>\r\nRCPT TO:<d@e.f>\r\nDATA\r\n",
        crate::shell::Split::Lines,
    );
    assert_eq!(shell.session.timeout(), Duration::from_secs(180));
    shell.output.clear();
    shell.session.timed_out();
    shell.drain();
    assert_eq!(
        String::from_utf8_lossy(&shell.output),
        "421 4.4.2 mx.example Error: timeout exceeded\r\n"
    );
    assert_eq!(shell.events.last(), Some(&Event::Close));
    // A second expiry does nothing.
    shell.session.timed_out();
    assert_eq!(shell.session.poll(), None);
}

#[test]
fn final_dot_timeout_while_the_shell_decides() {
    let mut session = mx().shell().session;
    session.feed(b"EHLO c\r\nMAIL FROM:<a@b.c>\r\n");
    while let Some(event) = session.poll() {
        if let Event::MailFrom { .. } = event {
            assert!(!session.wants_input(), "no reading while the shell decides");
            session.mail_result(Verdict::Accept);
        }
    }
    session.feed(b"RCPT TO:<d@e.f>\r\n");
    while let Some(event) = session.poll() {
        if let Event::RcptTo { .. } = event {
            session.rcpt_result(Verdict::Accept);
        }
    }
    session.feed(b"DATA\r\nx\r\n.\r\n");
    let mut saw_message = false;
    while let Some(event) = session.poll() {
        saw_message |= matches!(event, Event::Message { .. });
    }
    assert!(saw_message);
    // RFC 5321 4.5.3.2.6: the client waits 10 minutes for the reply to the final dot.
    assert_eq!(session.timeout(), Duration::from_secs(600));
    assert!(!session.wants_input());
}

#[test]
fn session_is_send() {
    // The shell moves sessions into tokio tasks.
    fn assert_send<T: Send + 'static>() {}
    assert_send::<smtp::Session>();
    assert_send::<Event>();
}

#[test]
fn a_shell_deciding_on_the_connection_greets_or_refuses_and_closes() {
    let mut test = mx().config(|config| config.decide_connect = true);
    test.answers
        .connect
        .push_back(reject(554, (5, 7, 1), "client listed in bl.example"));
    let shell = test.run(
        "S: 554 5.7.1 client listed in bl.example
        C: EHLO client.example",
    );
    assert_eq!(shell.events, vec![Event::Connect, Event::Close]);
    // Accepted: the ordinary greeting, after the decision.
    let shell = mx()
        .config(|config| config.decide_connect = true)
        .run(&format!(
            "{GREETING_MX}
            C: QUIT
            S: 221 2.0.0 mx.example closing connection"
        ));
    assert_eq!(shell.events, vec![Event::Connect, Event::Close]);
}

#[test]
fn a_shell_deciding_on_the_greeting_refuses_it_and_mail_waits_for_another() {
    let mut test = mx().config(|config| config.decide_hello = true);
    test.answers
        .hello
        .push_back(reject(550, (5, 7, 1), "go away"));
    let shell = test.run(&format!(
        "{GREETING_MX}
        C: EHLO spammer.example
        S: 550 5.7.1 go away
        C: MAIL FROM:<a@spammer.example>
        S: 503 5.5.1 Send EHLO/HELO first
        C: HELO client.example
        S: 250 mx.example"
    ));
    let names: Vec<_> = shell
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Hello { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["spammer.example", "client.example"]);
}
