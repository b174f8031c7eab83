//! Splits the input stream into whole commands: a line and, for every literal the line
//! announces, the literal's octets and the line after it (RFC 9051 4.3, 7.5).
//!
//! Every limit is enforced here, before any parsing: line length, literal size (the
//! APPENDLIMIT), the whole command's size, the nesting depth of parenthesised lists, the
//! smaller line and literal sizes allowed before login, and the server's shared budget for
//! literal bytes in memory. A command that breaks one is dropped whole: a synchronising
//! literal is refused by answering instead of sending `+` (the client then abandons the
//! command); a non-synchronising one (LITERAL+, RFC 7888) is read and thrown away, so the
//! stream stays in step, except before login, where reading a stranger's megabytes is not
//! worth staying in step for (RFC 7888 4 lets the server close instead).

use std::sync::Arc;

use limits::{ByteBudget, Reservation};

use crate::config::Config;

/// What the framer found next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A whole command as sent, lines and literals, CRLFs included.
    Command(Vec<u8>),
    /// The client announced a synchronising literal: it waits for a continuation request.
    Continue,
    /// The command broke a limit and was dropped; `tag` is its tag when one was seen.
    Dropped { tag: Option<String>, limit: Limit },
    /// Before login, a non-synchronising literal over the limit: the command is refused and
    /// the connection must be closed (its bytes are on their way and will not be read).
    Closing { tag: Option<String>, limit: Limit },
}

/// Which limit a dropped command broke, with the bound that applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    Line(usize),
    Literal(u64),
    Command(u64),
    Nesting(u32),
    /// The server's shared budget for literal bytes had no room.
    Budget,
}

