//! The tokenizer: a message as the set of 64-bit hashes of its telling features, the
//! classifier's input (docs/spam.md 2, "Bayes").
//!
//! After SpamBayes' tokenizer (and mox's `junk` package): the body's words, lowercased, 3 to
//! 30 characters, with links, e-mail addresses, numbers and money folded into tokens of their
//! own; then tokens prefixed with a header's name for the fields that tell spam from ham
//! (`subject:word`, `from:domain:example.com`, `x-mailer:...`) and for the structure
//! (`content-type:text/html`, `attachment:application/zip`, `html-only`, `html:img`).
//!
//! **Stored format:** a token's hash is SipHash-1-3 of its UTF-8 string under the fixed keys
//! `TOKEN_KEY`: models in the directory hold these numbers, so a token's string, the keys and
//! this hash never change; a new feature is a new string.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use mail_parser::{Address, HeaderName, Message, MessagePart, MimeHeaders, PartType};

use crate::text::{self, is_attachment};
use crate::url::{self, Host};

/// What a message may cost the tokenizer (docs/spam.md 6, `tokenize_bytes_max` and
/// `tokens_per_message_max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenLimits {
    /// Bytes of decoded body text looked at (text and HTML parts, in order).
    pub text_bytes_max: usize,
    /// Distinct tokens returned: the first found (header tokens, then the body's in order).
    pub tokens_max: usize,
}

impl Default for TokenLimits {
    fn default() -> Self {
        TokenLimits {
            text_bytes_max: 256 * 1024,
            tokens_max: 2000,
        }
    }
}

/// Raw message bytes parsed per byte of text looked at: room for base64 (4/3), HTML markup
/// and the parts before the text, and a bound on the parse of a message of any size (with
/// the default, 2 MiB; SpamAssassin's spamc does not scan messages over 500 KB at all).
const MESSAGE_BYTES_PER_TEXT_BYTE: usize = 8;

impl TokenLimits {
    /// The raw bytes of a message parsed at all: past them, parts are not seen.
    pub fn message_bytes_max(&self) -> usize {
        self.text_bytes_max
            .saturating_mul(MESSAGE_BYTES_PER_TEXT_BYTE)
            .max(MESSAGE_BYTES_MIN)
    }
}

/// The raw bytes parsed even with a tiny text budget: the header section and structure.
const MESSAGE_BYTES_MIN: usize = 64 * 1024;
/// Bytes of one header field's value looked at: a 1 MB Subject costs what 1 KB does.
const FIELD_BYTES_MAX: usize = 1024;
/// Word lengths kept, in characters (SpamBayes: 3 to 12; longer words are telling in mail
/// with links and product names, so up to 30). Longer runs become a `skip:` token.
const WORD_CHARS_MIN: usize = 3;
const WORD_CHARS_MAX: usize = 30;

/// The sorted, deduplicated token hashes of `message`; never panics, whatever the bytes.
pub fn tokenize(message: &[u8], limits: &TokenLimits) -> Vec<u64> {
    let mut sink = Sink::new(limits.tokens_max);
    if let Some(parsed) = text::parse(message, limits.message_bytes_max()) {
        headers(&parsed, &mut sink);
        structure(&parsed, &mut sink);
        let body = text::body(&parsed, limits.text_bytes_max);
        for tag in &body.html_tags {
            sink.add("html:", tag);
        }
        for text in &body.texts {
            words(text, "", &mut sink);
        }
    }
    let mut hashes: Vec<u64> = sink.seen.into_iter().collect();
    hashes.sort_unstable();
    hashes
}

/// The hash of one token string (the stored format, above).
pub fn token_hash(token: &str) -> u64 {
    hash_parts(&[token])
}

fn hash_parts(parts: &[&str]) -> u64 {
    use std::hash::Hasher as _;
    // SipHash-1-3 with fixed keys: specified (the `siphasher` crate's output is stable across
    // versions, unlike std's `DefaultHasher`), and about five times cheaper than BLAKE3 on
    // tokens this short, which is most of the tokenizer's time on a large message.
    let mut hasher = siphasher::sip::SipHasher13::new_with_keys(TOKEN_KEY.0, TOKEN_KEY.1);
    for part in parts {
        hasher.write(part.as_bytes());
    }
    hasher.finish()
}

/// The keys of the token hash: part of the stored format (changing them makes every trained
/// model meaningless).
const TOKEN_KEY: (u64, u64) = (0x6d61_696c_7374_6f77, 0x7370_616d_2d74_6f6b);

