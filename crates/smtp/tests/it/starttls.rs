//! STARTTLS (RFC 3207), and the discarding of input sent with it (CVE-2011-0411).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use smtp::{Config, Event, Peer, Session};

use crate::shell::{GREETING_MX, mx};

fn tls_available() -> crate::shell::Test {
    mx().config(|config| config.tls_available = true)
}

#[test]
fn starttls_then_ehlo_again() {
    let shell = tls_available().run(&format!(
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
        S: 250 STARTTLS
        C: STARTTLS
        S: 220 2.0.0 Ready to start TLS
        # RFC 3207 4.2: EHLO is forgotten.
        C: MAIL FROM:<a@example.org>
        S: 503 5.5.1 Send EHLO/HELO first
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
        C: STARTTLS
        S: 503 5.5.1 TLS already active"
    ));
    assert!(shell.events.contains(&Event::StartTls));
}

#[test]
fn input_after_starttls_is_discarded() {
    // The client's plaintext "EHLO" and "MAIL" come in the same packet as STARTTLS; they
    // must not run inside the TLS session.
    let shell = tls_available().run(&format!(
        "{GREETING_MX}
        C: EHLO client.example
        C: STARTTLS
        C: EHLO evil.example
        C: MAIL FROM:<injected@example.org>
        S: 250-mx.example
        S: 250-PIPELINING
        S: 250-SIZE 52428800
        S: 250-8BITMIME
        S: 250-ENHANCEDSTATUSCODES
        S: 250-SMTPUTF8
        S: 250-CHUNKING
        S: 250-BINARYMIME
        S: 250 STARTTLS
        S: 220 2.0.0 Ready to start TLS
        C: MAIL FROM:<a@example.org>
        S: 503 5.5.1 Send EHLO/HELO first"
    ));
    assert!(
        !shell
            .events
            .iter()
            .any(|event| matches!(event, Event::MailFrom { .. }))
    );
}

#[test]
fn session_discards_what_arrives_before_tls_started() {
    let config = Config {
        tls_available: true,
        ..Config::default()
    };
    let peer = Peer {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        tls: false,
    };
    let mut session = Session::new(Arc::new(config), peer);
    session.feed(b"EHLO c\r\nSTARTTLS\r\nMAIL FROM:<x@y.z>\r\n");
    let mut events = Vec::new();
    while let Some(event) = session.poll() {
        events.push(event);
    }
    assert_eq!(events.last(), Some(&Event::StartTls));
    assert_eq!(session.buffered_len(), 0);
    assert!(!session.wants_input());
    session.feed(b"RCPT TO:<x@y.z>\r\n");
    assert_eq!(session.poll(), None);
    assert_eq!(session.buffered_len(), 0);
    session.tls_started();
    assert!(session.wants_input());
    session.feed(b"EHLO c\r\nMAIL FROM:<x@y.z>\r\n");
    let mut mail = false;
    while let Some(event) = session.poll() {
        mail |= matches!(event, Event::MailFrom { .. });
    }
    assert!(mail, "the session works normally inside TLS");
}

#[test]
fn starttls_refusals() {
    mx().run(&format!(
        "{GREETING_MX}
        C: STARTTLS
        S: 454 4.7.0 TLS not available"
    ));
    tls_available().run(&format!(
        "{GREETING_MX}
        C: STARTTLS now
        S: 501 5.5.4 Syntax: STARTTLS"
    ));
    tls_available().tls().run(&format!(
        "{GREETING_MX}
        C: STARTTLS
        S: 503 5.5.1 TLS already active"
    ));
}
