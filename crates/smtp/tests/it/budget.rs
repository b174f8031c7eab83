//! The shared budget for message bytes in memory (`Config::inflight`) and the deadlines a
//! session reports (`Session::deadlines`).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use limits::ByteBudget;
use smtp::{AuthResult, Config, Event, Mode, Peer, Reply, Session, Verdict};

use crate::shell::{EHLO_MX, GREETING_MX, mx};

/// `n` lines of 998 bytes of text, as transcript lines.
fn text_lines(n: usize) -> String {
    let line = "x".repeat(998);
    (0..n).map(|_| format!("C: {line}\n")).collect()
}

#[test]
fn data_past_the_budget_is_read_to_its_end_and_refused_with_452() {
    for run in 0..2 {
        // A fresh budget per transcript run: each run feeds the same bytes.
        let budget = ByteBudget::new(64 << 10);
        let shell = mx()
            .config(|config| config.inflight = Some(budget.clone()))
            .run(&format!(
                "{GREETING_MX}
            C: EHLO client.example
            {EHLO_MX}
            C: MAIL FROM:<a@example.org>
            S: 250 2.1.0 Ok
            C: RCPT TO:<b@example.net>
            S: 250 2.1.5 Ok
            C: DATA
            S: 354 End data with <CR><LF>.<CR><LF>
            {}
            C: .
            S: 452 4.3.1 Insufficient system storage, try again later
            C: MAIL FROM:<a@example.org>
            S: 250 2.1.0 Ok
            C: RCPT TO:<b@example.net>
            S: 250 2.1.5 Ok
            C: DATA
            S: 354 End data with <CR><LF>.<CR><LF>
            C: Subject: small
            C:
            C: fits
            C: .
            S: 250 2.0.0 Ok: queued",
                text_lines(100)
            ));
        assert_eq!(shell.messages().len(), 1, "run {run}: only the small one");
        assert_eq!(budget.reserved(), 0, "everything given back");
        assert!(budget.refusals() > 0);
    }
}

#[test]
fn a_bdat_chunk_past_the_budget_fails_the_transaction_after_that_chunk() {
    let budget = ByteBudget::new(64 << 10);
    let big = "y".repeat(70_000);
    let shell = mx()
        .config(|config| config.inflight = Some(budget.clone()))
        .run(&format!(
            "{GREETING_MX}
        C: EHLO client.example
        {EHLO_MX}
        C: MAIL FROM:<a@example.org>
        S: 250 2.1.0 Ok
        C: RCPT TO:<b@example.net>
        S: 250 2.1.5 Ok
        C~ BDAT 70000\\r\\n{big}
        S: 452 4.3.1 Insufficient system storage, try again later
        C~ BDAT 3 LAST\\r\\nabc
        S: 452 4.3.1 Insufficient system storage, try again later
        C: NOOP
        S: 250 2.0.0 Ok"
        ));
    assert!(shell.messages().is_empty());
    drop(shell);
    assert_eq!(budget.reserved(), 0);
}

fn session(config: Config) -> Session {
    Session::new(
        Arc::new(config),
        Peer {
            ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
            tls: true,
        },
    )
}

