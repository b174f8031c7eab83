//! A stored message as the reader sees it: the header fields, the text body, HTML bodies
//! made safe, and the attachments.
//!
//! HTML mail is untrusted markup. It is cleaned with ammonia (an allow-list of tags and
//! attributes: no script, no event handler, no style element, no form), every link gets
//! `rel="noopener noreferrer"` and opens elsewhere, and images keep a source only when it is
//! inline data: remote images are not fetched (they are how senders learn that and when a
//! message was read). The page's Content-Security-Policy (`lib.rs`) refuses scripts and
//! remote images again, should anything pass the cleaner.

use std::collections::HashSet;

use mail_parser::{Address, MessageParser, MimeHeaders, PartType};

/// One attachment of a message, by its index in mail-parser's part list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attachment {
    pub(crate) part: usize,
    pub(crate) name: String,
    pub(crate) content_type: String,
    pub(crate) size: usize,
}

/// What the message page shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rendered {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) cc: String,
    pub(crate) date: String,
    pub(crate) subject: String,
    /// The first text/plain body, as text (the template escapes it).
    pub(crate) text: Option<String>,
    /// The first HTML body when there is no text one, cleaned: markup the template may
    /// insert as it is.
    pub(crate) safe_html: Option<String>,
    /// Remote images were left out of `safe_html`.
    pub(crate) blocked_images: bool,
    pub(crate) attachments: Vec<Attachment>,
}

fn addresses(a: Option<&Address<'_>>) -> String {
    a.map(|a| {
        a.iter()
            .map(|x| match (x.name(), x.address()) {
                (Some(n), Some(ad)) => format!("{n} <{ad}>"),
                (None, Some(ad)) => ad.to_string(),
                (Some(n), None) => n.to_string(),
                (None, None) => String::new(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    })
    .unwrap_or_default()
}

/// Renders a stored message for reading.
pub(crate) fn render(raw: &[u8]) -> Rendered {
    let Some(message) = MessageParser::default().parse(raw) else {
        return Rendered {
            text: Some(String::from_utf8_lossy(raw).into_owned()),
            ..Rendered::default()
        };
    };
    let mut out = Rendered {
        from: addresses(message.from()),
        to: addresses(message.to()),
        cc: addresses(message.cc()),
        date: message.date().map(|d| d.to_rfc822()).unwrap_or_default(),
        subject: message.subject().unwrap_or("").to_string(),
        ..Rendered::default()
    };
    if let Some(text) = message
        .body_text(0)
        .filter(|_| !message.text_body.is_empty())
        && message
            .text_body
            .first()
            .and_then(|&i| message.parts.get(i as usize))
            .is_some_and(|p| matches!(p.body, PartType::Text(_)))
    {
        out.text = Some(text.into_owned());
    } else if let Some(html) = message.body_html(0) {
        let (clean, blocked) = clean_html(&html);
        out.safe_html = Some(clean);
        out.blocked_images = blocked;
    }
    for &index in &message.attachments {
        let Some(part) = message.parts.get(index as usize) else {
            continue;
        };
        let content_type = part
            .content_type()
            .map(|t| match t.subtype() {
                Some(sub) => format!("{}/{sub}", t.ctype()),
                None => t.ctype().to_string(),
            })
            .unwrap_or_else(|| "application/octet-stream".to_string());
        out.attachments.push(Attachment {
            part: index as usize,
            name: part
                .attachment_name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("part-{index}")),
            content_type,
            size: part.contents().len(),
        });
    }
    out
}

/// The decoded content of attachment `part` (an index from [`render`]) with its file name.
pub(crate) fn attachment(raw: &[u8], part: usize) -> Option<(String, Vec<u8>)> {
    let message = MessageParser::default().parse(raw)?;
    if !message.attachments.iter().any(|&i| i as usize == part) {
        return None;
    }
    let p = message.parts.get(part)?;
    let name = p
        .attachment_name()
        .map(str::to_string)
        .unwrap_or_else(|| format!("part-{part}"));
    Some((name, p.contents().to_vec()))
}

/// Cleans untrusted HTML; true when a remote image was dropped.
pub(crate) fn clean_html(html: &str) -> (String, bool) {
    let blocked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = blocked.clone();
    let clean = ammonia::Builder::default()
        .link_rel(Some("noopener noreferrer"))
        .set_tag_attribute_value("a", "target", "_blank")
        .url_schemes(HashSet::from(["http", "https", "mailto", "data"]))
        .attribute_filter(move |element, attribute, value| {
            if element == "img" && attribute == "src" && !value.starts_with("data:image/") {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
                return None;
            }
            if element == "a" && attribute == "href" && value.starts_with("data:") {
                return None;
            }
            Some(value.into())
        })
        .clean(html)
        .to_string();
    (clean, blocked.load(std::sync::atomic::Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_handlers_and_remote_images_are_gone() {
        let (clean, blocked) = clean_html(
            "<p onclick=\"steal()\">Hi<script>alert(1)</script>\
             <img src=\"https://tracker.example/p.gif\"><img src=\"data:image/png;base64,AA==\">\
             <a href=\"javascript:alert(2)\">x</a><a href=\"https://ok.example/\">y</a>\
             <style>body{}</style><iframe src=\"https://x\"></iframe></p>",
        );
        assert!(blocked);
        for bad in [
            "script",
            "onclick",
            "tracker",
            "javascript",
            "<style",
            "iframe",
        ] {
            assert!(!clean.contains(bad), "{bad} in {clean}");
        }
        assert!(clean.contains("data:image/png"), "{clean}");
        assert!(clean.contains("rel=\"noopener noreferrer\""), "{clean}");
        assert!(clean.contains("https://ok.example/"), "{clean}");
    }

    #[test]
    fn text_headers_and_attachments() {
        let raw = "From: Ann <ann@example.org>\r\nTo: bo@example.org\r\nSubject: Files\r\n\
                   Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
                   Content-Type: text/plain\r\n\r\nSee <attached>.\r\n--b\r\n\
                   Content-Type: application/pdf\r\n\
                   Content-Disposition: attachment; filename=\"a.pdf\"\r\n\
                   Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n";
        let r = render(raw.as_bytes());
        assert_eq!(r.from, "Ann <ann@example.org>");
        assert_eq!(r.subject, "Files");
        assert_eq!(
            r.text.as_deref().map(str::trim_end),
            Some("See <attached>.")
        );
        assert_eq!(r.attachments.len(), 1);
        let a = &r.attachments[0];
        assert_eq!(
            (a.name.as_str(), a.content_type.as_str()),
            ("a.pdf", "application/pdf")
        );
        let (name, bytes) = attachment(raw.as_bytes(), a.part).unwrap();
        assert_eq!(
            (name.as_str(), bytes.as_slice()),
            ("a.pdf", b"%PDF-1.4\n".as_slice())
        );
        assert!(
            attachment(raw.as_bytes(), 0).is_none(),
            "the message is no attachment"
        );
    }
}