/// The distinct tokens found so far, at most `tokens_max`.
struct Sink {
    seen: HashSet<u64, BuildHasherDefault<Identity>>,
    tokens_max: usize,
    /// A token value lowercased, reused.
    buffer: String,
    /// A body word being read, reused.
    word: String,
}

impl Sink {
    fn new(tokens_max: usize) -> Sink {
        Sink {
            seen: HashSet::with_capacity_and_hasher(tokens_max.min(4096), Default::default()),
            tokens_max,
            buffer: String::new(),
            word: String::new(),
        }
    }

    fn full(&self) -> bool {
        self.seen.len() >= self.tokens_max
    }

    /// Adds the token `prefix` + `value`.
    fn add(&mut self, prefix: &str, value: &str) {
        if !self.full() {
            self.seen.insert(hash_parts(&[prefix, value]));
        }
    }

    /// Adds the token `prefix` + `value` lowercased.
    fn add_lower(&mut self, prefix: &str, value: &str) {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        buffer.extend(value.chars().flat_map(char::to_lowercase));
        self.add(prefix, &buffer);
        self.buffer = buffer;
    }
}

/// The hasher of the set of hashes: they are BLAKE3 already.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Characters that hide inside words to split them for filters (`via\u{200b}gra`): skipped.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}' | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}' | '\u{34f}'
    )
}

/// The tokens of a text: each white-space separated chunk is a link, an e-mail address, an
/// amount of money or words.
fn words(text: &str, prefix: &str, sink: &mut Sink) {
    // ASCII text (most mail) splits faster on ASCII white space; the two agree but for a
    // vertical tab, which only `split_whitespace` treats as space.
    if text.is_ascii() && !text.as_bytes().contains(&0x0b) {
        for chunk in text.split_ascii_whitespace() {
            if !chunk_tokens(chunk, prefix, sink) {
                return;
            }
        }
    } else {
        for chunk in text.split_whitespace() {
            if !chunk_tokens(chunk, prefix, sink) {
                return;
            }
        }
    }
}

/// The tokens of one white-space separated chunk; false once the sink is full.
fn chunk_tokens(chunk: &str, prefix: &str, sink: &mut Sink) -> bool {
    if sink.full() {
        return false;
    }
    let links = url::urls(chunk);
    if !links.is_empty() {
        for link in links {
            url_tokens(&link, sink);
        }
        return true;
    }
    let chunk = chunk.strip_prefix("mailto:").unwrap_or(chunk);
    if chunk.as_bytes().contains(&b'@')
        && let Some((local, domain)) = email(chunk)
    {
        sink.add_lower("email:", domain);
        sink.add_lower("email-local:", local);
        return true;
    }
    if let Some(symbol) = money(chunk) {
        sink.add(&format!("{prefix}money:"), symbol);
    }
    plain_words(chunk, prefix, sink);
    true
}

/// Runs of letters and digits: words, lowercased; long ones as `skip:<first char> <length
/// in tens>` (SpamBayes), numbers as `num:<digits>`, so that order numbers, prices and
/// phone numbers do not each become a token.
fn plain_words(chunk: &str, prefix: &str, sink: &mut Sink) {
    let mut word = std::mem::take(&mut sink.word);
    if chunk.is_ascii() {
        // Most mail: the same words, byte by byte (no invisible characters in ASCII), each
        // lowercased into a buffer on the stack.
        let mut lower = [0u8; WORD_CHARS_MAX];
        let mut rest = chunk.as_bytes();
        while !rest.is_empty() {
            let start = rest
                .iter()
                .position(u8::is_ascii_alphanumeric)
                .unwrap_or(rest.len());
            rest = &rest[start..];
            let len = rest
                .iter()
                .position(|b| !b.is_ascii_alphanumeric())
                .unwrap_or(rest.len());
            let (run, after) = rest.split_at(len);
            rest = after;
            if len < WORD_CHARS_MIN {
                continue;
            }
            if len > WORD_CHARS_MAX || run.iter().all(u8::is_ascii_digit) {
                word.clear();
                word.extend(run.iter().map(|b| char::from(b.to_ascii_lowercase())));
                word_token(&word, len, prefix, sink);
                continue;
            }
            for (to, from) in lower.iter_mut().zip(run) {
                *to = from.to_ascii_lowercase();
            }
            // ASCII letters and digits: always UTF-8.
            if let Ok(text) = std::str::from_utf8(&lower[..len]) {
                sink.add(prefix, text);
            }
        }
        sink.word = word;
        return;
    }
    let mut chars = chunk.chars().filter(|c| !is_invisible(*c)).peekable();
    while chars.peek().is_some() {
        word.clear();
        let mut count = 0;
        for c in chars.by_ref() {
            if !c.is_alphanumeric() {
                break;
            }
            if c.is_ascii() {
                word.push(c.to_ascii_lowercase());
            } else {
                word.extend(c.to_lowercase());
            }
            count += 1;
        }
        if count < WORD_CHARS_MIN {
            continue;
        }
        word_token(&word, count, prefix, sink);
    }
    sink.word = word;
}

