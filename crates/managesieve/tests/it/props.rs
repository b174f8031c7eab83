//! Properties over arbitrary input: no panics, bounded buffers, well-formed output that does
//! not depend on how the input was split.

use std::sync::Arc;

use managesieve::{AuthResult, Config, Event, Failure, ScriptInfo, Session};
use proptest::prelude::*;

/// Pieces of input: commands in both states, SASL responses, literals, junk, raw bytes.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    const COMMANDS: &[&str] = &[
        "AUTHENTICATE \"PLAIN\" \"AGFsaWNlAHNlY3JldA==\"\r\n",
        "AUTHENTICATE \"PLAIN\" \"AGFsaWNlAHdyb25n\"\r\n",
        "AUTHENTICATE \"PLAIN\"\r\n",
        "\"AGFsaWNlAHNlY3JldA==\"\r\n",
        "{20+}\r\nAGFsaWNlAHNlY3JldA==\r\n",
        "\"*\"\r\n",
        "STARTTLS\r\n",
        "CAPABILITY\r\n",
        "LOGOUT\r\n",
        "NOOP\r\n",
        "NOOP \"tag\"\r\n",
        "LISTSCRIPTS\r\n",
        "GETSCRIPT \"a\"\r\n",
        "GETSCRIPT \"gone\"\r\n",
        "PUTSCRIPT \"a\" {5+}\r\nkeep;\r\n",
        "PUTSCRIPT \"bad\" {4}\r\nkeep\r\n",
        "PUTSCRIPT \"big\" {100+}\r\n",
        "CHECKSCRIPT \"keep;\"\r\n",
        "HAVESPACE \"a\" 100\r\n",
        "SETACTIVE \"a\"\r\n",
        "SETACTIVE \"\"\r\n",
        "DELETESCRIPT \"a\"\r\n",
        "RENAMESCRIPT {1+}\r\na \"b\"\r\n",
        "UNAUTHENTICATE\r\n",
        "{",
        "{4294967296+}\r\n",
        "{3}\r\n",
        "\"",
        "\\",
        "\r\n",
        "\n",
        "\r",
        " ",
        "NOOP  x\r\n",
    ];
    prop_oneof![
        6 => proptest::sample::select(COMMANDS).prop_map(|command| command.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => (1usize..300).prop_map(|length| vec![b'x'; length]),
    ]
}

/// Half the inputs start with a good login, so the authenticated state gets explored too.
fn input() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), proptest::collection::vec(piece(), 0..40)).prop_map(|(login, pieces)| {
        let prefix: &[u8] = if login {
            b"AUTHENTICATE \"PLAIN\" \"AGFsaWNlAHNlY3JldA==\"\r\n"
        } else {
            b""
        };
        [prefix.to_vec(), pieces.concat()].concat()
    })
}

/// The shell's decisions, all made at once and deterministically.
fn answer(session: &mut Session, event: &Event) {
    match event {
        Event::StartTls => session.tls_started(),
        Event::Authenticate { password, .. } => session.authenticated(match password.as_str() {
            "secret" => AuthResult::Success {
                user: "alice".to_owned(),
            },
            _ => AuthResult::BadCredentials,
        }),
        Event::ListScripts { .. } => session.scripts_listed(Ok(vec![ScriptInfo {
            name: "a\"b".to_owned(),
            active: true,
        }])),
        Event::GetScript { name, .. } if name == "gone" => {
            session.script_got(Err(Failure::NonExistent))
        }
        Event::GetScript { .. } => session.script_got(Ok(b"keep;\r\n".to_vec())),
        Event::PutScript { script, .. } if script.ends_with(';') => session.script_put(Ok(None)),
        Event::PutScript { .. } => session.script_put(Err(Failure::Invalid(
            "line 1, column 5:\nexpected \";\"".to_owned(),
        ))),
        Event::CheckScript { .. } => session.script_checked(Ok(Some("w".to_owned()))),
        Event::HaveSpace { .. } => session.space_checked(Ok(())),
        Event::SetActive { .. } => session.active_set(Err(Failure::Unavailable("down".to_owned()))),
        Event::DeleteScript { .. } => session.script_deleted(Err(Failure::Active)),
        Event::RenameScript { .. } => session.script_renamed(Ok(())),
        Event::Reply(_) | Event::Close => {}
    }
}

/// What a well-behaved shell sees: it feeds the chunks in order, only while the session wants
/// input, and answers every decision as soon as it is polled.
fn run(config: &Arc<Config>, chunks: &[&[u8]]) -> (Vec<u8>, Vec<Event>) {
    let bound = config.input_bound();
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

fn config(errors_max: usize, line_max: usize, script_bytes_max: usize, tls: bool) -> Arc<Config> {
    Arc::new(Config {
        line_max,
        script_bytes_max,
        errors_max,
        plaintext_auth: true,
        tls_available: tls,
        ..Config::default()
    })
}

/// Every reply ends with CRLF; Close is last and happens at most once.
fn assert_well_formed(output: &[u8], events: &[Event]) {
    assert!(output.is_empty() || output.ends_with(b"\r\n"));
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
        line_max in prop_oneof![Just(8192usize), 8usize..60],
        script_bytes_max in prop_oneof![Just(65536usize), 0usize..20],
        tls in any::<bool>(),
    ) {
        let config = config(errors_max, line_max, script_bytes_max, tls);
        let whole = run(&config, &[&input]);
        let pieces = run(&config, &split(&input, &cuts));
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        let bytewise = run(&config, &bytes);
        assert_well_formed(&whole.0, &whole.1);
        // STARTTLS discards what arrived with it, which depends on the split.
        if !whole.1.contains(&Event::StartTls) {
            prop_assert_eq!(&whole, &pieces);
            prop_assert_eq!(&whole, &bytewise);
        }
    }

    #[test]
    fn any_shell_keeps_the_buffer_bounded(
        steps in proptest::collection::vec(
            (input(), any::<bool>(), any::<u8>()), 0..12,
        ),
        line_max in 0usize..60,
        script_bytes_max in 0usize..40,
        input_buffer_max in 0usize..100,
    ) {
        // A careless shell: feeds regardless of wants_input, polls sometimes, answers some
        // decisions, at random times, possibly twice or wrongly.
        let config = Arc::new(Config {
            line_max,
            script_bytes_max,
            input_buffer_max,
            errors_max: 50,
            plaintext_auth: true,
            tls_available: true,
            ..Config::default()
        });
        let bound = config.input_bound();
        prop_assert!(bound <= input_buffer_max.max(1) + line_max + script_bytes_max);
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
            match choice % 9 {
                0 => session.timed_out(),
                1 => session.script_got(Ok(vec![b'.'; 10])),
                2 => session.authenticated(AuthResult::BadCredentials),
                3 => session.script_put(Err(Failure::Invalid("x\r\ny".to_owned()))),
                4 => session.tls_started(),
                5 => { let _ = session.deadlines(); }
                6 => session.scripts_listed(Ok(Vec::new())),
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
}
