//! Properties over arbitrary input: no panics, bounded buffers, well-formed output that does
//! not depend on how the input was split.

use std::sync::Arc;

use pop3::{AuthResult, Config, Event, Maildrop, Session};
use proptest::prelude::*;

/// Pieces of input: commands in every state, SASL responses, junk, and raw bytes.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    const COMMANDS: &[&str] = &[
        "USER alice\r\n",
        "user bob\r\n",
        "PASS secret\r\n",
        "PASS wrong\r\n",
        "PASS busy\r\n",
        "PASS flaky\r\n",
        "AUTH\r\n",
        "AUTH PLAIN\r\n",
        "AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n",
        "AGFsaWNlAHNlY3JldA==\r\n",
        "*\r\n",
        "STAT\r\n",
        "LIST\r\n",
        "LIST 2\r\n",
        "UIDL\r\n",
        "UIDL 9\r\n",
        "RETR 1\r\n",
        "RETR 2\r\n",
        "TOP 2 1\r\n",
        "TOP 1 0\r\n",
        "DELE 1\r\n",
        "DELE 2\r\n",
        "RSET\r\n",
        "NOOP\r\n",
        "CAPA\r\n",
        "STLS\r\n",
        "QUIT\r\n",
        "\r\n",
        "\n",
        "\r",
        " ",
        "LIST  1\r\n",
    ];
    prop_oneof![
        6 => proptest::sample::select(COMMANDS).prop_map(|command| command.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => (1usize..300).prop_map(|length| vec![b'x'; length]),
    ]
}

/// Half the inputs start with a good login, so TRANSACTION and UPDATE get explored too.
fn input() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), proptest::collection::vec(piece(), 0..40)).prop_map(|(login, pieces)| {
        let prefix: &[u8] = if login {
            b"USER alice\r\nPASS secret\r\n"
        } else {
            b""
        };
        [prefix.to_vec(), pieces.concat()].concat()
    })
}

const MESSAGE: &[u8] = b"From: a\r\nSubject: s\r\n\r\n.one\r\ntwo\n..\r\nthree";

/// The shell's decisions, all made at once and deterministically.
fn answer(session: &mut Session, event: &Event) {
    match event {
        Event::Auth { password, .. } => session.auth_result(match password.as_str() {
            "secret" => AuthResult::Success {
                maildrop: Maildrop {
                    uidvalidity: 7,
                    messages: vec![(3, 120), (5, 200)],
                },
            },
            "busy" => AuthResult::InUse,
            "flaky" => AuthResult::Temporary("try\r\nlater".to_owned()),
            _ => AuthResult::BadCredentials,
        }),
        Event::Retrieve { uid: 5, .. } => session.retrieve_result(Err("gone".to_owned())),
        Event::Retrieve { .. } => session.retrieve_result(Ok(MESSAGE.to_vec())),
        Event::Update { .. } => session.update_result(Ok(())),
        Event::StartTls => session.tls_started(),
        Event::Reply(_) | Event::Close => {}
    }
}

/// What a well-behaved shell sees: it feeds the chunks in order, only while the session wants
/// input, and answers every decision as soon as it is polled.
fn run(config: &Arc<Config>, chunks: &[&[u8]]) -> (Vec<u8>, Vec<Event>) {
    let bound = config.input_buffer_max + config.line_max;
    let mut session = Session::new(config.clone(), false);
    let mut output = Vec::new();
    let mut events = Vec::new();
    let mut chunks = chunks.iter();
    loop {
        while let Some(event) = session.poll() {
            answer(&mut session, &event);
            match event {
                Event::Reply(bytes) => output.extend(bytes),
                other => events.push(other),
            }
            assert!(session.buffered_len() <= bound);
        }
        if !session.wants_input() {
            assert!(
                session.is_closed(),
                "stalled without a decision outstanding"
            );
            break;
        }
        let Some(chunk) = chunks.next() else { break };
        session.feed(chunk);
        assert!(session.buffered_len() <= bound);
    }
    (output, events)
}

fn split<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut % (input.len() + 1)).collect();
    points.push(0);
    points.push(input.len());
    points.sort_unstable();
    points
        .windows(2)
        .map(|pair| &input[pair[0]..pair[1]])
        .collect()
}

fn config(errors_max: usize, line_max: usize, plaintext_auth: bool) -> Arc<Config> {
    Arc::new(Config {
        hostname: "pop.example.org".to_owned(),
        line_max,
        errors_max,
        tls_available: false,
        plaintext_auth,
        input_buffer_max: 64 * 1024,
        ..Config::default()
    })
}

