//! Real-looking messages for the properties to mutate.

pub(crate) const SAMPLES: [&[u8]; 5] = [PLAIN, ALTERNATIVE, MIXED, SCORED, HTML];

const PLAIN: &[u8] = b"Received: from mx.example.net (mx.example.net [192.0.2.1])\r\n\
    \tby mx.example.com; Mon, 3 Mar 2025 10:00:00 +0000\r\n\
    From: \"Alice Martin\" <alice@example.com>\r\n\
    To: pat@example.com\r\n\
    Subject: =?utf-8?q?Caf=C3=A9_on_Monday?=\r\n\
    Date: Mon, 3 Mar 2025 10:00:00 +0000\r\n\
    Message-ID: <1@example.com>\r\n\
    Content-Type: text/plain; charset=utf-8\r\n\
    Content-Transfer-Encoding: quoted-printable\r\n\r\n\
    Shall we meet at the caf=C3=A9 at 10? See https://maps.example.org/cafe\r\n";

const ALTERNATIVE: &[u8] = b"From: Pills <sales@pills.example>\r\n\
    Reply-To: x@freemail.example\r\n\
    Subject: CHEAP V1AGRA!!!\r\n\
    X-Mailer: PHPMailer 5.2.1\r\n\
    MIME-Version: 1.0\r\n\
    Content-Type: multipart/alternative; boundary=\"b1\"\r\n\r\n\
    --b1\r\nContent-Type: text/plain\r\n\r\nBuy now at http://a.pills.example/x $99\r\n\
    --b1\r\nContent-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: base64\r\n\r\n\
    PGh0bWw+PGJvZHk+PGEgaHJlZj0iaHR0cDovL2EucGlsbHMuZXhhbXBsZS94Ij5CdXkmbmJzcDtu\r\n\
    b3c8L2E+PGltZyBzcmM9Imh0dHA6Ly9pbWcuZXhhbXBsZS9wLmdpZiI+PC9ib2R5PjwvaHRtbD4=\r\n\
    --b1--\r\n";

const MIXED: &[u8] = b"From: bob@example.com\r\n\
    Subject: Fwd: invoice\r\n\
    Content-Type: multipart/mixed; boundary=m\r\n\r\n\
    --m\r\nContent-Type: text/plain\r\n\r\nSee the attached and the forwarded one.\r\n\
    --m\r\nContent-Type: application/pdf; name=invoice.pdf\r\n\
    Content-Disposition: attachment; filename=invoice.pdf\r\n\
    Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n\
    --m\r\nContent-Type: message/rfc822\r\n\r\n\
    From: billing@hosting.example\r\nSubject: Your invoice\r\n\r\nPay {amount} by Friday.\r\n\
    --m--\r\n";

const SCORED: &[u8] = b"X-Spam-Status: Yes, score=7.5 required=5.0 tests=BAYES_99=6.0,\r\n\
    \tSPF_FAIL=1.5\r\n\
    X-Spam-Score: 7.5\r\n\
    X-Spam-Flag: YES\r\n\
    From: someone@example.net\r\n\
    Subject: hello\r\n\r\n\
    XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X\r\n";

const HTML: &[u8] = "From: Caf\u{e9} <news@caf\u{e9}.example>\r\n\
    Subject: Men\u{fc}\r\n\
    Content-Type: text/html; charset=utf-8\r\n\
    Content-Transfer-Encoding: 8bit\r\n\r\n\
    <html><head><title>\u{e9}</title></head><body><p>Caf\u{e9} &eacute; &#233; &#x1F600;</p>\
    <a href='http://x.example/\u{e9}'>\u{e9}</a><img src=\"https://b\u{fc}cher.example/\u{e9}.png\">\
    \u{200b}v\u{ad}i\u{200d}a</body></html>\r\n"
    .as_bytes();
