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
        b"STARTTLS\r\n",
        b"RSET\r\n",
        b"NOOP\r\n",
        b"QUIT\r\n",
        b"\r",
        b"\n",
        b"\0",
        b"\r\n",
    ];
    prop_oneof![
        6 => proptest::sample::select(words).prop_map(<[u8]>::to_vec),
        2 => proptest::collection::vec(any::<u8>(), 0..16),
        1 => (1usize..200).prop_map(|length| vec![b'a'; length]),
    ]
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
        let size = sizes.next().copied().unwrap_or(rest.len()).clamp(1, rest.len());
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

#[test]
fn coverage_probe_tmp() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..2000 {
        let input = input().new_tree(&mut runner).unwrap().current();
        let pattern: Vec<bool> = (0..20).map(|i| i % 3 != 0).collect();
        for mode in [Mode::Mx, Mode::Submission, Mode::Lmtp] {
            let mut test = Test::new(config(mode));
            test.answers = answers(&pattern);
            let (_, events) = run(&test, &input, &[7]);
            for event in events {
                let name = format!("{event:?}");
                let name = name.split([' ', '(', '{']).next().unwrap().to_string();
                *counts.entry(format!("{mode:?} {name}")).or_insert(0) += 1;
            }
        }
    }
    println!("{counts:#?}");
}
