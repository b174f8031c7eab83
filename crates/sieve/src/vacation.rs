//! RFC 3834 and RFC 5230 rules for vacation replies: pure functions over the message.
//! [`check`] says whether a reply may be sent at all; [`compose`] builds it. Whether one
//! was already sent to this sender within the period (RFC 5230 4.2) is the caller's
//! record, keyed by [`crate::Vacation::handle`] and the sender.

use crate::context::Envelope;
use crate::message::{Field, split_header};
use crate::outcome::Vacation;

/// Why no reply is sent, when none is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoReply {
    /// The null reverse path, or MAILER-DAEMON (RFC 3834 2, RFC 5230 4.5).
    NullSender,
    /// `Auto-Submitted` other than "no" (RFC 3834 2).
    AutoSubmitted,
    /// A list or bulk message: `Precedence` bulk/list/junk, `List-*` fields, or a sender
    /// like `owner-*` or `*-request` (RFC 3834 2, RFC 5230 4.5).
    ListOrBulk,
    /// The sender is one of the user's own addresses (RFC 5230 4.5).
    OwnAddress,
    /// None of the user's addresses is in To, Cc, Bcc or Resent-To/Cc/Bcc (RFC 5230 4.5).
    NotAddressedToUser,
    /// The sender asked for no out-of-office replies: `X-Auto-Response-Suppress` (a
    /// Microsoft header, [MS-OXCMAIL] 2.2.3.2.20, widely sent) lists `All` or `OOF`, as
    /// Pigeonhole honours it.
    SuppressedBySender,
}

fn fields_named<'a, 'n>(
    fields: &'a [Field],
    name: &'n str,
) -> impl Iterator<Item = &'a Field> + use<'a, 'n> {
    fields
        .iter()
        .filter(move |f| f.name.eq_ignore_ascii_case(name))
}

fn same_address(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Whether a vacation reply may be sent for `message` delivered with `envelope`.
/// `user_addresses` are the user's addresses besides `envelope.to` (the account's
/// aliases and the action's `:addresses`).
pub fn check(
    message: &[u8],
    envelope: &Envelope,
    user_addresses: &[String],
) -> Result<(), NoReply> {
    let sender = envelope.from.trim();
    if sender.is_empty() || sender == "<>" {
        return Err(NoReply::NullSender);
    }
    let local = sender
        .rsplit_once('@')
        .map_or(sender, |(l, _)| l)
        .to_ascii_lowercase();
    if local == "mailer-daemon" {
        return Err(NoReply::NullSender);
    }
    if local.starts_with("owner-") || local.ends_with("-request") {
        return Err(NoReply::ListOrBulk);
    }
    let mut ours: Vec<&str> = vec![envelope.to.as_str()];
    ours.extend(user_addresses.iter().map(String::as_str));
    ours.retain(|a| !a.trim().is_empty());
    if ours.iter().any(|a| same_address(a, sender)) {
        return Err(NoReply::OwnAddress);
    }
    let (fields, _) = split_header(message);
    for f in fields_named(&fields, "auto-submitted") {
        let v = f.decoded().to_ascii_lowercase();
        let token = v.split(';').next().unwrap_or("").trim();
        if token != "no" {
            return Err(NoReply::AutoSubmitted);
        }
    }
    for f in fields_named(&fields, "precedence") {
        let v = f.decoded().to_ascii_lowercase();
        if matches!(v.trim(), "bulk" | "list" | "junk") {
            return Err(NoReply::ListOrBulk);
        }
    }
    if fields.iter().any(|f| {
        let n = f.name.to_ascii_lowercase();
        matches!(
            n.as_str(),
            "list-id"
                | "list-help"
                | "list-unsubscribe"
                | "list-subscribe"
                | "list-post"
                | "list-owner"
                | "list-archive"
        )
    }) {
        return Err(NoReply::ListOrBulk);
    }
    for f in fields_named(&fields, "x-auto-response-suppress") {
        let v = f.decoded();
        if v.split(',').any(|t| {
            let t = t.trim();
            t.eq_ignore_ascii_case("all") || t.eq_ignore_ascii_case("oof")
        }) {
            return Err(NoReply::SuppressedBySender);
        }
    }
    if addressed_as(&fields, &ours).is_none() {
        return Err(NoReply::NotAddressedToUser);
    }
    Ok(())
}

/// The header fields naming the message's recipients (RFC 5230 4.5).
const RECIPIENT_FIELDS: [&str; 6] = ["to", "cc", "bcc", "resent-to", "resent-cc", "resent-bcc"];

/// The first of `ours` that a recipient field names: the fields taken in the order of
/// [`RECIPIENT_FIELDS`], and for each field kind `ours` in order.
fn addressed_as<'o>(fields: &[Field], ours: &[&'o str]) -> Option<&'o str> {
    for name in RECIPIENT_FIELDS {
        let listed: Vec<String> = fields_named(fields, name)
            .flat_map(|f| crate::address::parse_list(&f.raw))
            .collect();
        if let Some(o) = ours
            .iter()
            .find(|o| listed.iter().any(|a| same_address(o, a)))
        {
            return Some(o);
        }
    }
    None
}

