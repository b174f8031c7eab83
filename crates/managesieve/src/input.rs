//! Command framing (RFC 5804 4) with bounded memory.
//!
//! A command is tokens separated by single spaces and ended by CRLF (a bare LF is accepted
//! too): atoms (the command name, HAVESPACE's number), quoted strings (`"..."` with `\"` and
//! `\\` escapes, no CR, LF or NUL), and literals: `{n+}` (RFC 5804 4's non-synchronizing
//! literal-c2s) or `{n}` (synchronizing; the server sends no continuation either way) at the
//! end of a line, then exactly `n` octets, after which the command goes on (a space and more
//! tokens, or its CRLF).
//!
//! The lexer is a byte-level state machine, so a command is framed the same however its bytes
//! are split into reads. It bounds what it keeps: `line_max` octets for everything but a
//! script (PUTSCRIPT's second argument, CHECKSCRIPT's first), whose literal is bounded by
//! `script_bytes_max`. A command that breaks a rule (bad syntax, too long, too many
//! arguments, a script too large) is not kept: the lexer drops it through its end, still
//! following literal markers at the ends of its lines (even in the dropped part), so the
//! bytes of a refused literal are never read as commands. A literal length that does not fit
//! RFC 5804 4's 32-bit number cannot be followed that way, and ends the session.

use crate::config::Config;

/// One token of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    Atom(Vec<u8>),
    /// A quoted string (unescaped) or a literal's octets.
    String(Vec<u8>),
}

/// A framed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    Command(Vec<Token>),
    /// The command broke a framing rule; it was read to its end and dropped.
    Refused(FrameError),
}

/// Why a command was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Not tokens separated by single spaces: a bad character, an unterminated quoted string,
    /// a bad escape, a malformed literal marker, a trailing space.
    Syntax,
    /// An empty line.
    Empty,
    /// More than `line_max` octets.
    LineTooLong,
    /// More than `arguments_max` arguments.
    TooManyArguments,
    /// A script literal over `script_bytes_max` (answered `NO (QUOTA/MAXSIZE)`).
    ScriptTooLarge,
}

/// The input cannot be framed any more: a literal length over 4294967295 (RFC 5804 4
/// `number`), whose octets cannot be skipped reliably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unframeable;

/// The largest literal length: RFC 5804 4, "number" is a 32-bit unsigned number.
const NUMBER_MAX: u64 = u32::MAX as u64;

/// Bytes of a dropped line kept to find a literal marker at its end.
const TAIL: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Where a token starts: the start of the command, or after a space.
    TokenStart {
        after_space: bool,
    },
    Atom,
    Quoted,
    QuotedEscape,
    /// After `{`.
    Marker {
        length: u64,
        digits: bool,
        plus: bool,
    },
    /// After the marker's `}`: CRLF must follow.
    MarkerEnd {
        length: u64,
    },
    MarkerCr {
        length: u64,
    },
    /// Reading a literal's octets; `keep` false when the command is being dropped.
    Literal {
        remaining: u64,
        keep: bool,
    },
    /// After a token: a space, or the end of the command.
    AfterToken,
    /// After the command's CR.
    Cr,
    /// Dropping the command through the end of its line.
    Skip,
}

/// What one byte did.
enum Step {
    Next,
    /// Run the same byte again in the new state.
    Again,
    End,
    Fatal,
}

/// Unread input and the command being framed.
#[derive(Debug)]
pub(crate) struct Input {
    /// Bytes received and not lexed yet; `pending[..start]` is lexed already.
    pending: Vec<u8>,
    start: usize,
    lex: Lex,
    tokens: Vec<Token>,
    /// The token being read.
    current: Vec<u8>,
    /// Bytes kept in `tokens` and `current`.
    kept: usize,
    /// Octets of this command counted against `line_max`.
    line_used: usize,
    error: Option<FrameError>,
    /// The last bytes of the line being read, to find a literal marker at the end of a line
    /// that is being dropped.
    tail: Tail,
    /// Part of a command has been received.
    in_command: bool,
    /// Lines of commands started (a command's first byte, and the end of each literal): the
    /// step of the command deadline.
    segments: u64,
    /// Literals started: the step of the literal deadline.
    literals: u64,
    /// Octets of the current literal received.
    literal_received: u64,
}

impl Default for Input {
    fn default() -> Input {
        Input {
            pending: Vec::new(),
            start: 0,
            lex: Lex::TokenStart { after_space: false },
            tokens: Vec::new(),
            current: Vec::new(),
            kept: 0,
            line_used: 0,
            error: None,
            tail: Tail::default(),
            in_command: false,
            segments: 0,
            literals: 0,
            literal_received: 0,
        }
    }
}

