//! Command line framing: where a command (or SASL response) line ends, and whether its bytes
//! are acceptable before any parser sees them.

/// What `frame` found at the start of the unprocessed input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Framed {
    /// A complete line of this many bytes, LF included.
    Line(usize),
    /// The line is longer than the limit. `consumed` bytes are dropped; if the LF has not
    /// arrived yet, the framer keeps dropping through it (`discarding`).
    TooLong { consumed: usize },
    /// Bytes of an over-long line, dropped silently after its error was reported.
    Skipped { consumed: usize },
    /// No complete line yet.
    NeedMore,
}

/// Finds the next line in `input`. A line ends at LF; anything longer than `line_max` bytes
/// (RFC 5321 4.5.3.1.4) is an error reported once, as soon as it is certain: when `line_max`
/// bytes have arrived without an LF, the line cannot end in time. That moment does not depend
/// on how the input was split, so neither does the output.
pub(crate) fn frame(input: &[u8], line_max: usize, discarding: &mut bool) -> Framed {
    let newline = input.iter().position(|&byte| byte == b'\n');
    if *discarding {
        return match newline {
            Some(index) => {
                *discarding = false;
                Framed::Skipped {
                    consumed: index.saturating_add(1),
                }
            }
            None if input.is_empty() => Framed::NeedMore,
            None => Framed::Skipped {
                consumed: input.len(),
            },
        };
    }
    match newline {
        Some(index) if index < line_max => Framed::Line(index.saturating_add(1)),
        Some(index) => Framed::TooLong {
            consumed: index.saturating_add(1),
        },
        None if !input.is_empty() && input.len() >= line_max => {
            *discarding = true;
            Framed::TooLong {
                consumed: input.len(),
            }
        }
        None => Framed::NeedMore,
    }
}

/// Why a complete line is refused before parsing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineFault {
    /// A LF without CR before it, or a CR not followed by LF (RFC 5321 2.3.8: only CRLF ends
    /// a line; lenient line ends are what SMTP smuggling exploits).
    BareNewline,
    /// A NUL byte: no SMTP command contains one, and C code downstream would truncate at it.
    Nul,
    /// Not UTF-8 (RFC 6531 allows UTF-8 in commands, nothing else).
    NotUtf8,
}

/// Checks a complete line (LF included) and returns it without its CRLF.
pub(crate) fn check(line: &[u8]) -> Result<&str, LineFault> {
    if line.contains(&0) {
        return Err(LineFault::Nul);
    }
    let Some(body) = line.strip_suffix(b"\r\n") else {
        return Err(LineFault::BareNewline);
    };
    if body.contains(&b'\r') || body.contains(&b'\n') {
        return Err(LineFault::BareNewline);
    }
    std::str::from_utf8(body).map_err(|_| LineFault::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_finds_lines_and_long_lines() {
        let mut discarding = false;
        assert_eq!(frame(b"NOOP\r\nX", 10, &mut discarding), Framed::Line(6));
        assert_eq!(frame(b"NOOP", 10, &mut discarding), Framed::NeedMore);
        assert_eq!(frame(b"", 10, &mut discarding), Framed::NeedMore);
        // Exactly at the limit is fine, one more is not.
        assert_eq!(
            frame(b"12345678\r\n", 10, &mut discarding),
            Framed::Line(10)
        );
        assert_eq!(
            frame(b"123456789\r\n", 10, &mut discarding),
            Framed::TooLong { consumed: 11 }
        );
        assert!(!discarding);
        assert_eq!(
            frame(b"1234567890", 10, &mut discarding),
            Framed::TooLong { consumed: 10 }
        );
        assert!(discarding);
        assert_eq!(
            frame(b"abc", 10, &mut discarding),
            Framed::Skipped { consumed: 3 }
        );
        assert_eq!(
            frame(b"c\r\nNOOP\r\n", 10, &mut discarding),
            Framed::Skipped { consumed: 3 }
        );
        assert!(!discarding);
    }

    #[test]
    fn check_refuses_bare_newlines_nul_and_bad_utf8() {
        assert_eq!(check(b"NOOP\r\n"), Ok("NOOP"));
        assert_eq!(check(b"NOOP\n"), Err(LineFault::BareNewline));
        assert_eq!(check(b"NO\rOP\r\n"), Err(LineFault::BareNewline));
        assert_eq!(check(b"NO\0OP\r\n"), Err(LineFault::Nul));
        assert_eq!(check(b"NOOP \xff\r\n"), Err(LineFault::NotUtf8));
    }
}
