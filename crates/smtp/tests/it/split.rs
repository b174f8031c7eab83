//! Properties over arbitrary input: no panic, bounded buffer, and the same output however the
//! input is split into `feed` calls.

use proptest::prelude::*;
use smtp::{AuthResult, Config, Event, Mode, Verdict};

use crate::shell::{Answers, Shell, Test, reject};

/// Pieces that reach deep states, mixed with random bytes.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    let words: Vec<&'static [u8]> = vec![
        b"EHLO c\r\n",
        b"HELO c\r\n",
        b"LHLO c\r\n",
        b"MAIL FROM:<a@b.c>\r\n",
        b"MAIL FROM:<> BODY=BINARYMIME SIZE=100\r\n",
        b"MAIL FROM:<a@b.c> BODY=8BITMIME SMTPUTF8 RET=FULL ENVID=x\r\n",
        b"RCPT TO:<d@e.f>\r\n",
        b"RCPT TO:<g@h.i> NOTIFY=SUCCESS ORCPT=rfc822;g@h.i\r\n",
        b"DATA\r\n",
        b".\r\n",
        b"\r\n.\r\n",
        b"..\r\n",
        b"\n.\n",
        b"BDAT 3\r\n",
        b"BDAT 0 LAST\r\n",
        b"BDAT 5 LAST\r\n",
        b"AUTH PLAIN\r\n",
        b"AUTH PLAIN AGEAYg==\r\n",
        b"AUTH LOGIN\r\n",
        b"YQ==\r\n",
        b"*\r\n",
        b"RSET\r\n",
        b"NOOP\r\n",
        b"\r",
        b"\n",
        b"\0",
        b"\r\n",
    ];
    let rare: Vec<&'static [u8]> = vec![b"STARTTLS\r\n", b"QUIT\r\n"];
    prop_oneof![
        8 => transaction(),
        6 => proptest::sample::select(words).prop_map(<[u8]>::to_vec),
        1 => proptest::sample::select(rare).prop_map(<[u8]>::to_vec),
        2 => proptest::collection::vec(any::<u8>(), 0..16),
        1 => (1usize..200).prop_map(|length| vec![b'a'; length]),
    ]
}

/// A mostly well-formed transaction: hello, maybe AUTH, MAIL, RCPTs, then DATA with lines
/// (some malformed) or BDAT chunks with correct counts.
fn transaction() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        4 => Just(b"text\r\n".to_vec()),
        1 => Just(b"..dot\r\n".to_vec()),
        1 => Just(b"bare\nlf\r\n".to_vec()),
        1 => Just(b"long line long line long line long line long line\r\n".to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ];
    let data = proptest::collection::vec(line, 0..6).prop_map(|lines| {
        let mut bytes = b"DATA\r\n".to_vec();
        bytes.extend(lines.concat());
        bytes.extend_from_slice(b".\r\n");
        bytes
    });
    let chunks = proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..30), 0..4)
        .prop_map(|chunks| {
            let mut bytes = Vec::new();
            let count = chunks.len();
            for (index, chunk) in chunks.into_iter().enumerate() {
                let last = if index + 1 == count { " LAST" } else { "" };
                bytes.extend(format!("BDAT {}{last}\r\n", chunk.len()).into_bytes());
                bytes.extend(chunk);
            }
            bytes
        });
    (
        proptest::sample::select(vec!["EHLO c\r\n", "LHLO c\r\n", ""]),
        any::<bool>(),
        0usize..4,
        prop_oneof![data, chunks],
    )
        .prop_map(|(hello, auth, recipients, body)| {
            let mut bytes = hello.as_bytes().to_vec();
            if auth {
                bytes.extend_from_slice(b"AUTH PLAIN AGEAYg==\r\n");
            }
            bytes.extend_from_slice(b"MAIL FROM:<a@b.c>\r\n");
            for index in 0..recipients {
                bytes.extend(format!("RCPT TO:<r{index}@e.f>\r\n").into_bytes());
            }
            bytes.extend(body);
            bytes
        })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(fragment(), 0..60).prop_map(|fragments| fragments.concat())
}

fn config(mode: Mode) -> Config {
    Config {
        hostname: "mx.example".to_string(),
        mode,
        command_line_max: 64,
        text_line_max: 40,
        message_bytes_max: 200,
        recipients_max: 3,
        errors_max: 25,
        commands_without_progress_max: 40,
        input_buffer_max: 128,
        tls_available: true,
        auth_without_tls: true,
        require_auth: true,
        ..Config::default()
    }
}

/// Deterministic answers: the same for every split, since decisions come in the same order.
fn answers(pattern: &[bool]) -> Answers {
    let mut answers = Answers::default();
    for (index, &accept) in pattern.iter().enumerate() {
        let verdict = if accept {
            Verdict::Accept
        } else {
            reject(550, (5, 7, 1), "no")
        };
        answers.mail.push_back(verdict.clone());
        answers.rcpt.push_back(verdict.clone());
        answers.message.push_back(vec![verdict; index % 3]);
        answers.auth.push_back(if accept {
            AuthResult::Success {
                user: "u".to_string(),
            }
        } else {
            AuthResult::Failed
        });
    }
    answers
}

fn run(test: &Test, input: &[u8], sizes: &[usize]) -> (Vec<u8>, Vec<Event>) {
    let mut shell: Shell = test.shell();
    let mut rest = input;
    let mut sizes = sizes.iter().cycle();
    // After STARTTLS the rest of the stream would be the TLS handshake: stop there (the
    // session's own discarding is tested in `starttls.rs`).
    while !rest.is_empty() && !shell.closed && !shell.events.contains(&Event::StartTls) {
        let size = sizes
            .next()
            .copied()
            .unwrap_or(rest.len())
            .clamp(1, rest.len());
        let (piece, tail) = rest.split_at(size);
        rest = tail;
        shell.feed(piece, crate::shell::Split::Lines);
    }
    (shell.output, shell.events)
}

proptest! {
    #[test]
    fn output_does_not_depend_on_the_split(
        input in input(),
        sizes in proptest::collection::vec(1usize..40, 1..20),
        pattern in proptest::collection::vec(any::<bool>(), 0..20),
        mode in proptest::sample::select(vec![Mode::Mx, Mode::Submission, Mode::Lmtp]),
        tls in any::<bool>(),
    ) {
        let mut test = Test::new(config(mode));
        test.peer.tls = tls;
        test.answers = answers(&pattern);
        let whole = run(&test, &input, &[input.len().max(1)]);
        let pieces = run(&test, &input, &sizes);
        let bytes = run(&test, &input, &[1]);
        prop_assert_eq!(&whole.0, &pieces.0);
        prop_assert_eq!(&whole.1, &pieces.1);
        prop_assert_eq!(&whole.0, &bytes.0);
        prop_assert_eq!(&whole.1, &bytes.1);
    }

    #[test]
    fn random_bytes_never_panic(
        input in proptest::collection::vec(any::<u8>(), 0..2000),
        sizes in proptest::collection::vec(1usize..300, 1..10),
        mode in proptest::sample::select(vec![Mode::Mx, Mode::Submission, Mode::Lmtp]),
    ) {
        let test = Test::new(config(mode));
        let whole = run(&test, &input, &[input.len().max(1)]);
        let pieces = run(&test, &input, &sizes);
        prop_assert_eq!(whole, pieces);
    }
}
