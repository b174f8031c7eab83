//! The idle timeout, the deadlines, the shutdown and revocation: each a BYE, then Close.

use std::sync::Arc;
use std::time::Duration;

use managesieve::{AuthResult, Config, Event, Session};

use crate::harness::{GREETING, check, check_authenticated, plain};

#[test]
fn idle_timeout() {
    let session = Session::new(Arc::new(plain()), false);
    assert_eq!(session.timeout(), Duration::from_secs(30 * 60));
    check(
        plain(),
        false,
        &format!(
            r#"{GREETING}
            C| NOOP
            > timeout
            S: BYE "Disconnected for inactivity"
            E: Close
            > buffered
            = 0
            > timeout
            "#
        ),
    );
}

#[test]
fn deadline_shutdown_revocation() {
    check_authenticated(
        r#"
        C: LISTSCRIPTS
        E: ListScripts { user: "alice" }
        > deadline
        S: BYE "Too slow, closing"
        E: Close
        # The answer to the decision in flight is void.
        > list a
        "#,
    );
    check_authenticated(
        r#"
        > shutdown
        S: BYE (TRYLATER) "Server shutting down"
        E: Close
        > revoked
        "#,
    );
    check_authenticated(
        r#"
        > revoked
        S: BYE "Account removed"
        E: Close
        "#,
    );
    check_authenticated(
        r#"
        > moving
        S: BYE (TRYLATER) "Mailbox moving, reconnect"
        E: Close
        "#,
    );
}

fn drain(session: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| session.poll()).collect()
}

#[test]
fn deadlines_name_every_step() {
    let config = Config {
        login_deadline: Duration::from_secs(13),
        command_deadline: Duration::from_secs(5),
        literal_deadline: Duration::from_secs(7),
        literal_rate_min: 100,
        literal_deadline_max: Duration::from_secs(9),
        ..plain()
    };
    let mut session = Session::new(Arc::new(config), false);
    drain(&mut session);
    let d = session.deadlines();
    let login = d.phase.expect("the login deadline");
    assert_eq!(login.within, Duration::from_secs(13));
    assert_eq!((d.request, d.transfer), (None, None));

    // A partial line: the command deadline.
    session.feed(b"NOOP");
    let line = session.deadlines().request.expect("a command deadline");
    assert_eq!(line.within, Duration::from_secs(5));
    session.feed(b"\r\n");
    drain(&mut session);
    assert_eq!(session.deadlines().request, None);
    session.feed(b"NO");
    let next = session.deadlines().request.unwrap();
    assert_ne!(next.step, line.step, "each line is a new step");
    session.feed(b"OP\r\n");

    // A login: the login deadline is gone while authenticated.
    session.feed(b"AUTHENTICATE \"PLAIN\" \"AGFsaWNlAHNlY3JldA==\"\r\n");
    drain(&mut session);
    assert_eq!(
        session.deadlines().phase,
        Some(login),
        "still running while the shell checks"
    );
    session.authenticated(AuthResult::Success {
        user: "alice".to_owned(),
    });
    drain(&mut session);
    assert_eq!(session.deadlines().phase, None);

    // A literal: the literal deadline, growing with the bytes at the minimum rate.
    session.feed(b"PUTSCRIPT \"a\" {300+}\r\n");
    let d = session.deadlines();
    assert_eq!(d.request, None);
    let literal = d.transfer.expect("a literal deadline");
    assert_eq!(literal.within, Duration::from_secs(7));
    session.feed(&[b'#'; 200]);
    let grown = session.deadlines().transfer.unwrap();
    assert_eq!(
        (grown.step, grown.within),
        (literal.step, Duration::from_secs(9))
    );
    session.feed(&[b'#'; 100]);
    // After the literal, the rest of the command is a new line.
    let after = session.deadlines();
    assert_eq!(after.transfer, None);
    assert!(
        after
            .request
            .is_some_and(|d| d.step != line.step && d.step != next.step)
    );
    session.feed(b"\r\n");
    assert!(matches!(session.poll(), Some(Event::PutScript { .. })));
    // Nothing runs against the client while the shell owes the answer.
    session.feed(b"NO");
    assert_eq!(session.deadlines().request, None);
    session.script_put(Ok(None));
    drain(&mut session);
    assert!(session.deadlines().request.is_some());

    // UNAUTHENTICATE starts a new login deadline.
    session.feed(b"OP\r\nUNAUTHENTICATE\r\n");
    drain(&mut session);
    let again = session.deadlines().phase.expect("a new login deadline");
    assert_ne!(again.step, login.step);

    session.deadline_passed();
    assert_eq!(drain(&mut session).last(), Some(&Event::Close));
    assert_eq!(session.deadlines(), Default::default());
    assert!(!session.wants_input());
}