/// The token of one word of `count` characters, lowercased.
fn word_token(word: &str, count: usize, prefix: &str, sink: &mut Sink) {
    if word.bytes().all(|b| b.is_ascii_digit()) {
        sink.add(prefix, &format!("num:{count}"));
    } else if count > WORD_CHARS_MAX {
        let first = word.chars().next().unwrap_or('?');
        sink.add(prefix, &format!("skip:{first} {}", count / 10 * 10));
    } else {
        sink.add(prefix, word);
    }
}

/// A chunk that is an e-mail address (`local@domain.tld`, angle brackets and trailing
/// punctuation allowed around it): its local part and domain.
fn email(chunk: &str) -> Option<(&str, &str)> {
    let chunk = chunk
        .trim_start_matches(['<', '(', '[', '"', '\''])
        .trim_end_matches(['>', ')', ']', '"', '\'', '.', ',', ';', ':']);
    let (local, domain) = chunk.rsplit_once('@')?;
    let local_ok = !local.is_empty() && !local.contains('@');
    let domain_ok = matches!(url::host(domain), Some(Host::Name { .. }));
    (local_ok && domain_ok).then_some((local, domain))
}

/// The currency symbol of a chunk that is an amount (`$1,000`, `€50`, `£5`).
fn money(chunk: &str) -> Option<&'static str> {
    let mut chars = chunk.chars();
    let symbol = match chars.next()? {
        '$' => "$",
        '€' => "€",
        '£' => "£",
        _ => return None,
    };
    chars
        .next()
        .is_some_and(|c| c.is_ascii_digit())
        .then_some(symbol)
}

/// A link: its scheme, its host and the domains above it (`url:a.b.example`, `url:b.example`),
/// and the words of its path as `url-word:`.
fn url_tokens(link: &url::Url<'_>, sink: &mut Sink) {
    sink.add("proto:", if link.secure { "https" } else { "http" });
    match &link.host {
        Some(Host::Name { name, .. }) => {
            let mut domain = name.as_str();
            loop {
                sink.add("url:", domain);
                match domain.split_once('.') {
                    Some((_, parent)) if parent.contains('.') => domain = parent,
                    _ => break,
                }
            }
        }
        Some(Host::Ip) => sink.add("url:", "ip"),
        None => sink.add("url:", "invalid"),
    }
    plain_words(link.rest, "url-word:", sink);
}

/// At most [`FIELD_BYTES_MAX`] of a field's text.
fn bounded(text: &str) -> &str {
    &text[..text.floor_char_boundary(FIELD_BYTES_MAX)]
}

fn headers(message: &Message<'_>, sink: &mut Sink) {
    match message.subject().map(bounded) {
        Some(subject) if !subject.trim().is_empty() => subject_tokens(subject, sink),
        _ => sink.add("subject:", "none"),
    }
    let from_domain = address_tokens("from:", message.from(), sink);
    if let Some(reply_domain) = address_tokens("reply-to:", message.reply_to(), sink)
        && from_domain.as_deref() != Some(reply_domain.as_str())
    {
        sink.add("reply-to:", "other-domain");
    }
    let recipients =
        message.to().map_or(0, |a| a.iter().count()) + message.cc().map_or(0, |a| a.iter().count());
    let bucket = match recipients {
        0 => "0",
        1 => "1",
        2..=5 => "2-5",
        _ => "6+",
    };
    sink.add("to:count:", bucket);
    let mailer = message
        .header_raw("X-Mailer")
        .or_else(|| message.header_raw("User-Agent"));
    match mailer {
        Some(mailer) => {
            // The whole value is the token (SpamBayes): versions tell too. Collapsed white
            // space, and bounded: a mailer name is short.
            let collapsed: Vec<&str> = bounded(mailer).split_whitespace().take(6).collect();
            sink.add_lower("x-mailer:", &collapsed.join(" "));
        }
        None => sink.add("x-mailer:", "none"),
    }
    match message.message_id().map(bounded) {
        Some(id) => match id.rsplit_once('@') {
            Some((_, domain)) => sink.add_lower("message-id:@", domain),
            None => sink.add("message-id:", "invalid"),
        },
        None => sink.add("message-id:", "none"),
    }
    if message.date().is_none() {
        sink.add("date:", "none");
    }
    if let Some(list) = message.header_raw(HeaderName::ListId) {
        let list = bounded(list);
        let id = list
            .rsplit_once('<')
            .and_then(|(_, id)| id.split_once('>'))
            .map_or(list.trim(), |(id, _)| id);
        sink.add_lower("list-id:", id);
    }
    if message.header_raw(HeaderName::ListUnsubscribe).is_some() {
        sink.add("list-unsubscribe:", "yes");
    }
}

