use super::*;

fn config() -> Config {
    Config {
        line_bytes_max: 64,
        literal_bytes_max: 100,
        command_bytes_max: 200,
        nesting_depth_max: 3,
        ..Config::default()
    }
}

/// Frames `input` after login (the full limits).
fn frames(input: &[&[u8]]) -> Vec<Frame> {
    let mut f = Framer::new(&config());
    f.logged_in();
    frames_with(&mut f, input)
}

fn frames_with(f: &mut Framer, input: &[&[u8]]) -> Vec<Frame> {
    let mut out = Vec::new();
    for chunk in input {
        f.feed(chunk);
        while let Some(frame) = f.next() {
            out.push(frame);
        }
    }
    out
}

fn cmd(s: &str) -> Frame {
    Frame::Command(s.as_bytes().to_vec())
}

#[test]
fn lines_are_commands() {
    assert_eq!(
        frames(&[b"a NOOP\r\nb LOGOUT\r\n"]),
        vec![cmd("a NOOP\r\n"), cmd("b LOGOUT\r\n")]
    );
}

#[test]
fn a_synchronising_literal_asks_to_continue_and_joins_the_command() {
    let whole = frames(&[b"a LOGIN {3}\r\n", b"bob {2}\r\n", b"pw\r\n"]);
    assert_eq!(
        whole,
        vec![
            Frame::Continue,
            Frame::Continue,
            cmd("a LOGIN {3}\r\nbob {2}\r\npw\r\n")
        ]
    );
}

#[test]
fn output_does_not_depend_on_how_input_is_split() {
    let input = b"a LOGIN {3}\r\nbob {2+}\r\npw\r\nb NOOP\r\n";
    let whole = frames(&[input]);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(frames(&bytes), whole);
    assert_eq!(whole.len(), 3, "{whole:?}");
}

#[test]
fn literal_plus_sends_no_continuation() {
    assert_eq!(
        frames(&[b"a X {2+}\r\nhi\r\n"]),
        vec![cmd("a X {2+}\r\nhi\r\n")]
    );
}

#[test]
fn a_literal_over_the_limit_is_refused_without_reading_it() {
    assert_eq!(
        frames(&[b"a APPEND x {101}\r\n", b"b NOOP\r\n"]),
        vec![
            Frame::Dropped {
                tag: Some("a".into()),
                limit: Limit::Literal(100)
            },
            cmd("b NOOP\r\n")
        ]
    );
}

#[test]
fn a_non_synchronising_literal_over_the_limit_is_skipped_then_refused() {
    let mut input = b"a APPEND x {150+}\r\n".to_vec();
    input.extend_from_slice(&[b'x'; 150]);
    input.extend_from_slice(b"\r\nb NOOP\r\n");
    assert_eq!(
        frames(&[&input]),
        vec![
            Frame::Dropped {
                tag: Some("a".into()),
                limit: Limit::Literal(100)
            },
            cmd("b NOOP\r\n")
        ]
    );
}

#[test]
fn a_long_line_is_dropped_and_the_stream_recovers() {
    let mut input = b"a NOOP ".to_vec();
    input.extend_from_slice(&[b'x'; 500]);
    input.extend_from_slice(b"\r\nb NOOP\r\n");
    let bytes: Vec<&[u8]> = input.chunks(7).collect();
    assert_eq!(
        frames(&bytes),
        vec![
            Frame::Dropped {
                tag: Some("a".into()),
                limit: Limit::Line(64)
            },
            cmd("b NOOP\r\n")
        ]
    );
}

#[test]
fn the_whole_command_is_bounded_too() {
    // Each literal fits, together they do not.
    let mut input = b"a X {95+}\r\n".to_vec();
    input.extend_from_slice(&[b'y'; 95]);
    input.extend_from_slice(b" {95+}\r\n");
    input.extend_from_slice(&[b'y'; 95]);
    input.extend_from_slice(b"\r\nb NOOP\r\n");
    let out = frames(&[&input]);
    assert_eq!(
        out,
        vec![
            Frame::Dropped {
                tag: Some("a".into()),
                limit: Limit::Command(200)
            },
            cmd("b NOOP\r\n")
        ]
    );
}

#[test]
fn nesting_beyond_the_limit_is_dropped() {
    assert_eq!(
        frames(&[b"a SEARCH ((((ALL))))\r\nb NOOP\r\n"]),
        vec![
            Frame::Dropped {
                tag: Some("a".into()),
                limit: Limit::Nesting(3)
            },
            cmd("b NOOP\r\n")
        ]
    );
    // Parentheses inside quoted strings do not count.
    assert_eq!(
        frames(&[b"a X \"((((\"\r\n"]),
        vec![cmd("a X \"((((\"\r\n")]
    );
}

#[test]
fn literal_markers() {
    assert_eq!(literal_marker(b"a {5}\r\n"), Some((5, true)));
    assert_eq!(literal_marker(b"a {5+}\r\n"), Some((5, false)));
    assert_eq!(literal_marker(b"a ~{0}\r\n"), Some((0, true)));
    assert_eq!(literal_marker(b"a {}\r\n"), None);
    assert_eq!(literal_marker(b"a {99999999999999999999}\r\n"), None);
    assert_eq!(literal_marker(b"a 5}\r\n"), None);
}

