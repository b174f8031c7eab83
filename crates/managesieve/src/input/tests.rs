use super::*;

fn config() -> Config {
    Config {
        line_max: 64,
        script_bytes_max: 16,
        arguments_max: 3,
        ..Config::default()
    }
}

/// Frames `data` fed whole and byte by byte; both must agree.
fn frames(data: &[u8]) -> Vec<Result<Frame, Unframeable>> {
    let config = config();
    let run = |chunk: usize| {
        let mut input = Input::default();
        let mut out = Vec::new();
        for piece in data.chunks(chunk.max(1)) {
            assert_eq!(input.push(piece, usize::MAX), piece.len());
            while let Some(frame) = input.next_frame(&config) {
                let fatal = frame.is_err();
                out.push(frame);
                if fatal {
                    return out;
                }
            }
            assert!(input.held() <= config.line_max + config.script_bytes_max);
        }
        out
    };
    let whole = run(data.len());
    assert_eq!(whole, run(1));
    assert_eq!(whole, run(3));
    whole
}

fn atom(text: &str) -> Token {
    Token::Atom(text.as_bytes().to_vec())
}

fn string(text: &str) -> Token {
    Token::String(text.as_bytes().to_vec())
}

#[test]
fn tokens_quoted_strings_and_literals() {
    assert_eq!(
        frames(
            b"PUTSCRIPT \"a \\\"b\\\\\" {5+}\r\nhello\r\nNOOP\nRENAMESCRIPT {1}\r\nx {0+}\r\n\r\n"
        ),
        vec![
            Ok(Frame::Command(vec![
                atom("PUTSCRIPT"),
                string("a \"b\\"),
                string("hello")
            ])),
            Ok(Frame::Command(vec![atom("NOOP")])),
            Ok(Frame::Command(vec![
                atom("RENAMESCRIPT"),
                string("x"),
                string("")
            ])),
        ]
    );
}

#[test]
fn syntax_errors_drop_the_command_through_its_literals() {
    assert_eq!(
        frames(b"NOOP  x\r\nPUTSCRIPT \"a\"x {6+}\r\nNOOP\r\n\r\n\r\nNOOP \"a\r\nNOOP \"\\x\"\r\nNOOP\r\n"),
        vec![
            Ok(Frame::Refused(FrameError::Syntax)),
            Ok(Frame::Refused(FrameError::Syntax)),
            Ok(Frame::Refused(FrameError::Empty)),
            Ok(Frame::Refused(FrameError::Syntax)),
            Ok(Frame::Refused(FrameError::Syntax)),
            Ok(Frame::Command(vec![atom("NOOP")])),
        ]
    );
}

#[test]
fn oversized_scripts_and_lines_are_skipped_not_kept() {
    let mut data = b"PUTSCRIPT \"a\" {17+}\r\n".to_vec();
    data.extend_from_slice(&[b'x'; 17]);
    data.extend_from_slice(b"\r\nCHECKSCRIPT {16+}\r\n");
    data.extend_from_slice(&[b'y'; 16]);
    data.extend_from_slice(b"\r\nNOOP {65+}\r\n");
    data.extend_from_slice(&[b'z'; 65]);
    data.extend_from_slice(b" {3+}\r\nabc\r\n");
    data.extend_from_slice(&[b'N'; 70]);
    data.extend_from_slice(b" {2}\r\nab\r\nLOGOUT\r\n");
    assert_eq!(
        frames(&data),
        vec![
            Ok(Frame::Refused(FrameError::ScriptTooLarge)),
            Ok(Frame::Command(vec![
                atom("CHECKSCRIPT"),
                Token::String(vec![b'y'; 16])
            ])),
            Ok(Frame::Refused(FrameError::LineTooLong)),
            Ok(Frame::Refused(FrameError::LineTooLong)),
            Ok(Frame::Command(vec![atom("LOGOUT")])),
        ]
    );
}

#[test]
fn too_many_arguments() {
    assert_eq!(
        frames(b"NOOP a b c d {1+}\r\nx\r\nNOOP a b c\r\n"),
        vec![
            Ok(Frame::Refused(FrameError::TooManyArguments)),
            Ok(Frame::Command(vec![
                atom("NOOP"),
                atom("a"),
                atom("b"),
                atom("c")
            ])),
        ]
    );
}

#[test]
fn literal_lengths_beyond_32_bits_end_framing() {
    assert_eq!(frames(b"NOOP {4294967296+}\r\n"), vec![Err(Unframeable)]);
    assert_eq!(
        frames(b"NOOP x{4294967296+}\r\n"),
        vec![Err(Unframeable)],
        "in a dropped line too"
    );
    assert_eq!(
        frames(b"NOOP {4294967295+}\r\n").len(),
        0,
        "the largest length is read (and dropped)"
    );
}

#[test]
fn marker_detection_in_dropped_lines() {
    assert_eq!(marker_at_end(b"x {12+}\r", false), Some(Ok(12)));
    assert_eq!(marker_at_end(b"x {12}", false), Some(Ok(12)));
    assert_eq!(marker_at_end(b"x {+}", false), None);
    assert_eq!(marker_at_end(b"12}", false), None);
    assert_eq!(marker_at_end(b"12}", true), Some(Err(Unframeable)));
    assert_eq!(marker_at_end(b"x 12}", true), None);
}
