//! The decoded text of a message's body, bounded: what the tokenizer reads for words and the
//! link finder for URLs.

use mail_parser::{Message, MessageParser, MessagePart, MimeHeaders, PartType};

use crate::html;

/// Nested messages (`message/rfc822` parts) whose text is read: a forwarded spam is read, a
/// matryoshka is not.
const NESTED_DEPTH_MAX: usize = 3;

/// The message parsed from at most `message_bytes_max` bytes of it: past the bound, parts are
/// not seen at all, so a 50 MB attachment costs no decoding. None when mail-parser finds no
/// header at all.
pub(crate) fn parse(message: &[u8], message_bytes_max: usize) -> Option<Message<'_>> {
    let prefix = &message[..message.len().min(message_bytes_max)];
    PARSER.parse(prefix)
}

/// Only the header fields the tokenizer reads are parsed into values (MIME, Date, Subject,
/// the addresses, Message-ID); the others are kept raw. Parsing every field (Received
/// above all) was a tenth of the tokenizer's time on ordinary mail.
static PARSER: std::sync::LazyLock<MessageParser> = std::sync::LazyLock::new(|| {
    MessageParser::new()
        .with_minimal_headers()
        .header_id(mail_parser::HeaderName::MessageId)
});

/// A message's body text.
#[derive(Debug, Default)]
pub(crate) struct Body {
    /// Each text part's text in order, transfer encoding and charset undone, HTML as
    /// [`html::text`] gives it; at most the budget's bytes in all (counted before HTML is
    /// stripped: what was looked at).
    pub(crate) texts: Vec<String>,
    /// The telling HTML tags of all HTML parts.
    pub(crate) html_tags: Vec<&'static str>,
}

/// The body text of `message`, at most `text_bytes_max` bytes of decoded parts.
pub(crate) fn body(message: &Message<'_>, text_bytes_max: usize) -> Body {
    let mut body = Body::default();
    let mut budget = text_bytes_max;
    collect(message, 0, &mut budget, &mut body);
    body
}

fn collect(message: &Message<'_>, depth: usize, budget: &mut usize, body: &mut Body) {
    for part in &message.parts {
        if *budget == 0 {
            return;
        }
        match &part.body {
            PartType::Text(text) if !is_attachment(part) => {
                body.texts.push(take(text, budget).to_string());
            }
            PartType::Html(text) if !is_attachment(part) => {
                let html = html::text(take(text, budget));
                for tag in html.tags {
                    if !body.html_tags.contains(&tag) {
                        body.html_tags.push(tag);
                    }
                }
                body.texts.push(html.text);
            }
            PartType::Message(nested) if depth < NESTED_DEPTH_MAX => {
                collect(nested, depth + 1, budget, body);
            }
            _ => {}
        }
    }
}

/// A prefix of `text` of at most `budget` bytes (whole characters), the budget reduced by it.
fn take<'a>(text: &'a str, budget: &mut usize) -> &'a str {
    let end = text.floor_char_boundary((*budget).min(text.len()));
    // A cut text ends the reading: nothing after it is looked at.
    *budget = if end < text.len() { 0 } else { *budget - end };
    &text[..end]
}

/// Whether a part is a file rather than something to read (RFC 2183: a disposition of
/// `attachment`, or a file name).
pub(crate) fn is_attachment(part: &MessagePart<'_>) -> bool {
    part.content_disposition()
        .is_some_and(|d| d.ctype().eq_ignore_ascii_case("attachment"))
        || part.attachment_name().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALTERNATIVE: &[u8] = b"From: a@example.com\r\n\
        Content-Type: multipart/alternative; boundary=b\r\n\r\n\
        --b\r\nContent-Type: text/plain; charset=utf-8\r\n\
        Content-Transfer-Encoding: quoted-printable\r\n\r\nCaf=C3=A9 time\r\n\
        --b\r\nContent-Type: text/html\r\n\r\n<p>Caf&#233; <img src=x></p>\r\n\
        --b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\n\
        not read\r\n--b--\r\n";

    #[test]
    fn text_and_html_parts_are_read_attachments_are_not() {
        let message = parse(ALTERNATIVE, usize::MAX).expect("parsed");
        let body = body(&message, 1000);
        let words: Vec<&str> = body
            .texts
            .iter()
            .flat_map(|t| t.split_whitespace())
            .collect();
        assert_eq!(words, ["Café", "time", "Café", "x"]);
        assert_eq!(body.html_tags, ["img"]);
    }

    #[test]
    fn the_budget_bounds_the_text() {
        let message = parse(ALTERNATIVE, usize::MAX).expect("parsed");
        let body = body(&message, 4);
        // "Café" is 5 bytes: the é does not fit whole.
        assert_eq!(body.texts, ["Caf"]);
    }
}
