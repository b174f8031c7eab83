//! The text of an HTML part, roughly, for the tokenizer and the link finder: not a parser, a
//! linear scan that is good enough for words and links and cannot be made to loop or blow up.

/// Tags whose presence is a token of its own (`html:img`): what SpamBayes found telling
/// (images, fonts, forms, scripts), and nothing that every HTML message has.
const TELLING_TAGS: [&str; 12] = [
    "img", "font", "table", "form", "input", "script", "iframe", "center", "map", "object",
    "embed", "base",
];
/// Elements whose content is not shown: skipped, so style sheets are not words.
const HIDDEN: [&str; 4] = ["head", "script", "style", "title"];
/// Attributes whose value is a link: written into the text as a word of its own, so that the
/// URL finder sees the links of anchors and images like those of plain text.
const LINK_ATTRIBUTES: [&str; 3] = ["href", "src", "action"];
/// The longest entity name looked for after `&` (`&thetasym;` is 8): a text of `&` without a
/// `;` stays linear.
const ENTITY_CHARS_MAX: usize = 10;

/// What the tokenizer takes from an HTML part.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Html {
    /// The visible text, tags replaced by a space, entities decoded, link attribute values
    /// inserted where their tag was.
    pub(crate) text: String,
    /// The [`TELLING_TAGS`] present, in the order first seen.
    pub(crate) tags: Vec<&'static str>,
}

/// The text and telling tags of `html`.
pub(crate) fn text(html: &str) -> Html {
    let mut out = Html {
        text: String::with_capacity(html.len()),
        tags: Vec::new(),
    };
    let mut rest = html;
    let mut hidden: Option<&str> = None;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            // An unclosed tag runs to the end of the text.
            let (tag, end) = match rest.find('>') {
                Some(close) => (&rest[1..close], close + 1),
                None => (&rest[1..], rest.len()),
            };
            let closing = tag.starts_with('/');
            let name = tag_name(tag.trim_start_matches('/'));
            match hidden {
                Some(h) if closing && name.eq_ignore_ascii_case(h) => hidden = None,
                Some(_) => {}
                None => {
                    if let Some(telling) =
                        TELLING_TAGS.iter().find(|t| t.eq_ignore_ascii_case(name))
                        && !out.tags.contains(telling)
                    {
                        out.tags.push(telling);
                    }
                    if !closing && !tag.ends_with('/') {
                        hidden = HIDDEN
                            .iter()
                            .copied()
                            .find(|h| h.eq_ignore_ascii_case(name));
                    }
                    out.text.push(' ');
                    links(tag, &mut out.text);
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
            && let Some((decoded, used)) = entity(rest)
        {
            out.text.extend(decoded);
            rest = &rest[used..];
            continue;
        }
        out.text.push(c);
    }
    out
}

fn tag_name(tag: &str) -> &str {
    let len = tag
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(tag.len());
    &tag[..len]
}

/// Appends the values of the link attributes of `tag` (the text between `<` and `>`), each
/// between spaces.
fn links(tag: &str, text: &mut String) {
    let lower = tag.to_ascii_lowercase();
    for attribute in LINK_ATTRIBUTES {
        let mut from = 0;
        while let Some(at) = lower[from..].find(attribute) {
            let after = from + at + attribute.len();
            from = after;
            let Some(value) = tag[after..].trim_start().strip_prefix('=') else {
                continue;
            };
            let value = value.trim_start();
            let value = match value.chars().next() {
                Some(quote @ ('"' | '\'')) => {
                    let inner = &value[1..];
                    &inner[..inner.find(quote).unwrap_or(inner.len())]
                }
                _ => &value[..value.find(char::is_whitespace).unwrap_or(value.len())],
            };
            text.push(' ');
            // Links are entity-encoded in attributes too (`?a=1&amp;b=2`).
            text.push_str(&value.replace("&amp;", "&"));
            text.push(' ');
        }
    }
}

/// The character of the entity or numeric reference at the start of `rest` (just after the
/// `&`), none for the invisible ones, and the bytes it used up to and including its `;`.
fn entity(rest: &str) -> Option<(Option<char>, usize)> {
    let semi = rest
        .bytes()
        .take(ENTITY_CHARS_MAX + 1)
        .position(|b| b == b';')?;
    let name = &rest[..semi];
    let decoded = match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" | "ensp" | "emsp" | "thinsp" => Some(' '),
        // Hidden inside a word to split it for filters (`via&shy;gra`): nothing.
        "shy" | "zwnj" | "zwj" => None,
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            Some(char::from_u32(code)?)
        }
    };
    Some((decoded, semi + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_go_entities_decode_links_stay() {
        let html = text(
            "<html><head><title>T</title><style>p {color: red}</style></head>\
             <body><p>Caf&eacute; &amp; b&#233;b&#xE9;</p><a HREF=\"http://x.example/a?b=1&amp;c\">here</a>\
             <img src=http://img.example/p.gif><br/></body></html>",
        );
        let words: Vec<&str> = html.text.split_whitespace().collect();
        assert_eq!(
            words,
            [
                "Caf&eacute;",
                "&",
                "bébé",
                "http://x.example/a?b=1&c",
                "here",
                "http://img.example/p.gif"
            ]
        );
        assert_eq!(html.tags, ["img"]);
    }

    #[test]
    fn unclosed_things_end() {
        assert_eq!(text("a <b").text.trim(), "a");
        assert_eq!(text("a <bé").text.trim(), "a");
        assert_eq!(text("<é").text.trim(), "");
        assert_eq!(text("&#").text, "&#");
        assert_eq!(
            text("a & b &#xFFFFFFFF; <").text.split_whitespace().count(),
            4
        );
        assert_eq!(text("<script>x").text.trim(), "");
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read(html in "(<|>|&|;|#|x|=|\"|'|/|a|é|\\PC){0,64}") {
            text(&html);
        }
    }
}