/// The last `TAIL` bytes of a line.
#[derive(Debug, Default)]
struct Tail {
    bytes: [u8; TAIL],
    len: usize,
}

impl Tail {
    fn extend(&mut self, more: &[u8]) {
        let more = &more[more.len().saturating_sub(TAIL)..];
        let keep = (TAIL - more.len()).min(self.len);
        self.bytes.copy_within(self.len - keep..self.len, 0);
        self.bytes[keep..keep + more.len()].copy_from_slice(more);
        self.len = keep + more.len();
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

fn atom_char(byte: u8) -> bool {
    // Printable ASCII but the string and literal delimiters.
    (0x21..=0x7e).contains(&byte) && !matches!(byte, b'"' | b'{' | b'}' | b'\\')
}

impl Input {
    /// Unread bytes.
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len() - self.start
    }

    /// Bytes held: unread input plus what the command being framed keeps.
    pub(crate) fn held(&self) -> usize {
        self.pending_len() + self.kept
    }

    /// The literal being received: its step and the octets received so far.
    pub(crate) fn literal(&self) -> Option<(u64, u64)> {
        match self.lex {
            Lex::Literal { .. } => Some((self.literals, self.literal_received)),
            _ => None,
        }
    }

    /// The command line being received (outside a literal): its step.
    pub(crate) fn line(&self) -> Option<u64> {
        (self.in_command && !matches!(self.lex, Lex::Literal { .. })).then_some(self.segments)
    }

    /// Drops everything held (after STARTTLS nothing sent in plaintext may survive); the
    /// deadline steps go on counting.
    pub(crate) fn clear(&mut self) {
        *self = Input {
            segments: self.segments,
            literals: self.literals,
            ..Input::default()
        };
    }

    /// The unread bytes, taken out (the command being framed, if any, is dropped).
    pub(crate) fn take(&mut self) -> Vec<u8> {
        let unread = self.pending[self.start..].to_vec();
        self.clear();
        unread
    }

    /// Takes bytes from `data` while fewer than `max` are unread; returns how many.
    pub(crate) fn push(&mut self, data: &[u8], max: usize) -> usize {
        self.compact();
        let count = max.saturating_sub(self.pending_len()).min(data.len());
        self.pending.extend_from_slice(&data[..count]);
        count
    }

    fn compact(&mut self) {
        if self.start == 0 {
            return;
        }
        if self.start == self.pending.len() {
            self.pending.clear();
            self.start = 0;
        } else if self.start >= self.pending.len() / 2 {
            self.pending.drain(..self.start);
            self.start = 0;
        }
    }

    /// Lexes unread bytes until a command is complete (`Some`) or none are left (`None`).
    pub(crate) fn next_frame(&mut self, config: &Config) -> Option<Result<Frame, Unframeable>> {
        loop {
            if self.start == self.pending.len() {
                self.compact();
                return None;
            }
            match self.lex {
                Lex::Literal { remaining, keep } => {
                    self.literal_bytes(remaining, keep);
                    continue;
                }
                Lex::Skip => match self.skip_bytes() {
                    Step::End => return Some(Ok(self.finish())),
                    Step::Fatal => return Some(Err(self.fatal())),
                    Step::Next | Step::Again => continue,
                },
                _ => {}
            }
            let byte = self.pending[self.start];
            match self.byte(byte, config) {
                Step::Next => {
                    self.start += 1;
                    self.tail.extend(&[byte]);
                }
                Step::Again => {}
                Step::End => {
                    self.start += 1;
                    return Some(Ok(self.finish()));
                }
                Step::Fatal => return Some(Err(self.fatal())),
            }
        }
    }

    fn fatal(&mut self) -> Unframeable {
        self.clear();
        Unframeable
    }

    /// A literal's octets, as many as are here.
    fn literal_bytes(&mut self, remaining: u64, keep: bool) {
        let available = &self.pending[self.start..];
        let count = usize::try_from(remaining)
            .unwrap_or(usize::MAX)
            .min(available.len());
        if keep {
            self.current.extend_from_slice(&available[..count]);
            self.kept += count;
        }
        self.start += count;
        self.literal_received += count as u64;
        let remaining = remaining - count as u64;
        if remaining > 0 {
            self.lex = Lex::Literal { remaining, keep };
            return;
        }
        // The command's next line starts.
        self.segments += 1;
        if keep {
            self.finish_token(true);
            self.lex = Lex::AfterToken;
        } else {
            self.lex = Lex::Skip;
        }
    }

    /// Bytes of a dropped line: through its LF, keeping the tail to find a literal marker.
    fn skip_bytes(&mut self) -> Step {
        let rest = &self.pending[self.start..];
        let Some(newline) = rest.iter().position(|&byte| byte == b'\n') else {
            self.tail.extend(rest);
            self.start = self.pending.len();
            return Step::Next;
        };
        self.tail.extend(&rest[..newline]);
        self.start += newline + 1;
        let marker = marker_at_end(self.tail.bytes(), self.tail.len == TAIL);
        self.tail = Tail::default();
        match marker {
            None => Step::End,
            Some(Err(Unframeable)) => Step::Fatal,
            Some(Ok(length)) => {
                self.start_literal(length, false);
                Step::Next
            }
        }
    }

    /// Drops the command: it broke a rule (the first one broken is reported).
    fn fail(&mut self, error: FrameError) {
        self.error.get_or_insert(error);
        self.tokens.clear();
        self.current.clear();
        self.kept = 0;
        self.lex = Lex::Skip;
    }

    fn finish_token(&mut self, string: bool) {
        let bytes = std::mem::take(&mut self.current);
        self.tokens.push(if string {
            Token::String(bytes)
        } else {
            Token::Atom(bytes)
        });
    }

    /// The command is complete: hands it out and starts the next one.
    fn finish(&mut self) -> Frame {
        let frame = match self.error.take() {
            Some(error) => Frame::Refused(error),
            None => Frame::Command(std::mem::take(&mut self.tokens)),
        };
        self.tokens.clear();
        self.current.clear();
        self.kept = 0;
        self.line_used = 0;
        self.tail = Tail::default();
        self.in_command = false;
        self.lex = Lex::TokenStart { after_space: false };
        frame
    }

    /// Whether the literal about to start is a script: PUTSCRIPT's second argument or
    /// CHECKSCRIPT's first (RFC 5804 2.6, 2.12).
    fn script_argument(&self) -> bool {
        match self.tokens.first() {
            Some(Token::Atom(name)) => {
                (name.eq_ignore_ascii_case(b"PUTSCRIPT") && self.tokens.len() == 2)
                    || (name.eq_ignore_ascii_case(b"CHECKSCRIPT") && self.tokens.len() == 1)
            }
            _ => false,
        }
    }

    fn start_literal(&mut self, length: u64, keep: bool) {
        self.literals += 1;
        self.literal_received = 0;
        self.tail = Tail::default();
        self.lex = Lex::Literal {
            remaining: length,
            keep,
        };
        if length == 0 {
            // Nothing to read: the token (or the dropping) ends at once.
            self.literal_bytes(0, keep);
        }
    }

    /// A literal marker of a command being kept ended with its LF.
    fn begin_literal(&mut self, length: u64, config: &Config) {
        let script = self.script_argument();
        let fits = if script {
            length <= config.script_bytes_max as u64
        } else {
            // Names and SASL strings count against the line like quoted strings do.
            (self.line_used as u64).saturating_add(length) <= config.line_max as u64
        };
        if !fits {
            self.fail(if script {
                FrameError::ScriptTooLarge
            } else {
                FrameError::LineTooLong
            });
            self.start_literal(length, false);
            return;
        }
        if !script {
            self.line_used += length as usize;
        }
        self.start_literal(length, true);
    }

    fn byte(&mut self, byte: u8, config: &Config) -> Step {
        if !self.in_command {
            self.in_command = true;
            self.segments += 1;
        }
        if self.line_used >= config.line_max {
            self.fail(FrameError::LineTooLong);
            return Step::Again;
        }
        self.line_used += 1;
        match self.lex {
            Lex::TokenStart { after_space } => {
                if matches!(byte, b'\r' | b'\n') {
                    self.line_used -= 1;
                    self.fail(if self.tokens.is_empty() && !after_space {
                        FrameError::Empty
                    } else {
                        FrameError::Syntax
                    });
                    return Step::Again;
                }
                if self.tokens.len() > config.arguments_max {
                    self.line_used -= 1;
                    self.fail(FrameError::TooManyArguments);
                    return Step::Again;
                }
                match byte {
                    b'"' => self.lex = Lex::Quoted,
                    b'{' => {
                        self.lex = Lex::Marker {
                            length: 0,
                            digits: false,
                            plus: false,
                        }
                    }
                    _ if atom_char(byte) => {
                        self.current.push(byte);
                        self.kept += 1;
                        self.lex = Lex::Atom;
                    }
                    _ => {
                        self.line_used -= 1;
                        self.fail(FrameError::Syntax);
                        return Step::Again;
                    }
                }
                Step::Next
            }
            Lex::Atom => match byte {
                b' ' => {
                    self.finish_token(false);
                    self.lex = Lex::TokenStart { after_space: true };
                    Step::Next
                }
                b'\r' => {
                    self.finish_token(false);
                    self.lex = Lex::Cr;
                    Step::Next
                }
                b'\n' => {
                    self.finish_token(false);
                    Step::End
                }
                _ if atom_char(byte) => {
                    self.current.push(byte);
                    self.kept += 1;
                    Step::Next
                }
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::Quoted => match byte {
                b'"' => {
                    self.finish_token(true);
                    self.lex = Lex::AfterToken;
                    Step::Next
                }
                b'\\' => {
                    self.lex = Lex::QuotedEscape;
                    Step::Next
                }
                b'\r' | b'\n' | 0 => self.refuse(FrameError::Syntax),
                _ => {
                    self.current.push(byte);
                    self.kept += 1;
                    Step::Next
                }
            },
            Lex::QuotedEscape => match byte {
                b'"' | b'\\' => {
                    self.current.push(byte);
                    self.kept += 1;
                    self.lex = Lex::Quoted;
                    Step::Next
                }
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::Marker {
                length,
                digits,
                plus,
            } => match byte {
                b'0'..=b'9' if !plus => {
                    let length = length * 10 + u64::from(byte - b'0');
                    if length > NUMBER_MAX {
                        return Step::Fatal;
                    }
                    self.lex = Lex::Marker {
                        length,
                        digits: true,
                        plus,
                    };
                    Step::Next
                }
                b'+' if digits && !plus => {
                    self.lex = Lex::Marker {
                        length,
                        digits,
                        plus: true,
                    };
                    Step::Next
                }
                b'}' if digits => {
                    self.lex = Lex::MarkerEnd { length };
                    Step::Next
                }
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::MarkerEnd { length } => match byte {
                b'\r' => {
                    self.lex = Lex::MarkerCr { length };
                    Step::Next
                }
                b'\n' => {
                    self.begin_literal(length, config);
                    Step::Next
                }
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::MarkerCr { length } => match byte {
                b'\n' => {
                    self.begin_literal(length, config);
                    Step::Next
                }
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::AfterToken => match byte {
                b' ' => {
                    self.lex = Lex::TokenStart { after_space: true };
                    Step::Next
                }
                b'\r' => {
                    self.lex = Lex::Cr;
                    Step::Next
                }
                b'\n' => Step::End,
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::Cr => match byte {
                b'\n' => Step::End,
                _ => self.refuse(FrameError::Syntax),
            },
            Lex::Literal { .. } | Lex::Skip => {
                // Handled in bulk by `next_frame`; never reached.
                self.line_used -= 1;
                Step::Again
            }
        }
    }

    /// Drops the command at this byte, which is lexed again as part of the dropped line.
    fn refuse(&mut self, error: FrameError) -> Step {
        self.line_used -= 1;
        self.fail(error);
        Step::Again
    }
}

/// A literal marker (`{n}` or `{n+}`, then an optional CR) at the end of a dropped line: its
/// length. `Err` when the tail ends like a marker whose length is too large, or whose `{`
/// was cut off the full window (`full`).
fn marker_at_end(tail: &[u8], full: bool) -> Option<Result<u64, Unframeable>> {
    let tail = tail.strip_suffix(b"\r").unwrap_or(tail);
    let inner = tail.strip_suffix(b"}")?;
    let inner = inner.strip_suffix(b"+").unwrap_or(inner);
    let digits_start = inner
        .iter()
        .rposition(|byte| !byte.is_ascii_digit())
        .map_or(0, |position| position + 1);
    let digits = &inner[digits_start..];
    if digits.is_empty() {
        return None;
    }
    match inner[..digits_start].last() {
        Some(b'{') => {}
        // The digits fill the whole window: a marker whose `{` may have been cut off.
        None if full => return Some(Err(Unframeable)),
        None => return None,
        Some(_) => return None,
    }
    let length = digits.iter().try_fold(0u64, |value, &digit| {
        let value = value * 10 + u64::from(digit - b'0');
        (value <= NUMBER_MAX).then_some(value)
    });
    Some(length.ok_or(Unframeable))
}

#[cfg(test)]
mod tests;