impl Limit {
    pub(crate) fn text(self) -> String {
        match self {
            Limit::Line(n) => format!("line longer than {n} octets"),
            Limit::Literal(n) => format!("literal larger than {n} octets"),
            Limit::Command(n) => format!("command larger than {n} octets"),
            Limit::Nesting(n) => format!("parenthesised lists nested deeper than {n}"),
            Limit::Budget => "server busy, no room for this literal now; try again later".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Line,
    Literal { left: u64 },
}

/// Bytes kept from the end of a line that is being dropped, enough to see a literal marker.
const TAIL_BYTES: usize = 32;

pub(crate) struct Framer {
    line_bytes_max: usize,
    literal_bytes_max: u64,
    command_bytes_max: u64,
    nesting_depth_max: u32,
    prelogin_line_bytes_max: usize,
    prelogin_literal_bytes_max: u64,
    /// Logged in: the full limits apply, and literals are charged to `inflight`.
    authenticated: bool,
    inflight: Option<Arc<ByteBudget>>,
    /// The current command's share of `inflight`.
    reservation: Option<Reservation>,
    /// The last command handed out still runs; its share goes back at the next `next`.
    handed_out: Option<Reservation>,
    input: Vec<u8>,
    /// How far `input` was searched for a line end without finding one.
    scanned: usize,
    state: State,
    command: Vec<u8>,
    /// Parenthesis depth across the lines of the current command.
    depth: u32,
    /// Set while the current command is being dropped.
    dropping: Option<(Option<String>, Limit)>,
    /// The end of a line too long to keep, while it is dropped.
    tail: Vec<u8>,
    /// Commands finished (handed out or dropped): numbers the one in progress.
    finished: u64,
    /// Literal bytes of the current command received so far.
    literal_received: u64,
}

impl Framer {
    pub(crate) fn new(config: &Config) -> Framer {
        Framer {
            line_bytes_max: config.line_bytes_max,
            literal_bytes_max: config.literal_bytes_max,
            command_bytes_max: config.command_bytes_max,
            nesting_depth_max: config.nesting_depth_max,
            prelogin_line_bytes_max: config.prelogin_line_bytes_max.min(config.line_bytes_max),
            prelogin_literal_bytes_max: config
                .prelogin_literal_bytes_max
                .min(config.literal_bytes_max),
            authenticated: false,
            inflight: config.inflight.clone(),
            reservation: None,
            handed_out: None,
            input: Vec::new(),
            scanned: 0,
            state: State::Line,
            command: Vec::new(),
            depth: 0,
            dropping: None,
            tail: Vec::new(),
            finished: 0,
            literal_received: 0,
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// Bytes buffered and not yet framed.
    pub(crate) fn buffered(&self) -> usize {
        self.input.len()
    }

    /// The line limit in force (smaller before login).
    pub(crate) fn line_max(&self) -> usize {
        if self.authenticated {
            self.line_bytes_max
        } else {
            self.prelogin_line_bytes_max
        }
    }

    fn literal_max(&self) -> u64 {
        if self.authenticated {
            self.literal_bytes_max
        } else {
            self.prelogin_literal_bytes_max
        }
    }

    /// The client logged in: the full limits apply from the next command on.
    pub(crate) fn logged_in(&mut self) {
        self.authenticated = true;
    }

    /// Hands over everything received and not yet cut into a command (a proxy forwards it).
    pub(crate) fn take_unread(&mut self) -> Vec<u8> {
        self.scanned = 0;
        std::mem::take(&mut self.input)
    }

    /// Forgets everything buffered (STARTTLS: nothing sent in plaintext may be read as if
    /// it came over TLS, RFC 9051 6.2.1).
    pub(crate) fn discard_input(&mut self) {
        self.input.clear();
        self.scanned = 0;
    }

    /// True when a command is partly received: its clock is running.
    pub(crate) fn in_command(&self) -> bool {
        !self.input.is_empty()
            || !self.command.is_empty()
            || self.state != State::Line
            || self.dropping.is_some()
    }

    /// Nothing is buffered, partly received or reserved: the framer of a logged-in session
    /// may be made afresh ([`Framer::resume`]) without losing anything.
    pub(crate) fn is_quiescent(&self) -> bool {
        self.authenticated
            && !self.in_command()
            && self.reservation.is_none()
            && self.handed_out.is_none()
            && self.tail.is_empty()
    }

    /// A new framer takes over from a quiescent one of a logged-in session that had finished
    /// `commands` commands (so the next command keeps its number, and its deadline clock).
    pub(crate) fn resume(&mut self, commands: u64) {
        self.authenticated = true;
        self.finished = commands;
    }

    /// Numbers the command in progress (changes when one is finished).
    pub(crate) fn command_number(&self) -> u64 {
        self.finished
    }

    /// Literal bytes of the command in progress received so far.
    pub(crate) fn literal_received(&self) -> u64 {
        self.literal_received
    }

    pub(crate) fn next(&mut self) -> Option<Frame> {
        // The command handed out last time has run by now.
        self.handed_out = None;
        let frame = self.frame();
        if matches!(
            frame,
            Some(Frame::Command(_) | Frame::Dropped { .. } | Frame::Closing { .. })
        ) {
            self.finished = self.finished.wrapping_add(1);
            self.literal_received = 0;
            if matches!(frame, Some(Frame::Command(_))) {
                self.handed_out = self.reservation.take();
            } else {
                self.reservation = None;
            }
        }
        frame
    }

    fn frame(&mut self) -> Option<Frame> {
        loop {
            match self.state {
                State::Literal { left } => {
                    if self.input.is_empty() {
                        return None;
                    }
                    let take = (left.min(self.input.len() as u64)) as usize;
                    self.literal_received = self.literal_received.saturating_add(take as u64);
                    if self.dropping.is_none() {
                        self.command.extend_from_slice(&self.input[..take]);
                    }
                    self.input.drain(..take);
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::Line
                    } else {
                        State::Literal { left }
                    };
                }
                State::Line => {
                    let Some(end) = self.input[self.scanned..].iter().position(|&b| b == b'\n')
                    else {
                        self.scanned = self.input.len();
                        if self.dropping.is_some() || self.input.len() > self.line_max() {
                            if self.dropping.is_none() {
                                let tag = self.current_tag(&self.input);
                                self.drop_command(tag, Limit::Line(self.line_max()));
                            }
                            self.keep_tail_of_input();
                        }
                        return None;
                    };
                    let end = self.scanned + end + 1;
                    self.scanned = 0;
                    let line: Vec<u8> = self.input.drain(..end).collect();
                    if let Some(frame) = self.line(line) {
                        return Some(frame);
                    }
                }
            }
        }
    }

    fn keep_tail_of_input(&mut self) {
        self.tail.extend_from_slice(&self.input);
        if self.tail.len() > TAIL_BYTES {
            self.tail.drain(..self.tail.len() - TAIL_BYTES);
        }
        self.input.clear();
        self.scanned = 0;
    }

    /// The tag of the command being received: from its first line, or from `first` when
    /// nothing of it was kept yet.
    fn current_tag(&self, first: &[u8]) -> Option<String> {
        tag_of(if self.command.is_empty() {
            first
        } else {
            &self.command
        })
    }

    fn drop_command(&mut self, tag: Option<String>, limit: Limit) {
        self.dropping = Some((tag, limit));
        self.command = Vec::new();
        self.depth = 0;
        self.reservation = None;
    }

    fn finish_dropped(&mut self) -> Frame {
        let (tag, limit) = self
            .dropping
            .take()
            .unwrap_or((None, Limit::Line(self.line_max())));
        self.tail.clear();
        Frame::Dropped { tag, limit }
    }

    /// Charges the current command, with a literal of `n` more bytes about to arrive, to the
    /// shared budget (after login only; before it the literal limit is a few KiB). Reserves the
    /// command buffer's room too, so what was charged is all it will take.
    fn charge(&mut self, n: u64) -> bool {
        if !self.authenticated {
            return true;
        }
        let Some(budget) = &self.inflight else {
            return true;
        };
        let reservation = self.reservation.get_or_insert_with(|| budget.reservation());
        let needed = (self.command.len() as u64).saturating_add(n);
        if !reservation.grow_to(limits::rounded_up(needed)) {
            return false;
        }
        self.command
            .reserve_exact(usize::try_from(n).unwrap_or(usize::MAX));
        true
    }

    fn line(&mut self, line: Vec<u8>) -> Option<Frame> {
        if self.dropping.is_some() {
            self.tail.extend_from_slice(&line);
            let marker = literal_marker(&self.tail);
            self.tail.clear();
            return match marker {
                // RFC 7888 3: a non-synchronising literal arrives anyway; read past it.
                Some((n, false)) => {
                    self.state = State::Literal { left: n };
                    None
                }
                _ => Some(self.finish_dropped()),
            };
        }
        if line.len() > self.line_max() {
            let tag = self.current_tag(&line);
            self.drop_command(tag, Limit::Line(self.line_max()));
            self.tail = line;
            return self.line(Vec::new());
        }
        match nesting(&line, self.depth) {
            (depth, deepest) if deepest <= self.nesting_depth_max => self.depth = depth,
            _ => {
                let tag = self.current_tag(&line);
                self.drop_command(tag, Limit::Nesting(self.nesting_depth_max));
                self.tail = line;
                return self.line(Vec::new());
            }
        }
        self.command.extend_from_slice(&line);
        let Some((n, sync)) = literal_marker(&line) else {
            self.depth = 0;
            return Some(Frame::Command(std::mem::take(&mut self.command)));
        };
        let limit = if n > self.literal_max() {
            Some(Limit::Literal(self.literal_max()))
        } else if self.command.len() as u64 + n > self.command_bytes_max {
            Some(Limit::Command(self.command_bytes_max))
        } else if !self.charge(n) {
            Some(Limit::Budget)
        } else {
            None
        };
        if let Some(limit) = limit {
            let tag = tag_of(&self.command);
            if !sync && !self.authenticated {
                // RFC 7888 4: over LITERAL-'s limit; the server may close rather than read.
                self.drop_command(None, limit);
                self.dropping = None;
                self.input.clear();
                self.scanned = 0;
                return Some(Frame::Closing { tag, limit });
            }
            self.drop_command(tag, limit);
            if sync {
                // RFC 9051 7.5: refusing a synchronising literal ends the command.
                return Some(self.finish_dropped());
            }
            self.state = State::Literal { left: n };
            return None;
        }
        self.state = State::Literal { left: n };
        sync.then_some(Frame::Continue)
    }
}

/// `{n}`, `{n+}` or `~{n}` at the end of a line: the literal's length and whether it is
/// synchronising (RFC 9051 4.3, RFC 7888, RFC 3516 literal8).
pub(crate) fn literal_marker(line: &[u8]) -> Option<(u64, bool)> {
    let line = line.strip_suffix(b"\n")?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let inner = line.strip_suffix(b"}")?;
    let open = inner.iter().rposition(|&b| b == b'{')?;
    let mut digits = &inner[open + 1..];
    let sync = match digits.strip_suffix(b"+") {
        Some(d) => {
            digits = d;
            false
        }
        None => true,
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = std::str::from_utf8(digits).ok()?.parse::<u64>().ok()?;
    Some((n, sync))
}

/// The parenthesis depth after `line` (starting from `depth`) and the deepest point reached
/// in it; quoted strings are skipped, literals never reach here.
fn nesting(line: &[u8], mut depth: u32) -> (u32, u32) {
    let mut quoted = false;
    let mut escaped = false;
    let mut deepest = depth;
    for &b in line {
        if quoted {
            match (escaped, b) {
                (false, b'\\') => escaped = true,
                (false, b'"') => quoted = false,
                _ => escaped = false,
            }
            continue;
        }
        match b {
            b'"' => quoted = true,
            b'(' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (depth, deepest)
}

/// The tag of a command line, if it is a valid one (RFC 9051 9: tag = 1*<ASTRING-CHAR
/// except "+">).
pub(crate) fn tag_of(line: &[u8]) -> Option<String> {
    let end = line
        .iter()
        .position(|&b| b == b' ' || b == b'\r' || b == b'\n')
        .unwrap_or(line.len());
    let tag = &line[..end];
    let valid = !tag.is_empty()
        && tag.len() <= 64
        && tag
            .iter()
            .all(|&b| b.is_ascii_graphic() && !b"(){%*\"\\+".contains(&b));
    valid.then(|| String::from_utf8_lossy(tag).into_owned())
}

#[cfg(test)]
mod tests;
