//! Delivery status notifications (RFC 3464) for recipients that failed permanently.

use std::fmt::Write as _;

use queue::QueuedMessage;

/// Original header bytes quoted in a bounce at most (RFC 3464 2: the headers are enough to
/// identify the message, and the body may be large or sensitive).
const QUOTED_HEADER_BYTES_MAX: usize = 64 << 10;

/// An RFC 5322 date for `ms` since the epoch.
pub fn rfc5322_date(ms: u64) -> String {
    mail_parser::DateTime::from_timestamp((ms / 1000) as i64).to_rfc822()
}

/// A `multipart/report; report-type=delivery-status` message for the failed recipients of
/// `message` (its `pending` indexes, as `take_bounces` hands them out).
pub fn dsn(message: &QueuedMessage, hostname: &str, now_ms: u64) -> Vec<u8> {
    let boundary = format!("=_mailstow_{}_{}", message.id, now_ms);
    let date = rfc5322_date(now_ms);
    let mut out = String::new();
    // RFC 3464 2.1, RFC 3462 (multipart/report)
    let _ = write!(
        out,
        "From: Mail Delivery System <MAILER-DAEMON@{hostname}>\r\n\
         To: <{to}>\r\n\
         Subject: Undelivered Mail Returned to Sender\r\n\
         Date: {date}\r\n\
         Message-ID: <dsn.{id}.{now_ms}@{hostname}>\r\n\
         Auto-Submitted: auto-replied\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status;\r\n\
         \tboundary=\"{boundary}\"\r\n\
         \r\n\
         This is a MIME-encapsulated message.\r\n\
         \r\n\
         --{boundary}\r\n\
         Content-Type: text/plain; charset=us-ascii\r\n\
         \r\n\
         Your message could not be delivered to one or more recipients.\r\n\
         \r\n",
        to = message.envelope.sender,
        id = message.id,
    );
    for &r in &message.pending {
        if let Some(recipient) = message.envelope.recipients.get(r) {
            let _ = write!(
                out,
                "<{}>: {}\r\n",
                recipient.address,
                recipient.last_error.as_deref().unwrap_or("delivery failed")
            );
        }
    }
    // RFC 3464 2.2 per-message fields, 2.3 per-recipient fields.
    let arrival = rfc5322_date(message.envelope.arrival_ms);
    let _ = write!(
        out,
        "\r\n--{boundary}\r\n\
         Content-Type: message/delivery-status\r\n\
         \r\n\
         Reporting-MTA: dns; {hostname}\r\n\
         Arrival-Date: {arrival}\r\n"
    );
    for &r in &message.pending {
        if let Some(recipient) = message.envelope.recipients.get(r) {
            let diagnostic = recipient
                .last_error
                .as_deref()
                .unwrap_or("550 5.0.0 failed");
            let status = enhanced_status(diagnostic).unwrap_or("5.0.0");
            let _ = write!(
                out,
                "\r\nFinal-Recipient: rfc822; {}\r\n\
                 Action: failed\r\n\
                 Status: {status}\r\n\
                 Diagnostic-Code: smtp; {}\r\n",
                recipient.address,
                diagnostic.replace(['\r', '\n'], " ")
            );
        }
    }
    let headers = original_headers(&message.content);
    let _ = write!(
        out,
        "\r\n--{boundary}\r\n\
         Content-Type: text/rfc822-headers\r\n\
         \r\n"
    );
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(headers);
    if !headers.ends_with(b"\r\n") {
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    bytes
}

/// The header section of `content` (up to the blank line), capped.
fn original_headers(content: &[u8]) -> &[u8] {
    let end = content
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 2)
        .unwrap_or(content.len());
    &content[..end.min(QUOTED_HEADER_BYTES_MAX)]
}

/// The enhanced status code (RFC 3463) in an SMTP reply text such as "550 5.1.1 ...".
fn enhanced_status(reply: &str) -> Option<&str> {
    reply.split_whitespace().find(|word| {
        let parts: Vec<&str> = word.split('.').collect();
        parts.len() == 3
            && matches!(parts[0], "2" | "4" | "5")
            && parts[1..]
                .iter()
                .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use queue::{Envelope, Recipient, RecipientStatus};

    #[test]
    fn dsn_names_each_failed_recipient_with_its_status() {
        let message = QueuedMessage {
            id: 7,
            envelope: Envelope {
                sender: "alice@example.org".into(),
                recipients: vec![
                    Recipient {
                        address: "bob@example.com".into(),
                        status: RecipientStatus::Failed,
                        last_error: Some("550 5.1.1 no such user".into()),
                    },
                    Recipient {
                        address: "carol@example.com".into(),
                        status: RecipientStatus::Delivered,
                        last_error: None,
                    },
                ],
                arrival_ms: 1_700_000_000_000,
            },
            content: b"Subject: hi\r\nFrom: alice@example.org\r\n\r\nsecret body\r\n".to_vec(),
            attempts: 1,
            pending: vec![0],
            deferred: true,
        };
        let text = String::from_utf8(dsn(&message, "mx.example.org", 1_700_000_100_000)).unwrap();
        assert!(text.contains("To: <alice@example.org>"));
        assert!(text.contains("Final-Recipient: rfc822; bob@example.com"));
        assert!(text.contains("Status: 5.1.1"));
        assert!(!text.contains("carol@example.com"));
        assert!(text.contains("Subject: hi"));
        assert!(!text.contains("secret body"));
        let parsed = mail_parser::MessageParser::default()
            .parse(text.as_bytes())
            .unwrap();
        assert_eq!(parsed.parts.len(), 4, "root + three report parts");
    }

    #[test]
    fn enhanced_status_is_found_or_not() {
        assert_eq!(enhanced_status("550 5.1.1 no such user"), Some("5.1.1"));
        assert_eq!(enhanced_status("451 4.4.0 no route"), Some("4.4.0"));
        assert_eq!(enhanced_status("550 no code"), None);
    }
}
