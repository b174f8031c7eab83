//! The compact summary's two body-derived fields (issue 21, JMAP's Email properties, RFC 8621
//! 4.1.4): `preview`, a plain-text fragment of the first text body, and `hasAttachment`.
//! Computed from the part tree mail-parser builds for the structure, so a message is parsed
//! once at arrival, and from a bounded prefix of one part, so a large message costs no more
//! than a small one.

use mail_parser::decoders::charsets::map::charset_decoder;
use mail_parser::{Message, MessagePart, MimeHeaders, PartType};

use crate::binary::decode_binary;
use crate::envelope::encoding;
use crate::structure::Encoding;

/// RFC 8621 4.1.4: the preview "MUST NOT be more than 256 characters in length".
pub const PREVIEW_CHARS_MAX: usize = 256;
/// Encoded bytes of the chosen part read for the preview: enough for 256 characters after
/// quoted lines, markup and transfer encoding are gone, and a bound on the work.
const SOURCE_BYTES_MAX: usize = 16 * 1024;

/// What the summary keeps of a message's body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    /// At most [`PREVIEW_CHARS_MAX`] characters, white space collapsed, quoted lines (`>`)
    /// skipped; empty when the message has no text body.
    pub text: String,
    /// RFC 8621 4.1.4: a part a client should offer as downloadable: one not inline that is
    /// not the text body (a file, a non-text part, an attached message).
    pub has_attachment: bool,
}

/// The preview of a parsed message whose raw bytes are `data`.
pub(crate) fn of_message(message: &Message<'_>, data: &[u8]) -> Preview {
    let mut has_attachment = false;
    let mut plain: Option<&MessagePart<'_>> = None;
    let mut html: Option<&MessagePart<'_>> = None;
    for part in &message.parts {
        let inline = part
            .content_disposition()
            .is_some_and(|d| d.ctype().eq_ignore_ascii_case("inline"));
        let attachment = part
            .content_disposition()
            .is_some_and(|d| d.ctype().eq_ignore_ascii_case("attachment"))
            || part.attachment_name().is_some();
        match &part.body {
            PartType::Multipart(_) => {}
            PartType::Text(_) if !attachment => {
                plain.get_or_insert(part);
            }
            PartType::Html(_) if !attachment => {
                html.get_or_insert(part);
            }
            // Files, non-text parts and attached messages: downloadable unless inline.
            PartType::Text(_)
            | PartType::Html(_)
            | PartType::Binary(_)
            | PartType::InlineBinary(_)
            | PartType::Message(_) => has_attachment |= !inline,
        }
    }
    let text = match (plain, html) {
        (Some(part), _) => fragment(&decoded(part, data)),
        (None, Some(part)) => fragment(&html_text(&decoded(part, data))),
        (None, None) => String::new(),
    };
    Preview {
        text,
        has_attachment,
    }
}

/// The preview of content without a header mail-parser can find: the text itself.
pub(crate) fn of_text(content: &[u8]) -> Preview {
    let prefix = &content[..content.len().min(SOURCE_BYTES_MAX)];
    Preview {
        text: fragment(&String::from_utf8_lossy(prefix)),
        has_attachment: false,
    }
}

