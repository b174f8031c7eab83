//! RFC 8601 5: our own Authentication-Results fields are removed from incoming mail, and
//! nothing else is.

use std::borrow::Cow;

use sender_auth::strip_our_authentication_results;

const HOST: &str = "mx.example.net";

fn strip(message: &str) -> String {
    String::from_utf8(strip_our_authentication_results(message.as_bytes(), HOST).into_owned())
        .expect("utf-8")
}

#[test]
fn removes_ours_folded_and_in_any_case() {
    let message = "Authentication-Results: mx.example.net;\r\n\tspf=pass smtp.mailfrom=a@b.c;\r\n\tdkim=pass header.d=b.c\r\n\
        Received: from x by y\r\n\
        authentication-results: MX.Example.NET. 1; none\r\n\
        AUTHENTICATION-RESULTS :(forged) \"mx.example.net\";\r\n spf=pass\r\n\
        Subject: hi\r\n\r\nbody\r\n";
    assert_eq!(
        strip(message),
        "Received: from x by y\r\nSubject: hi\r\n\r\nbody\r\n"
    );
}

#[test]
fn keeps_others_and_the_body() {
    let message = "Authentication-Results: mx.example.org; spf=pass\r\n\
        Authentication-Results: mx.example.net.evil.test; spf=pass\r\n\
        Authentication-Results: (comment) other.example.net;\r\n dkim=pass\r\n\
        X-Authentication-Results: mx.example.net; spf=pass\r\n\
        Subject: hi\r\n\
        \r\n\
        Authentication-Results: mx.example.net; spf=pass\r\n\
        \tdkim=pass\r\n";
    let stripped = strip_our_authentication_results(message.as_bytes(), HOST);
    assert!(matches!(stripped, Cow::Borrowed(_)));
    assert_eq!(&*stripped, message.as_bytes());
}

#[test]
fn handles_bare_line_feeds_a_missing_body_and_a_last_field() {
    assert_eq!(
        strip("A: 1\nAuthentication-Results: mx.example.net; none\n\tx\nB: 2\n\nbody"),
        "A: 1\nB: 2\n\nbody"
    );
    assert_eq!(
        strip("A: 1\r\nAuthentication-Results: mx.example.net; none"),
        "A: 1\r\n"
    );
    assert_eq!(
        strip("Authentication-Results: mx.example.net; none\r\n"),
        ""
    );
    assert_eq!(strip(""), "");
}
