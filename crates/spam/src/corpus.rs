//! A synthetic labelled corpus, seeded: RFC 5322 messages that look like a mailbox's ham
//! (meetings, code review, family, invoices, wanted newsletters, from a circle of senders)
//! and an MX's spam (pharma, crypto, phishing, lottery, SEO, from random senders, HTML-only
//! with links to a few bad domains, or text), for tests and the quality example. Vocabulary
//! overlaps on purpose (invoices and phishing, newsletters and promotions, a crypto
//! newsletter the user reads), a share of each class is written like the other, and shared
//! filler words and random identifiers are noise, so that a classifier is good, not perfect.
//!
//! Deterministic for a seed: a SplitMix64 generator of its own, no `rand`.

use crate::model::Class;

mod words;

use words::*;

/// Sebastiano Vigna's SplitMix64: small, fast, and good enough for a corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// A random lowercase identifier of `len` letters and digits.
    fn id(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..len)
            .map(|_| char::from(ALPHABET[self.below(ALPHABET.len())]))
            .collect()
    }
}

/// `count` labelled messages, the same for the same `seed`; about 45% spam.
pub fn generate(seed: u64, count: usize) -> Vec<(Class, Vec<u8>)> {
    let mut rng = Rng(seed ^ 0x5eed_0fc0_4205);
    (0..count)
        .map(|n| {
            if rng.chance(45) {
                (Class::Spam, spam(&mut rng, n))
            } else {
                (Class::Ham, ham(&mut rng, n))
            }
        })
        .collect()
}

/// A message's body as it is sent.
enum Body {
    Text(String),
    Html(String),
    Alternative(String, String),
}

/// What a message is made of before it is written out.
struct Draft {
    from: String,
    reply_to: Option<String>,
    to: String,
    subject: String,
    message_id_domain: String,
    mailer: Option<&'static str>,
    list: Option<String>,
    body: Body,
    base64: bool,
}