fn subject_tokens(subject: &str, sink: &mut Sink) {
    words(subject, "subject:", sink);
    let letters = subject.chars().filter(|c| c.is_alphabetic()).count();
    let upper = subject.chars().filter(|c| c.is_uppercase()).count();
    if letters >= 6 && upper * 10 >= letters * 6 {
        sink.add("subject:", "caps");
    }
    for mark in ["!", "$", "%"] {
        if subject.contains(mark) {
            sink.add("subject:", mark);
        }
    }
    let lower = subject.trim_start().to_ascii_lowercase();
    if lower.starts_with("re:") || lower.starts_with("aw:") || lower.starts_with("sv:") {
        sink.add("subject:", "reply");
    } else if lower.starts_with("fwd:") || lower.starts_with("fw:") {
        sink.add("subject:", "forward");
    }
}

/// The tokens of an address field: the first address, its domain, the words of its display
/// name. Returns the domain.
fn address_tokens(field: &str, address: Option<&Address<'_>>, sink: &mut Sink) -> Option<String> {
    let Some(first) = address.and_then(|a| a.first()) else {
        sink.add(field, "none");
        return None;
    };
    match first.name().map(bounded) {
        Some(name) if !name.trim().is_empty() => {
            words(name, &format!("{field}name:"), sink);
        }
        _ => sink.add(field, "no-name"),
    }
    let address = bounded(first.address()?).to_lowercase();
    sink.add(&format!("{field}addr:"), &address);
    let (_, domain) = address.rsplit_once('@')?;
    sink.add(&format!("{field}domain:"), domain);
    Some(domain.to_string())
}

/// Tokens of the MIME structure: each part's type, charset and transfer encoding,
/// attachments' types and file name extensions, and whether the text is HTML only.
fn structure(message: &Message<'_>, sink: &mut Sink) {
    let mut plain = false;
    let mut html = false;
    for part in &message.parts {
        part_tokens(part, sink);
        match &part.body {
            PartType::Text(_) if !is_attachment(part) => plain = true,
            PartType::Html(_) if !is_attachment(part) => html = true,
            _ => {}
        }
    }
    if html && !plain {
        sink.add("", "html-only");
    }
    let parts = match message.parts.len() {
        0 | 1 => "1",
        2..=3 => "2-3",
        4..=9 => "4-9",
        _ => "10+",
    };
    sink.add("parts:", parts);
}

fn part_tokens(part: &MessagePart<'_>, sink: &mut Sink) {
    let content_type = part.content_type().map(|t| match t.subtype() {
        Some(subtype) => format!("{}/{}", t.ctype(), subtype),
        None => t.ctype().to_string(),
    });
    let content_type = content_type.as_deref().map(bounded).unwrap_or("none");
    sink.add_lower("content-type:", content_type);
    if let Some(charset) = part.content_type().and_then(|t| t.attribute("charset")) {
        sink.add_lower("charset:", bounded(charset));
    }
    if let Some(encoding) = part.content_transfer_encoding() {
        sink.add_lower("content-transfer-encoding:", bounded(encoding));
    }
    if is_attachment(part) {
        sink.add_lower("attachment:", content_type);
        if let Some((_, extension)) = part.attachment_name().and_then(|n| n.rsplit_once('.'))
            && (1..=10).contains(&extension.len())
        {
            sink.add_lower("attachment:.", extension);
        }
    }
}

#[cfg(test)]
mod tests;