/// A prefix of a text part, transfer encoding undone and its charset made UTF-8.
fn decoded(part: &MessagePart<'_>, data: &[u8]) -> String {
    let start = (part.offset_body as usize).min(data.len());
    let end = (part.offset_end as usize).clamp(start, data.len());
    let mut raw = &data[start..end.min(start + SOURCE_BYTES_MAX)];
    let encoding = encoding(part, data);
    if encoding == Encoding::Base64 {
        // A cut quad decodes to nothing; keep whole lines only.
        if let Some(last) = raw.iter().rposition(|&b| b == b'\n') {
            raw = &raw[..=last];
        }
    }
    let bytes = decode_binary(encoding, raw).unwrap_or_else(|_| raw.to_vec());
    let charset = part
        .content_type()
        .and_then(|t| t.attribute("charset"))
        .and_then(|c| charset_decoder(c.as_bytes()));
    match charset {
        Some(decode) => decode(&bytes),
        None => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// The text of an HTML fragment, for a preview: tags out (a block's end is a space), the
/// contents of `head`, `script`, `style` and `title` out, the common entities and numeric
/// references decoded. Not a parser: good enough for 256 characters of a first line.
fn html_text(html: &str) -> String {
    const HIDDEN: [&str; 4] = ["head", "script", "style", "title"];
    let mut out = String::with_capacity(html.len().min(SOURCE_BYTES_MAX));
    let mut rest = html;
    let mut hidden: Option<&str> = None;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            let close = rest.find('>');
            let end = close.map_or(rest.len(), |e| e + 1);
            // `<` and `>` are one byte each: both ends are character boundaries (an
            // unclosed tag's text may end in any character).
            let tag = rest[1..close.unwrap_or(rest.len())].trim_start_matches('/');
            let name: String = tag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_ascii_lowercase();
            let closing = rest[1..].starts_with('/');
            match hidden {
                Some(h) if closing && name == h => hidden = None,
                Some(_) => {}
                None => {
                    if !closing && !tag.ends_with('/') {
                        hidden = HIDDEN.iter().copied().find(|h| *h == name);
                    }
                    out.push(' ');
                }
            }
            rest = &rest[end..];
            continue;
        }
        rest = &rest[c.len_utf8()..];
        if hidden.is_some() {
            continue;
        }
        if c == '&'
            // Looked for within the longest entity only: a text of `&` without `;` stays linear.
            && let Some(semi) = rest.bytes().take(11).position(|b| b == b';')
        {
            let entity = &rest[..semi];
            let decoded = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => entity
                    .strip_prefix("#x")
                    .or_else(|| entity.strip_prefix("#X"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            if let Some(d) = decoded {
                out.push(d);
                rest = &rest[semi + 1..];
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// White space collapsed to single spaces, quoted lines (`>`) and control characters left
/// out, cut at [`PREVIEW_CHARS_MAX`] characters.
fn fragment(text: &str) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for line in text.lines() {
        if line.trim_start().starts_with('>') {
            continue;
        }
        for c in line.chars().chain(std::iter::once(' ')) {
            if c.is_whitespace() || c.is_control() {
                space = !out.is_empty();
                continue;
            }
            let need = usize::from(space) + 1;
            if count + need > PREVIEW_CHARS_MAX {
                return out;
            }
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
            count += need;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Structure;

    fn preview(message: &str) -> Preview {
        Structure::parse_with_preview(message.replace('\n', "\r\n").as_bytes()).1
    }

    #[test]
    fn a_plain_message_gives_its_text_collapsed() {
        let p = preview("Subject: hi\n\nHello   there,\n\n  how are\tyou?\n");
        assert_eq!(p.text, "Hello there, how are you?");
        assert!(!p.has_attachment);
    }

    #[test]
    fn quoted_printable_and_a_charset_are_decoded_and_quotes_skipped() {
        let p = preview(
            "Content-Type: text/plain; charset=iso-8859-1\n\
             Content-Transfer-Encoding: quoted-printable\n\n\
             > earlier words\n\
             Gr=FC=DFe aus K=F6ln, sch=\n\
             =F6n.\n",
        );
        assert_eq!(p.text, "Grüße aus Köln, schön.");
    }

    #[test]
    fn an_attachment_is_marked_and_the_text_part_previewed() {
        let p = preview(
            "Content-Type: multipart/mixed; boundary=b\n\n\
             --b\n\
             Content-Type: text/plain\n\n\
             See the file.\n\
             --b\n\
             Content-Type: application/pdf\n\
             Content-Disposition: attachment; filename=a.pdf\n\
             Content-Transfer-Encoding: base64\n\n\
             JVBERi0xLjQK\n\
             --b--\n",
        );
        assert_eq!(p.text, "See the file.");
        assert!(p.has_attachment);
    }

    #[test]
    fn html_only_is_previewed_as_text_and_inline_images_are_no_attachment() {
        let p = preview(
            "Content-Type: multipart/related; boundary=b\n\n\
             --b\n\
             Content-Type: text/html; charset=utf-8\n\
             Content-Transfer-Encoding: base64\n\n\
             PHA+PGI+Qm9sZDwvYj4gJmFtcDsgbW9yZTwvcD4K\n\
             --b\n\
             Content-Type: image/png\n\
             Content-Disposition: inline\n\n\
             xx\n\
             --b--\n",
        );
        assert_eq!(p.text, "Bold & more");
        assert!(!p.has_attachment);
    }

    #[test]
    fn an_attached_message_is_an_attachment() {
        let p = preview(
            "Content-Type: multipart/mixed; boundary=b\n\n\
             --b\n\
             Content-Type: text/plain\n\n\
             Forwarded.\n\
             --b\n\
             Content-Type: message/rfc822\n\n\
             Subject: inner\n\n\
             inner body\n\
             --b--\n",
        );
        assert_eq!(p.text, "Forwarded.");
        assert!(p.has_attachment);
    }

    #[test]
    fn the_preview_is_at_most_256_characters_of_a_large_body() {
        let body = "wörd ".repeat(100_000);
        let p = preview(&format!("Subject: big\n\n{body}\n"));
        assert!(p.text.chars().count() <= PREVIEW_CHARS_MAX);
        assert!(p.text.chars().count() >= PREVIEW_CHARS_MAX - 5);
        assert!(p.text.starts_with("wörd wörd"));
        assert_eq!(preview("").text, "");
        assert_eq!(preview("\nno header at all").text, "no header at all");
    }

    #[test]
    fn an_unclosed_tag_ending_in_any_character_is_not_a_panic() {
        // Found by the spam crate's proptests on the same kind of code: an unclosed tag
        // whose text ends inside a multi-byte character.
        assert_eq!(html_text("hello <\u{e9}").trim(), "hello");
        assert_eq!(html_text("<\u{2039}\u{e9}").trim(), "");
        assert_eq!(html_text("<").trim(), "");
    }

    #[test]
    fn html_text_leaves_out_markup_and_hidden_elements() {
        assert_eq!(
            fragment(&html_text(
                "<html><head><title>T</title><style>p{x:1}</style></head><body>\
                 <p>One&nbsp;&lt;two&gt;</p><script>alert(1)</script><div>&#x263A; &#65;<br/>B\
                 </div>&unknown; 5 & 6</body></html>"
            )),
            "One <two> ☺ A B &unknown; 5 & 6"
        );
    }
}
