//! The Received header (RFC 5321 4.4).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use smtp::{Envelope, Peer, received_header};

fn envelope(recipients: &[&str], ip: IpAddr) -> Envelope {
    Envelope {
        helo: "client.example".to_string(),
        from: "a@example.org".to_string(),
        recipients: recipients.iter().map(|r| r.to_string()).collect(),
        authenticated: None,
        peer: Peer { ip, tls: true },
        tls: true,
        protocol: "ESMTPS",
        body_8bit: false,
        smtputf8: false,
        ret_full: None,
        envid: None,
        origin: None,
        epochs: Vec::new(),
    }
}

const DATE: &str = "Tue, 1 Jul 2025 10:00:00 +0000";

#[test]
fn one_recipient_has_a_for_clause() {
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(
        received_header(&envelope(&["b@example.net"], ip), "mx.example", "Q1", DATE),
        "Received: from client.example ([192.0.2.1])\r\n\
         \tby mx.example with ESMTPS id Q1\r\n\
         \tfor <b@example.net>;\r\n\
         \tTue, 1 Jul 2025 10:00:00 +0000\r\n"
    );
}

#[test]
fn several_recipients_are_not_disclosed() {
    let ip = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    assert_eq!(
        received_header(&envelope(&["b@x", "c@x"], ip), "mx.example", "Q1", DATE),
        "Received: from client.example ([IPv6:2001:db8::1])\r\n\
         \tby mx.example with ESMTPS id Q1;\r\n\
         \tTue, 1 Jul 2025 10:00:00 +0000\r\n"
    );
}

#[test]
fn client_values_cannot_break_the_header() {
    let ip = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped());
    let mut envelope = envelope(&["b\t<x>@example.net"], ip);
    envelope.helo = "evil (forged); by".to_string();
    let header = received_header(&envelope, "mx.example", "Q1", "date\r\nX-Injected: 1");
    assert_eq!(
        header,
        "Received: from evil__forged___by ([192.0.2.1])\r\n\
         \tby mx.example with ESMTPS id Q1\r\n\
         \tfor <b__x_@example.net>;\r\n\
         \tdate  X-Injected: 1\r\n"
    );
}