/// Every reply is whole CRLF lines; every multi-line reply ends with CRLF "." CRLF; Close is
/// last and happens at most once.
fn assert_well_formed(output: &[u8], events: &[Event]) {
    assert!(output.is_empty() || output.ends_with(b"\r\n"));
    for line in output.split(|&byte| byte == b'\n') {
        assert!(
            line.is_empty() || line.ends_with(b"\r"),
            "bare LF in {line:?}"
        );
    }
    if let Some(position) = events.iter().position(|event| *event == Event::Close) {
        assert_eq!(position, events.len() - 1);
    }
}

proptest! {
    #[test]
    fn output_does_not_depend_on_splits(
        input in input(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        errors_max in 0usize..30,
        line_max in prop_oneof![Just(1024usize), 8usize..40],
        plaintext_auth in any::<bool>(),
    ) {
        let config = config(errors_max, line_max, plaintext_auth);
        let whole = run(&config, &[&input]);
        let pieces = run(&config, &split(&input, &cuts));
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        let bytewise = run(&config, &bytes);
        assert_well_formed(&whole.0, &whole.1);
        prop_assert_eq!(&whole, &pieces);
        prop_assert_eq!(&whole, &bytewise);
    }

    #[test]
    fn any_shell_keeps_the_buffer_bounded(
        steps in proptest::collection::vec(
            (input(), any::<bool>(), any::<u8>()), 0..12,
        ),
        line_max in 0usize..40,
        input_buffer_max in 0usize..100,
    ) {
        // A careless shell: feeds regardless of wants_input, polls sometimes, answers some
        // decisions, at random times, possibly twice.
        let config = Arc::new(Config {
            line_max,
            input_buffer_max,
            errors_max: 50,
            plaintext_auth: true,
            tls_available: true,
            ..Config::default()
        });
        let bound = input_buffer_max + line_max;
        let mut session = Session::new(config, false);
        let mut closes = 0;
        for (input, poll, choice) in steps {
            session.feed(&input);
            prop_assert!(session.buffered_len() <= bound);
            if poll {
                while let Some(event) = session.poll() {
                    if event == Event::Close {
                        closes += 1;
                    }
                    if choice % 3 != 0 {
                        answer(&mut session, &event);
                    }
                    prop_assert!(session.buffered_len() <= bound);
                }
            }
            match choice % 7 {
                0 => session.timed_out(),
                1 => session.retrieve_result(Ok(vec![b'.'; 10])),
                2 => session.auth_result(AuthResult::BadCredentials),
                3 => session.update_result(Err("x".to_owned())),
                4 => session.tls_started(),
                _ => {}
            }
            prop_assert!(session.buffered_len() <= bound);
        }
        while let Some(event) = session.poll() {
            if event == Event::Close {
                closes += 1;
            }
        }
        prop_assert!(closes <= 1);
    }

    #[test]
    fn retr_round_trips_any_content(
        content in proptest::collection::vec(
            prop_oneof![Just(b'.'), Just(b'\r'), Just(b'\n'), Just(b'a'), any::<u8>()], 0..200,
        ),
        top_lines in proptest::option::of(0u32..6),
    ) {
        let mut session = Session::new(config(10, 1024, true), false);
        session.feed(b"USER alice\r\nPASS secret\r\n");
        while let Some(event) = session.poll() {
            answer(&mut session, &event);
        }
        let command = match top_lines {
            Some(lines) => format!("TOP 1 {lines}\r\n"),
            None => "RETR 1\r\n".to_owned(),
        };
        session.feed(command.as_bytes());
        let mut output = Vec::new();
        while let Some(event) = session.poll() {
            if let Event::Retrieve { .. } = event {
                session.retrieve_result(Ok(content.clone()));
            } else if let Event::Reply(bytes) = event {
                output.extend(bytes);
            }
        }
        // A client's reading: lines up to the lone ".", with stuffing undone.
        let mut lines = output.split(|&byte| byte == b'\n');
        prop_assert!(lines.next().is_some_and(|status| status.starts_with(b"+OK")));
        let mut received = Vec::new();
        let mut terminated = false;
        for line in lines {
            let line = line.strip_suffix(b"\r").expect("CRLF");
            if line == b"." {
                terminated = true;
                break;
            }
            received.push(line.strip_prefix(b".").unwrap_or(line).to_vec());
        }
        prop_assert!(terminated);
        prop_assert!(output.ends_with(b"\r\n.\r\n"));
        // Expected: the content's lines, CR before LF dropped, cut for TOP.
        let mut expected: Vec<Vec<u8>> = Vec::new();
        if !content.is_empty() {
            let body = content.strip_suffix(b"\n").unwrap_or(&content);
            for line in body.split(|&byte| byte == b'\n') {
                expected.push(line.strip_suffix(b"\r").unwrap_or(line).to_vec());
            }
        }
        if let Some(lines) = top_lines {
            let header_end = expected.iter().position(Vec::is_empty).map_or(expected.len(), |i| i + 1);
            expected.truncate(header_end + lines as usize);
        }
        prop_assert_eq!(received, expected);
    }
}