/// The address a reply without `:from` is best sent from: the one of the user's addresses
/// (`envelope.to` first, then `user_addresses` in order, e.g. the action's `:addresses`)
/// that the message's To, Cc, Bcc or Resent-* fields name, as Pigeonhole picks it; None
/// when none is named (then the caller's default, the script owner's address, RFC 5230
/// 5.4).
pub fn reply_from(
    message: &[u8],
    envelope: &Envelope,
    user_addresses: &[String],
) -> Option<String> {
    let mut ours: Vec<&str> = vec![envelope.to.as_str()];
    ours.extend(user_addresses.iter().map(String::as_str));
    ours.retain(|a| !a.trim().is_empty());
    let (fields, _) = split_header(message);
    addressed_as(&fields, &ours).map(|a| a.trim().to_string())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            B64[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            B64[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// `text` as RFC 2047 "B" encoded-words in UTF-8, each at most 75 characters, split on
/// character boundaries, separated by folding white space.
pub(crate) fn encoded_words(text: &str) -> String {
    // 75 - len("=?utf-8?B??=") = 63 base64 characters: 45 bytes of text.
    let mut words = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + 45).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        words.push(format!(
            "=?utf-8?B?{}?=",
            base64(&text.as_bytes()[start..end])
        ));
        start = end;
    }
    words.join("\r\n ")
}

fn header_text(value: &str) -> String {
    let clean: String = value
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    if clean.is_ascii() {
        clean
    } else {
        encoded_words(&clean)
    }
}

/// Builds the reply (RFC 5230 4, RFC 3834 3 and 5): `from` is the user's address the
/// reply comes from unless `:from` says otherwise, `to` the envelope sender;
/// `date_rfc2822` and `message_id_unique@message_id_domain` are the caller's (this
/// module reads no clock).
pub fn compose(
    vacation: &Vacation,
    original: &[u8],
    from: &str,
    to: &str,
    message_id_domain: &str,
    date_rfc2822: &str,
    message_id_unique: &str,
) -> Vec<u8> {
    let (fields, _) = split_header(original);
    let first = |name: &str| fields_named(&fields, name).next();
    // RFC 5230 4.3: the default subject is "Auto:" and the original's.
    let subject = match &vacation.subject {
        Some(s) => s.clone(),
        None => match first("subject").map(|f| f.decoded().to_string()) {
            Some(s) if !s.is_empty() => format!("Auto: {s}"),
            _ => "Auto: (no subject)".to_string(),
        },
    };
    let from = vacation.from.as_deref().unwrap_or(from);
    let mut out = String::new();
    out.push_str(&format!("Date: {date_rfc2822}\r\n"));
    out.push_str(&format!("From: {}\r\n", header_text(from)));
    out.push_str(&format!(
        "To: <{}>\r\n",
        to.trim_matches(|c| c == '<' || c == '>')
    ));
    out.push_str(&format!("Subject: {}\r\n", header_text(&subject)));
    out.push_str(&format!(
        "Message-ID: <{message_id_unique}@{message_id_domain}>\r\n"
    ));
    // RFC 5230 4.6 / RFC 3834 3.1.5: In-Reply-To and References from the original.
    if let Some(id) = first("message-id")
        .map(Field::unfolded)
        .filter(|s| !s.is_empty())
    {
        out.push_str(&format!("In-Reply-To: {id}\r\n"));
        let refs = first("references")
            .map(Field::unfolded)
            .filter(|s| !s.is_empty());
        match refs {
            Some(r) => out.push_str(&format!("References: {r} {id}\r\n")),
            None => out.push_str(&format!("References: {id}\r\n")),
        }
    }
    // RFC 3834 5: the reply is auto-replied.
    out.push_str("Auto-Submitted: auto-replied (vacation)\r\n");
    out.push_str("MIME-Version: 1.0\r\n");
    let reason = normalize_newlines(&vacation.reason);
    if vacation.mime {
        // The reason is a MIME entity, its own header fields first.
        out.push_str(&reason);
        if !reason.ends_with("\r\n") {
            out.push_str("\r\n");
        }
    } else {
        out.push_str("Content-Type: text/plain; charset=utf-8\r\n");
        let cte = if reason.is_ascii() { "7bit" } else { "8bit" };
        out.push_str(&format!("Content-Transfer-Encoding: {cte}\r\n\r\n"));
        out.push_str(&reason);
        if !reason.ends_with("\r\n") {
            out.push_str("\r\n");
        }
    }
    out.into_bytes()
}

fn normalize_newlines(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut prev_cr = false;
    for c in s.chars() {
        if c == '\n' && !prev_cr {
            out.push('\r');
        }
        out.push(c);
        prev_cr = c == '\r';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(from: &str) -> Envelope {
        Envelope {
            from: from.into(),
            to: "me@example.org".into(),
            orig_to: None,
            auth: None,
        }
    }

    const PLAIN: &[u8] = b"From: you@example.net\r\nTo: Me <me@example.org>\r\nSubject: hi\r\nMessage-ID: <1@x>\r\n\r\nbody\r\n";

    // X-Auto-Response-Suppress ([MS-OXCMAIL] 2.2.3.2.20; outside RFC 3834/5230, honoured
    // as Pigeonhole does): `All` or `OOF` among its comma-separated values.
    #[test]
    fn auto_response_suppress() {
        let with = |v: &str| {
            let msg = String::from_utf8_lossy(PLAIN).replace(
                "Subject:",
                &format!("X-Auto-Response-Suppress: {v}\r\nSubject:"),
            );
            check(msg.as_bytes(), &env("you@example.net"), &[])
        };
        assert_eq!(with("All"), Err(NoReply::SuppressedBySender));
        assert_eq!(with("OOF"), Err(NoReply::SuppressedBySender));
        assert_eq!(with("DR, oof,\tRN"), Err(NoReply::SuppressedBySender));
        assert_eq!(with("DR, RN, NRN"), Ok(()));
        assert_eq!(with("AutoReply"), Ok(()));
    }

    // RFC 5230 5.4 (and Pigeonhole's choice among the user's addresses): the address the
    // message was sent to, when the envelope recipient is not in its header.
    #[test]
    fn reply_from_the_address_written() {
        let msg = b"From: a@example.org\r\nTo: tss@example.net\r\nCc: x@example.com\r\n\r\nhi\r\n";
        let mut e = env("a@example.org");
        e.to = "timo@example.net".into();
        assert_eq!(
            reply_from(msg, &e, &["tss@example.net".into()]).as_deref(),
            Some("tss@example.net")
        );
        assert_eq!(reply_from(msg, &e, &[]), None);
        e.to = "X@example.com".into();
        assert_eq!(
            reply_from(msg, &e, &["tss@example.net".into()]).as_deref(),
            Some("tss@example.net"),
            "To is looked at before Cc"
        );
    }

    // RFC 3834 2 and RFC 5230 4.5
    #[test]
    fn who_gets_a_reply() {
        assert_eq!(check(PLAIN, &env("you@example.net"), &[]), Ok(()));
        assert_eq!(check(PLAIN, &env(""), &[]), Err(NoReply::NullSender));
        assert_eq!(
            check(PLAIN, &env("MAILER-DAEMON@x"), &[]),
            Err(NoReply::NullSender)
        );
        assert_eq!(
            check(PLAIN, &env("owner-list@x"), &[]),
            Err(NoReply::ListOrBulk)
        );
        assert_eq!(
            check(PLAIN, &env("list-request@x"), &[]),
            Err(NoReply::ListOrBulk)
        );
        assert_eq!(
            check(PLAIN, &env("me@example.org"), &[]),
            Err(NoReply::OwnAddress)
        );
        assert_eq!(
            check(
                PLAIN,
                &env("alias@example.org"),
                &["alias@example.org".into()]
            ),
            Err(NoReply::OwnAddress)
        );
        let auto = b"Auto-Submitted: auto-generated\r\nTo: me@example.org\r\n\r\n";
        assert_eq!(check(auto, &env("a@b"), &[]), Err(NoReply::AutoSubmitted));
        let no = b"Auto-Submitted: no\r\nTo: me@example.org\r\n\r\n";
        assert_eq!(check(no, &env("a@b"), &[]), Ok(()));
        let bulk = b"Precedence: bulk\r\nTo: me@example.org\r\n\r\n";
        assert_eq!(check(bulk, &env("a@b"), &[]), Err(NoReply::ListOrBulk));
        let list = b"List-Id: <l.example>\r\nTo: me@example.org\r\n\r\n";
        assert_eq!(check(list, &env("a@b"), &[]), Err(NoReply::ListOrBulk));
        let other = b"To: someone@else.example\r\n\r\n";
        assert_eq!(
            check(other, &env("a@b"), &[]),
            Err(NoReply::NotAddressedToUser)
        );
        assert_eq!(
            check(other, &env("a@b"), &["someone@else.example".into()]),
            Ok(())
        );
        let bcc = b"To: x@y\r\nResent-Cc: ME@EXAMPLE.ORG\r\n\r\n";
        assert_eq!(check(bcc, &env("a@b"), &[]), Ok(()));
    }

    fn vac() -> Vacation {
        Vacation {
            period_seconds: 86400,
            subject: None,
            from: None,
            addresses: Vec::new(),
            mime: false,
            handle: "h".into(),
            reason: "I'm away.\nBack soon.".into(),
        }
    }

    // RFC 5230 4.3, 4.6; RFC 3834 5
    #[test]
    fn reply() {
        let r = compose(
            &vac(),
            PLAIN,
            "me@example.org",
            "you@example.net",
            "example.org",
            "Mon, 1 Jan 2024 00:00:00 +0000",
            "u1",
        );
        let r = String::from_utf8(r).unwrap();
        assert!(r.contains("Subject: Auto: hi\r\n"));
        assert!(r.contains("To: <you@example.net>\r\n"));
        assert!(r.contains("From: me@example.org\r\n"));
        assert!(r.contains("In-Reply-To: <1@x>\r\nReferences: <1@x>\r\n"));
        assert!(r.contains("Auto-Submitted: auto-replied"));
        assert!(r.contains("Message-ID: <u1@example.org>\r\n"));
        assert!(r.contains("Content-Type: text/plain; charset=utf-8\r\n"));
        assert!(r.ends_with("\r\n\r\nI'm away.\r\nBack soon.\r\n"));
    }

    #[test]
    fn reply_non_ascii_and_mime() {
        let mut v = vac();
        v.subject = Some("Abwesend bis März".into());
        v.from = Some("Me <me@example.org>".into());
        let r = String::from_utf8(compose(&v, b"\r\n", "x@y", "a@b", "d", "date", "u")).unwrap();
        assert!(r.contains("Subject: =?utf-8?B?"));
        assert!(r.contains("From: Me <me@example.org>\r\n"));
        assert!(!r.contains("In-Reply-To"));
        let decoded = crate::message::decode_value(
            &r.lines()
                .find(|l| l.starts_with("Subject:"))
                .unwrap()
                .as_bytes()[8..],
        );
        assert_eq!(decoded, "Abwesend bis März");
        let mut m = vac();
        m.mime = true;
        m.reason = "Content-Type: text/html\r\n\r\n<p>away</p>".into();
        let r = String::from_utf8(compose(&m, PLAIN, "x@y", "a@b", "d", "date", "u")).unwrap();
        assert!(r.contains("MIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\n<p>away</p>\r\n"));
        assert!(!r.contains("text/plain"));
    }

    #[test]
    fn base64_encoding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