/// Polls every event, answering MAIL and RCPT with Accept; returns the replies as text and
/// whether the session closed. A `Message` is left unanswered (returned).
fn drain(session: &mut Session) -> (String, bool, Option<Vec<u8>>) {
    let mut text = String::new();
    let mut closed = false;
    let mut message = None;
    while let Some(event) = session.poll() {
        match event {
            Event::Reply(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
            Event::MailFrom { .. } => session.mail_result(Verdict::Accept),
            Event::RcptTo { .. } => session.rcpt_result(Verdict::Accept),
            Event::Auth { username, .. } => {
                session.auth_result(AuthResult::Success { user: username })
            }
            Event::Message { content, .. } => message = Some(content),
            Event::Close => closed = true,
            Event::StartTls => {}
            Event::Connect => session.connect_result(Verdict::Accept),
            Event::Hello { .. } => session.hello_result(Verdict::Accept),
        }
    }
    (text, closed, message)
}

#[test]
fn the_reservation_covers_a_message_until_the_shell_has_answered() {
    let budget = ByteBudget::new(1 << 20);
    let mut s = session(Config {
        inflight: Some(budget.clone()),
        ..Config::default()
    });
    s.feed(b"EHLO c\r\nMAIL FROM:<a@x.org>\r\nRCPT TO:<b@y.org>\r\nDATA\r\n");
    drain(&mut s);
    let line = [vec![b'z'; 998], b"\r\n".to_vec()].concat();
    for _ in 0..100 {
        s.feed(&line);
    }
    s.feed(b".\r\n");
    let (_, _, message) = drain(&mut s);
    assert_eq!(message.map(|m| m.len()), Some(100_000));
    assert!(budget.reserved() >= 100_000, "{}", budget.reserved());
    s.message_result(vec![Verdict::Accept]);
    let (text, ..) = drain(&mut s);
    assert!(text.starts_with("250 2.0.0"), "{text}");
    assert_eq!(budget.reserved(), 0);
}

#[test]
fn deadlines_name_the_login_the_command_line_and_the_transfer() {
    let config = Config {
        mode: Mode::Submission,
        command_deadline: Duration::from_secs(7),
        login_deadline: Duration::from_secs(11),
        transfer_deadline: Duration::from_secs(100),
        transfer_rate_min: 1000,
        transfer_deadline_max: Duration::from_secs(150),
        ..Config::default()
    };
    let mut s = session(config);
    drain(&mut s);
    let d = s.deadlines();
    assert_eq!(d.phase.map(|d| d.within), Some(Duration::from_secs(11)));
    assert_eq!((d.transfer, d.request), (None, None));

    // A partial line starts the command clock; more bytes of it keep the same step.
    s.feed(b"EHL");
    let first = s.deadlines().request.expect("a line is being received");
    assert_eq!(first.within, Duration::from_secs(7));
    s.feed(b"O c");
    assert_eq!(s.deadlines().request, Some(first));
    s.feed(b"\r\n");
    drain(&mut s);
    assert_eq!(s.deadlines().request, None, "nothing partial");
    s.feed(b"N");
    let second = s.deadlines().request.unwrap();
    assert_ne!(second.step, first.step, "a new line is a new step");
    s.feed(b"OOP\r\nAUTH PLAIN AGFAAHNlY3JldA==\r\n");
    drain(&mut s);
    assert_eq!(s.deadlines().phase, None, "logged in");

    s.feed(b"MAIL FROM:<a@x.org>\r\nRCPT TO:<b@y.org>\r\nDATA\r\n");
    drain(&mut s);
    let transfer = s.deadlines().transfer.expect("DATA is a transfer");
    assert_eq!(transfer.within, Duration::from_secs(100));
    let line = [vec![b'q'; 998], b"\r\n".to_vec()].concat();
    for _ in 0..20 {
        s.feed(&line);
    }
    let later = s.deadlines().transfer.unwrap();
    assert_eq!(later.step, transfer.step);
    assert_eq!(
        later.within,
        Duration::from_secs(120),
        "time earned at the minimum rate"
    );
    for _ in 0..1000 {
        s.feed(&line);
    }
    assert_eq!(
        s.deadlines().transfer.unwrap().within,
        Duration::from_secs(150)
    );
    s.feed(b".\r\n");
    drain(&mut s);
    assert_eq!(
        s.deadlines(),
        limits::Deadlines::default(),
        "waiting for the shell"
    );
    s.message_result(vec![Verdict::Accept]);
    drain(&mut s);

    // BDAT: the transfer's clock runs between chunks too, on one step.
    s.feed(b"MAIL FROM:<a@x.org>\r\nRCPT TO:<b@y.org>\r\nBDAT 3\r\nab");
    drain(&mut s);
    let chunk = s.deadlines().transfer.unwrap();
    assert_ne!(chunk.step, transfer.step);
    s.feed(b"c");
    drain(&mut s);
    assert_eq!(s.deadlines().transfer.map(|d| d.step), Some(chunk.step));
    s.deadline_passed();
    let (text, closed, _) = drain(&mut s);
    assert!(
        text.ends_with("421 4.4.2 localhost Error: too slow, closing\r\n"),
        "{text}"
    );
    assert!(closed);
    assert_eq!(s.deadlines(), limits::Deadlines::default());
}

#[test]
fn a_421_from_the_shell_closes_and_goodbyes_are_421s() {
    let mut s = session(Config::default());
    s.feed(b"EHLO c\r\nMAIL FROM:<a@x.org>\r\nRCPT TO:<b@y.org>\r\n");
    while let Some(event) = s.poll() {
        match event {
            Event::MailFrom { .. } => s.mail_result(Verdict::Accept),
            Event::RcptTo { .. } => s.rcpt_result(Verdict::Reject(Reply::new(
                421,
                (4, 7, 0),
                "too many unknown recipients",
            ))),
            Event::Close => {
                assert!(s.is_closed());
                break;
            }
            _ => {}
        }
    }
    assert!(s.is_closed(), "421 ends the session");

    let mut s = session(Config::default());
    drain(&mut s);
    s.shutting_down();
    let (text, closed, _) = drain(&mut s);
    assert_eq!(text, "421 4.3.2 localhost shutting down\r\n");
    assert!(closed);

    let mut s = session(Config::default());
    drain(&mut s);
    s.revoked();
    let (text, closed, _) = drain(&mut s);
    assert_eq!(text, "421 4.7.0 localhost account removed, closing\r\n");
    assert!(closed);
}

#[test]
fn every_refusal_is_kept_with_the_step_it_answered() {
    let mut s = session(Config::default());
    s.feed(b"EHLO c\r\nMAIL FROM:<a@x.org>\r\nRCPT TO:<b@y.org>\r\nXYZZY\r\n");
    while let Some(event) = s.poll() {
        match event {
            Event::MailFrom { .. } => s.mail_result(Verdict::Accept),
            Event::RcptTo { .. } => {
                s.rcpt_result(Verdict::Reject(Reply::new(550, (5, 1, 1), "no such user")))
            }
            _ => {}
        }
    }
    let refusals = s.take_refusals();
    let seen: Vec<(&str, u16)> = refusals
        .iter()
        .map(|r| (r.stage.name(), r.reply.code))
        .collect();
    assert_eq!(seen, [("rcpt", 550), ("command", 500)]);
    // The refused RCPT names its recipient and the transaction's sender.
    assert_eq!(refusals[0].from.as_deref(), Some("a@x.org"));
    assert_eq!(refusals[0].to.as_deref(), Some("b@y.org"));
    assert!(s.take_refusals().is_empty(), "taken once");
    // A message refused after its data: the data stage.
    s.feed(b"RCPT TO:<c@y.org>\r\nDATA\r\na\nb\r\n.\r\n");
    drain(&mut s);
    let refusals = s.take_refusals();
    assert_eq!(
        refusals.last().map(|r| (r.stage, r.reply.code)),
        Some((smtp::Stage::Data, 550))
    );
    assert_eq!(
        refusals.last().and_then(|r| r.to.as_deref()),
        Some("c@y.org")
    );
}
