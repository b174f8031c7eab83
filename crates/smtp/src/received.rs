//! The Received trace header (RFC 5321 4.4, RFC 5322 3.6.7).

use std::net::IpAddr;

use crate::event::Envelope;

/// The Received header for `envelope`, folded at its clauses, ending in CRLF:
///
/// ```text
/// Received: from client.example ([192.0.2.1])
///         by mx.example with ESMTPS id 18c2f.4
///         for <user@example.org>; Tue, 1 Jul 2025 10:00:00 +0000
/// ```
///
/// The FOR clause appears only with exactly one recipient, so that a message to several does
/// not tell each of them the others (Bcc). Every value that came from the client is reduced to
/// characters that cannot break the header's syntax.
pub fn received_header(
    envelope: &Envelope,
    hostname: &str,
    queue_id: &str,
    date_rfc5322: &str,
) -> String {
    let helo = token(&envelope.helo);
    let helo = if helo.is_empty() { "unknown" } else { &helo };
    let mut header = format!(
        "Received: from {helo} ({})\r\n\tby {} with {} id {}",
        address_literal(envelope.peer.ip),
        token(hostname),
        envelope.protocol,
        token(queue_id),
    );
    if let [recipient] = envelope.recipients.as_slice() {
        header.push_str(&format!("\r\n\tfor <{}>", path(recipient)));
    }
    let date: String = date_rfc5322
        .chars()
        .map(|ch| if ch.is_control() { ' ' } else { ch })
        .collect();
    header.push_str(&format!(";\r\n\t{}\r\n", date.trim()));
    header
}

/// RFC 5321 4.1.3: `[192.0.2.1]` or `[IPv6:2001:db8::1]`.
fn address_literal(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => format!("[{v4}]"),
        IpAddr::V6(v6) => format!("[IPv6:{v6}]"),
    }
}

/// A domain, address literal or id: letters, digits and `.-_:[]`, anything else as `_`.
fn token(value: &str) -> String {
    value
        .chars()
        .map(|ch| {
            if ch.is_alphanumeric() || matches!(ch, '.' | '-' | '_' | ':' | '[' | ']') {
                ch
            } else {
                '_'
            }
        })
        .collect()
}

/// An address inside `<>`: no controls, spaces, angle brackets or backslashes.
fn path(value: &str) -> String {
    value
        .chars()
        .map(|ch| {
            if ch.is_control() || ch.is_whitespace() || matches!(ch, '<' | '>' | '\\') {
                '_'
            } else {
                ch
            }
        })
        .collect()
}