fn ham(rng: &mut Rng, n: usize) -> Vec<u8> {
    let topic = rng.below(HAM_TOPICS.len());
    let (sender, subject, sentences) = match topic {
        0 => (rng.pick(COLLEAGUES), rng.pick(MEETING_SUBJECTS), MEETING),
        1 => (rng.pick(REVIEWERS), rng.pick(REVIEW_SUBJECTS), REVIEW),
        2 => (rng.pick(FAMILY), rng.pick(FAMILY_SUBJECTS), FAMILY_LINES),
        3 => (rng.pick(VENDORS), rng.pick(INVOICE_SUBJECTS), INVOICE),
        _ => (
            rng.pick(NEWSLETTERS),
            rng.pick(NEWSLETTER_SUBJECTS),
            NEWSLETTER,
        ),
    };
    // A share of ham reads like promotion: a shop the user buys from, a crypto newsletter.
    let promotional = rng.chance(6);
    let sentences = if promotional {
        PROMOTION_HAM
    } else {
        sentences
    };
    let sender = if promotional { rng.pick(SHOPS) } else { sender };
    // And a share comes from someone new: a stranger writing about one of the topics, from
    // a webmail address, often without a mailer name.
    let stranger = (!promotional && rng.chance(8)).then(|| {
        let name = rng.pick(FIRST_NAMES);
        let domain = rng.pick(FREEMAIL);
        format!("{name} <{}.{}@{domain}>", name.to_lowercase(), rng.id(3))
    });
    let sender = stranger.as_deref().unwrap_or(sender);
    let count = rng.range(3, 8);
    let mut text = paragraph(rng, sentences, count);
    if topic == 1 && rng.chance(60) {
        text.push_str(&format!(
            "\n\n> fn {}() {{\n>     todo\n> }}\n",
            rng.pick(FILLER)
        ));
    }
    if topic < 3 && !promotional && rng.chance(6) {
        // A spam forwarded by a colleague to ask whether it is real: ham in spam's words.
        let spam_sentences = [PHARMA, CRYPTO, PHISHING, LOTTERY, SEO][rng.below(5)];
        let count = rng.range(2, 5);
        let quoted = paragraph(rng, spam_sentences, count);
        let bad = rng.pick(BAD_DOMAINS);
        text = format!(
            "Is this real? Looks like phishing to me.\n\n\
             ---------- Forwarded message ----------\n{quoted}\nhttp://{}.{bad}/{}\n",
            rng.id(5),
            rng.id(8)
        );
    }
    if rng.chance(30) {
        text.push_str(&format!("\n\n{}\n", rng.pick(SIGNATURES)));
    }
    let domain = domain_of(sender);
    let newsletter = topic == 4 || promotional;
    let links = if newsletter || topic == 3 {
        (0..rng.range(1, 4))
            .map(|_| {
                format!(
                    "https://{}/{}/{}",
                    rng.pick(GOOD_LINK_DOMAINS),
                    rng.pick(FILLER),
                    rng.id(6)
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let body = if newsletter && rng.chance(70) {
        let html = html_of(rng, &text, &links);
        if rng.chance(75) {
            Body::Alternative(with_links(&text, &links), html)
        } else {
            Body::Html(html)
        }
    } else {
        Body::Text(with_links(&text, &links))
    };
    let reply = topic < 3 && rng.chance(35);
    let subject = fill(rng, subject);
    let draft = Draft {
        from: sender.to_string(),
        reply_to: None,
        to: "Pat Doe <pat@example.com>".to_string(),
        subject: if reply {
            format!("Re: {subject}")
        } else {
            subject
        },
        message_id_domain: domain.to_string(),
        mailer: match (promotional, stranger.is_some()) {
            // Shops send with bulk mailers too.
            (true, _) if rng.chance(40) => Some(rng.pick(SPAM_MAILERS)),
            (_, true) if rng.chance(50) => None,
            _ => Some(rng.pick(HAM_MAILERS)),
        },
        list: newsletter.then(|| format!("<{}.list.{domain}>", rng.pick(FILLER))),
        body,
        base64: rng.chance(5),
    };
    write(rng, n, draft)
}

fn spam(rng: &mut Rng, n: usize) -> Vec<u8> {
    let topic = rng.below(SPAM_TOPICS.len());
    let (subjects, sentences) = match topic {
        0 => (PHARMA_SUBJECTS, PHARMA),
        1 => (CRYPTO_SUBJECTS, CRYPTO),
        2 => (PHISHING_SUBJECTS, PHISHING),
        3 => (LOTTERY_SUBJECTS, LOTTERY),
        _ => (SEO_SUBJECTS, SEO),
    };
    // A share of spam is written like ham: a phishing message dressed as a meeting or an
    // invoice, in the words of those.
    let disguised = rng.chance(7);
    let sentences = if disguised {
        if rng.chance(50) { MEETING } else { INVOICE }
    } else {
        sentences
    };
    let count = rng.range(2, 7);
    let mut text = paragraph(rng, sentences, count);
    if rng.chance(40) {
        // Bayes poison: a run of ordinary words.
        let filler: Vec<&str> = (0..rng.range(5, 25)).map(|_| rng.pick(FILLER)).collect();
        text.push_str(&format!("\n\n{}\n", filler.join(" ")));
    }
    let bad = rng.pick(BAD_DOMAINS);
    let links: Vec<String> = (0..rng.range(1, 3))
        .map(|_| format!("http://{}.{bad}/{}", rng.id(5), rng.id(8)))
        .collect();
    let from_domain = if rng.chance(30) {
        rng.pick(FREEMAIL).to_string()
    } else {
        format!("{}{}.{}", rng.pick(FILLER), rng.id(3), rng.pick(SPAM_TLDS))
    };
    let from = format!(
        "\"{}\" <{}{}@{from_domain}>",
        rng.pick(SPAM_NAMES),
        rng.pick(FIRST_NAMES).to_lowercase(),
        rng.id(4),
    );
    let body = match rng.below(10) {
        0..=3 => Body::Html(html_of(rng, &text, &links)),
        4..=7 => Body::Text(with_links(&text, &links)),
        _ => Body::Alternative(with_links(&text, &links), html_of(rng, &text, &links)),
    };
    let subjects = match (disguised, rng.chance(50)) {
        (false, _) => subjects,
        (true, true) => MEETING_SUBJECTS,
        (true, false) => INVOICE_SUBJECTS,
    };
    let template = rng.pick(subjects);
    let subject = fill(rng, template);
    let draft = Draft {
        from,
        reply_to: (topic == 3 || rng.chance(15))
            .then(|| format!("claims{}@{}", rng.id(3), rng.pick(FREEMAIL))),
        to: if rng.chance(30) {
            "undisclosed-recipients:;".to_string()
        } else {
            "pat@example.com".to_string()
        },
        subject,
        message_id_domain: if rng.chance(50) {
            rng.id(8) + ".local"
        } else {
            from_domain
        },
        mailer: match rng.below(10) {
            0..=3 => Some(rng.pick(SPAM_MAILERS)),
            // Forged names of ordinary mailers.
            4..=5 => Some(rng.pick(HAM_MAILERS)),
            _ => None,
        },
        list: None,
        body,
        base64: rng.chance(15),
    };
    write(rng, n, draft)
}

/// `count` sentences of a topic, their slots filled, with shared filler words between.
fn paragraph(rng: &mut Rng, sentences: &[&str], count: usize) -> String {
    let mut out = String::new();
    for i in 0..count {
        if i > 0 {
            out.push(if rng.chance(30) { '\n' } else { ' ' });
        }
        let template = rng.pick(sentences);
        out.push_str(&fill(rng, template));
        if rng.chance(35) {
            let filler: Vec<&str> = (0..rng.range(1, 4)).map(|_| rng.pick(FILLER)).collect();
            out.push(' ');
            out.push_str(&filler.join(" "));
            out.push('.');
        }
    }
    out
}

/// A template with its slots filled: `{day}`, `{name}`, `{n}` (a number), `{id}` (a random
/// identifier), `{project}`, `{drug}`, `{coin}`, `{bank}`, `{amount}`.
fn fill(rng: &mut Rng, template: &str) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let slot = &rest[open + 1..open + close];
        let value = match slot {
            "day" => rng.pick(DAYS).to_string(),
            "name" => rng.pick(FIRST_NAMES).to_string(),
            "n" => rng.range(2, 999).to_string(),
            "id" => {
                let len = rng.range(6, 10);
                rng.id(len)
            }
            "project" => rng.pick(PROJECTS).to_string(),
            "drug" => rng.pick(DRUGS).to_string(),
            "coin" => rng.pick(COINS).to_string(),
            "bank" => rng.pick(BANKS).to_string(),
            "amount" => format!("${},{:03}", rng.range(1, 999), rng.below(1000)),
            other => other.to_string(),
        };
        out.push_str(&value);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn with_links(text: &str, links: &[String]) -> String {
    let mut out = text.to_string();
    for link in links {
        out.push_str("\n\n");
        out.push_str(link);
    }
    out.push('\n');
    out
}

fn html_of(rng: &mut Rng, text: &str, links: &[String]) -> String {
    let mut html = String::from("<html><head><style>p { margin: 0 }</style></head><body>");
    if rng.chance(30) {
        html.push_str("<table width=\"600\"><tr><td>");
    }
    for line in text.lines() {
        html.push_str("<p>");
        html.push_str(&line.replace('&', "&amp;").replace('<', "&lt;"));
        html.push_str("</p>\n");
    }
    for link in links {
        let label = rng.pick(&[
            "Click here",
            "Read more",
            "View online",
            "Claim now",
            "Open",
        ]);
        html.push_str(&format!("<p><a href=\"{link}\">{label}</a></p>\n"));
    }
    if rng.chance(40) {
        html.push_str(&format!(
            "<img src=\"https://{}/{}.png\" width=\"1\" height=\"1\">",
            links
                .first()
                .and_then(|l| l.split('/').nth(2))
                .unwrap_or("img.example"),
            rng.id(8)
        ));
    }
    html.push_str("</body></html>\n");
    html
}

fn domain_of(address: &str) -> &str {
    address
        .rsplit_once('@')
        .map_or("example.com", |(_, d)| d.trim_end_matches('>'))
}

/// The message as bytes: the header section, then the body as a single part or
/// multipart/alternative.
fn write(rng: &mut Rng, n: usize, draft: Draft) -> Vec<u8> {
    let mut out = String::with_capacity(2048);
    let minute = rng.below(60);
    let hour = rng.below(24);
    out.push_str(&format!(
        "Return-Path: <bounce@{}>\r\nReceived: from mx.{} ([192.0.2.{}])\r\n\tby mx.example.com; \
         {}, {} Mar 2025 {hour:02}:{minute:02}:00 +0000\r\n",
        draft.message_id_domain,
        draft.message_id_domain,
        rng.range(1, 254),
        rng.pick(DAYS),
        rng.range(1, 28),
    ));
    out.push_str(&format!("From: {}\r\nTo: {}\r\n", draft.from, draft.to));
    if let Some(reply_to) = &draft.reply_to {
        out.push_str(&format!("Reply-To: {reply_to}\r\n"));
    }
    out.push_str(&format!(
        "Subject: {}\r\nDate: Mon, {} Mar 2025 {hour:02}:{minute:02}:00 +0000\r\n\
         Message-ID: <{n}.{}@{}>\r\nMIME-Version: 1.0\r\n",
        draft.subject,
        rng.range(1, 28),
        rng.id(10),
        draft.message_id_domain,
    ));
    if let Some(mailer) = draft.mailer {
        out.push_str(&format!("X-Mailer: {mailer}\r\n"));
    }
    if let Some(list) = &draft.list {
        out.push_str(&format!(
            "List-Id: {list}\r\nList-Unsubscribe: <https://lists.example.org/u/{}>\r\n",
            rng.id(12)
        ));
    }
    let part = |kind: &str, text: &str, base64: bool| {
        if base64 {
            format!(
                "Content-Type: text/{kind}; charset=utf-8\r\nContent-Transfer-Encoding: \
                 base64\r\n\r\n{}",
                base64_lines(text.as_bytes())
            )
        } else {
            format!(
                "Content-Type: text/{kind}; charset=utf-8\r\nContent-Transfer-Encoding: \
                 8bit\r\n\r\n{}",
                text.replace('\n', "\r\n")
            )
        }
    };
    match &draft.body {
        Body::Text(text) => out.push_str(&part("plain", text, draft.base64)),
        Body::Html(html) => out.push_str(&part("html", html, draft.base64)),
        Body::Alternative(text, html) => {
            let boundary = format!("b{}", rng.id(12));
            out.push_str(&format!(
                "Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n\
                 --{boundary}\r\n{}\r\n--{boundary}\r\n{}\r\n--{boundary}--\r\n",
                part("plain", text, false),
                part("html", html, draft.base64)
            ));
        }
    }
    out.into_bytes()
}

/// RFC 2045 6.8 base64, in lines of 76 characters.
fn base64_lines(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = String::with_capacity(bytes.len() * 4 / 3 + 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                encoded.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                encoded.push('=');
            }
        }
    }
    let mut out = String::with_capacity(encoded.len() + encoded.len() / 38);
    for line in encoded.as_bytes().chunks(76) {
        out.push_str(std::str::from_utf8(line).unwrap_or(""));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_corpus() {
        assert_eq!(generate(7, 50), generate(7, 50));
        assert_ne!(generate(7, 50), generate(8, 50));
    }

    #[test]
    fn messages_parse_and_both_classes_come() {
        let corpus = generate(1, 400);
        let spam = corpus.iter().filter(|(c, _)| *c == Class::Spam).count();
        assert!((120..=240).contains(&spam), "{spam} spam of 400");
        for (_, message) in &corpus {
            let parsed = mail_parser::MessageParser::default()
                .parse(message)
                .expect("a message");
            assert!(parsed.subject().is_some());
            assert!(parsed.from().is_some());
            assert!(parsed.text_body_count() + parsed.html_body_count() > 0);
        }
    }

    #[test]
    fn base64_is_rfc_2045() {
        assert_eq!(base64_lines(b"Man"), "TWFu\r\n");
        assert_eq!(base64_lines(b"Ma"), "TWE=\r\n");
        assert_eq!(base64_lines(b"M"), "TQ==\r\n");
    }
}
