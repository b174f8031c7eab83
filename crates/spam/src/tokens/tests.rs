use super::*;

fn has(tokens: &[u64], token: &str) -> bool {
    tokens.binary_search(&token_hash(token)).is_ok()
}

const PLAIN: &[u8] = b"From: \"Alice Martin\" <Alice@Example.COM>\r\n\
    To: pat@example.com\r\n\
    Reply-To: claims@freemail.example\r\n\
    Subject: Re: FREE Viagra!!! for $5\r\n\
    Message-ID: <1.2@mx.example.com>\r\n\
    X-Mailer: PHPMailer  5.2.1\r\n\
    Content-Type: text/plain; charset=UTF-8\r\n\r\n\
    Cheap v\xe2\x80\x8biagra at https://Shop.Pills.Example./buy?id=42, write to\r\n\
    sales@pills.example or call 555 0123 4567. Only $99! \
    Supercalifragilisticexpialidociouswordthatgoesonandon.\r\n";

#[test]
fn body_words_are_lowercased_and_folded() {
    let tokens = tokenize(PLAIN, &TokenLimits::default());
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "sorted and distinct"
    );
    for token in [
        "cheap",
        "viagra",
        "only",
        "proto:https",
        "url:shop.pills.example",
        "url:pills.example",
        "url-word:buy",
        "email:pills.example",
        "email-local:sales",
        "num:3",
        "num:4",
        "money:$",
        "skip:s 50",
    ] {
        assert!(has(&tokens, token), "{token}");
    }
    // Two-letter words and the pieces of links are not words of their own.
    for token in ["at", "or", "https", "shop", "42"] {
        assert!(!has(&tokens, token), "{token}");
    }
}

#[test]
fn header_tokens_carry_the_field_name() {
    let tokens = tokenize(PLAIN, &TokenLimits::default());
    for token in [
        "subject:free",
        "subject:viagra",
        "subject:!",
        "subject:$",
        "subject:reply",
        "subject:money:$",
        "from:addr:alice@example.com",
        "from:domain:example.com",
        "from:name:alice",
        "reply-to:domain:freemail.example",
        "reply-to:other-domain",
        "to:count:1",
        "x-mailer:phpmailer 5.2.1",
        "message-id:@mx.example.com",
        "date:none",
        "content-type:text/plain",
        "charset:utf-8",
        "parts:1",
    ] {
        assert!(has(&tokens, token), "{token}");
    }
    assert!(!has(&tokens, "html-only"));
}

#[test]
fn structure_tokens() {
    let message = b"From: a@b.example\r\nSubject: hi\r\n\
        Content-Type: multipart/mixed; boundary=x\r\n\r\n\
        --x\r\nContent-Type: text/html\r\n\r\n<p>Hello <font>there</font> <IMG src=\"cid:1\"></p>\r\n\
        --x\r\nContent-Type: application/zip; name=\"Invoice.ZIP\"\r\n\
        Content-Disposition: attachment; filename=\"Invoice.ZIP\"\r\n\
        Content-Transfer-Encoding: base64\r\n\r\nUEsDBA==\r\n--x--\r\n";
    let tokens = tokenize(message, &TokenLimits::default());
    for token in [
        "html-only",
        "html:font",
        "html:img",
        "content-type:multipart/mixed",
        "attachment:application/zip",
        "attachment:.zip",
        "content-transfer-encoding:base64",
        "parts:2-3",
        "x-mailer:none",
        "message-id:none",
        "hello",
        "there",
    ] {
        assert!(has(&tokens, token), "{token}");
    }
}

#[test]
fn the_hash_is_the_stored_format() {
    // SipHash-1-3 of "viagra" under TOKEN_KEY, written down once: a model in the directory
    // holds these numbers, so this must never change.
    assert_eq!(token_hash("viagra"), STORED_VIAGRA);
    // A token split in parts hashes as the whole string.
    assert_eq!(hash_parts(&["via", "gra"]), STORED_VIAGRA);
}

#[test]
fn limits_bound_tokens_and_text() {
    let mut message = b"Subject: s\r\n\r\n".to_vec();
    for i in 0..5000 {
        message.extend_from_slice(format!("word{i:05}x ").as_bytes());
    }
    let few = TokenLimits {
        text_bytes_max: 256 * 1024,
        tokens_max: 100,
    };
    assert_eq!(tokenize(&message, &few).len(), 100);
    let short = TokenLimits {
        text_bytes_max: 22,
        tokens_max: 2000,
    };
    let tokens = tokenize(&message, &short);
    assert!(has(&tokens, "word00000x") && has(&tokens, "word00001x"));
    assert!(!has(&tokens, "word00002x"), "past the text budget");
    assert!(TokenLimits::default().message_bytes_max() >= 256 * 1024);
}

#[test]
fn garbage_gives_few_tokens_and_no_panic() {
    assert!(tokenize(b"", &TokenLimits::default()).len() <= 10);
    tokenize(b"\xff\xfe\r\n\r\n\xff", &TokenLimits::default());
    tokenize(
        b"Subject: =?utf-8?B?////?=\r\n\r\n",
        &TokenLimits::default(),
    );
}

/// Every token of a small message, as strings: the tokenizer's output is a stored format (a
/// model holds these hashes), so a change to it must be deliberate and shows here.
#[test]
fn the_tokens_of_a_small_message_are_pinned() {
    let message = b"From: Bob <bob@example.org>\r\nTo: pat@example.com\r\n\
        Subject: Lunch today?\r\nDate: Mon, 3 Mar 2025 10:00:00 +0000\r\n\
        Message-ID: <a1@example.org>\r\n\r\n\
        Pizza at noon? https://menu.example.org/pizza\r\n";
    let expected = [
        "subject:lunch",
        "subject:today",
        "from:name:bob",
        "from:addr:bob@example.org",
        "from:domain:example.org",
        "reply-to:none",
        "to:count:1",
        "x-mailer:none",
        "message-id:@example.org",
        "content-type:none",
        "parts:1",
        "pizza",
        "noon",
        "proto:https",
        "url:menu.example.org",
        "url:example.org",
        "url-word:pizza",
    ];
    let mut hashes: Vec<u64> = expected.iter().map(|t| token_hash(t)).collect();
    hashes.sort_unstable();
    let tokens = tokenize(message, &TokenLimits::default());
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|t| !has(&tokens, t))
        .collect();
    assert!(missing.is_empty(), "missing {missing:?}");
    assert_eq!(tokens, hashes, "tokens beyond the expected ones");
}

/// `token_hash("viagra")` as the stored format has it.
const STORED_VIAGRA: u64 = 10_346_903_787_369_975_213;