#[test]
fn tags() {
    assert_eq!(tag_of(b"a1 NOOP"), Some("a1".into()));
    assert_eq!(tag_of(b"+ NOOP"), None);
    assert_eq!(tag_of(b"a(b NOOP"), None);
    assert_eq!(tag_of(b"\r\n"), None);
}

fn prelogin_config() -> Config {
    Config {
        prelogin_line_bytes_max: 32,
        prelogin_literal_bytes_max: 10,
        ..config()
    }
}

#[test]
fn before_login_lines_and_literals_are_small_and_a_big_literal_plus_closes() {
    let mut f = Framer::new(&prelogin_config());
    // A synchronising literal over the pre-login limit: refused, no `+`.
    assert_eq!(
        frames_with(&mut f, &[b"a LOGIN {11}\r\n", b"b NOOP\r\n"]),
        vec![
            Frame::Dropped {
                tag: Some("a".into()),
                limit: Limit::Literal(10)
            },
            cmd("b NOOP\r\n")
        ]
    );
    // A line over the pre-login limit.
    let long = format!("c LOGIN {} x\r\nd NOOP\r\n", "u".repeat(40));
    assert_eq!(
        frames_with(&mut f, &[long.as_bytes()]),
        vec![
            Frame::Dropped {
                tag: Some("c".into()),
                limit: Limit::Line(32)
            },
            cmd("d NOOP\r\n")
        ]
    );
    // A non-synchronising literal over it: refused, and nothing after it is read.
    assert_eq!(
        frames_with(&mut f, &[b"e LOGIN {5000000+}\r\nxxxx\r\nf NOOP\r\n"]),
        vec![Frame::Closing {
            tag: Some("e".into()),
            limit: Limit::Literal(10)
        }]
    );
    assert_eq!(f.buffered(), 0);
    // After login the full limits apply.
    let mut f = Framer::new(&prelogin_config());
    f.logged_in();
    assert_eq!(
        frames_with(&mut f, &[b"a LOGIN {11}\r\n"]),
        vec![Frame::Continue]
    );
}

#[test]
fn literals_after_login_are_charged_to_the_shared_budget_until_the_command_ran() {
    let budget = limits::ByteBudget::new(128 << 10);
    let config = Config {
        literal_bytes_max: 1 << 20,
        command_bytes_max: 2 << 20,
        inflight: Some(budget.clone()),
        ..config()
    };
    let mut a = Framer::new(&config);
    a.logged_in();
    let mut b = Framer::new(&config);
    b.logged_in();
    assert_eq!(
        frames_with(&mut a, &[b"a APPEND x {70000}\r\n"]),
        vec![Frame::Continue]
    );
    assert_eq!(budget.reserved(), 128 << 10, "rounded up to 64 KiB steps");
    // No room for a second one: refused before `+`, and not counted as a client error.
    assert_eq!(
        frames_with(&mut b, &[b"b APPEND x {70000}\r\n"]),
        vec![Frame::Dropped {
            tag: Some("b".into()),
            limit: Limit::Budget
        }]
    );
    // The same with LITERAL+: its bytes are read and thrown away, then refused.
    let mut input = b"c APPEND x {70000+}\r\n".to_vec();
    input.extend_from_slice(&vec![b'z'; 70_000]);
    input.extend_from_slice(b"\r\nd NOOP\r\n");
    assert_eq!(
        frames_with(&mut b, &[&input]),
        vec![
            Frame::Dropped {
                tag: Some("c".into()),
                limit: Limit::Budget
            },
            cmd("d NOOP\r\n")
        ]
    );
    let mut body = vec![b'y'; 70_000];
    body.extend_from_slice(b"\r\n");
    a.feed(&body);
    assert!(matches!(a.next(), Some(Frame::Command(c)) if c.len() > 70_000));
    assert_eq!(budget.reserved(), 128 << 10, "held while the command runs");
    assert_eq!(a.next(), None);
    assert_eq!(budget.reserved(), 0, "given back at the next command");
}

#[test]
fn the_command_number_and_literal_bytes_time_each_command() {
    let mut f = Framer::new(&config());
    f.logged_in();
    assert!(!f.in_command());
    f.feed(b"a NO");
    assert_eq!(f.next(), None);
    assert!(f.in_command());
    let first = f.command_number();
    f.feed(b"OP\r\nb APPEND x {5}\r\n");
    assert_eq!(f.next(), Some(cmd("a NOOP\r\n")));
    assert_eq!(f.next(), Some(Frame::Continue));
    assert_ne!(f.command_number(), first);
    f.feed(b"abc");
    assert_eq!(f.next(), None);
    assert_eq!(f.literal_received(), 3);
    f.feed(b"de\r\n");
    assert!(matches!(f.next(), Some(Frame::Command(_))));
    assert_eq!(f.literal_received(), 0);
    assert!(!f.in_command());
}

proptest::proptest! {
    #[test]
    fn never_panics_and_never_grows_past_its_limits(chunks in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80), 0..20)) {
        let mut f = Framer::new(&config());
        for chunk in &chunks {
            f.feed(chunk);
            while let Some(frame) = f.next() {
                if let Frame::Command(c) = frame {
                    proptest::prop_assert!(c.len() as u64 <= 200 + 64);
                }
            }
            proptest::prop_assert!(f.command.len() as u64 <= 200 + 64);
        }
    }
}
