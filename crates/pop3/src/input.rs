//! Line framing of client input, with bounded memory.
//!
//! RFC 1939 3 ends every command with CRLF; a bare LF is accepted too, since the session
//! strips the CR anyway and accepting it costs nothing. A line longer than `line_max` octets
//! (LF included) keeps only its first `line_max` bytes plus the LF, so it is stored as exactly
//! `line_max + 1` bytes: a length no accepted line can have, which marks it as too long without
//! a separate flag. Its other bytes are dropped as they arrive.

/// Unprocessed input: complete lines, then the line still being received (the tail).
#[derive(Debug, Default)]
pub(crate) struct Input {
    bytes: Vec<u8>,
    /// `bytes[..start]` has been handed out already; compacted lazily.
    start: usize,
    /// `bytes[tail..]` is the line still being received (no LF yet).
    tail: usize,
    /// Lines ended (LF received) since the session started: numbers the line in progress.
    ended: u64,
}

/// A line taken from the input, without its line ending.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    Text(Vec<u8>),
    TooLong,
}

impl Input {
    /// Bytes held, complete lines and tail together.
    pub(crate) fn held(&self) -> usize {
        self.bytes.len() - self.start
    }

    /// Whether a complete line waits to be taken.
    pub(crate) fn has_line(&self) -> bool {
        self.start < self.tail
    }

    /// Whether part of a line has arrived (its LF has not).
    pub(crate) fn has_partial(&self) -> bool {
        self.bytes.len() > self.tail
    }

    /// Lines ended so far: the number of the line in progress.
    pub(crate) fn lines_ended(&self) -> u64 {
        self.ended
    }

    /// Drops everything held (after STLS, nothing sent in plaintext may survive).
    /// Everything held, complete lines and tail, taken out.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        let held = self.bytes[self.start..].to_vec();
        self.clear();
        held
    }

    pub(crate) fn clear(&mut self) {
        *self = Input {
            ended: self.ended,
            ..Input::default()
        };
    }

    /// Takes bytes from `data` while fewer than `bound` bytes are held, dropping the excess of
    /// overlong lines; returns how many bytes of `data` were consumed. Less than `data.len()`
    /// means the input is full.
    pub(crate) fn push(&mut self, data: &[u8], line_max: usize, bound: usize) -> usize {
        let mut taken = 0;
        while taken < data.len() {
            let rest = &data[taken..];
            let tail_len = self.bytes.len() - self.tail;
            if tail_len >= line_max {
                // Already too long: drop up to the LF, which is kept to end the line.
                let Some(newline) = rest.iter().position(|&byte| byte == b'\n') else {
                    return data.len();
                };
                taken += newline;
                if self.held() >= bound {
                    return taken;
                }
                self.bytes.push(b'\n');
                taken += 1;
                self.tail = self.bytes.len();
                self.ended = self.ended.wrapping_add(1);
                continue;
            }
            let room = bound.saturating_sub(self.held());
            if room == 0 {
                return taken;
            }
            // The tail may grow by `line_room` more bytes before the line is too long; its LF
            // may be the byte after those.
            let line_room = line_max - tail_len;
            let window = &rest[..rest.len().min(room).min(line_room.saturating_add(1))];
            match window.iter().position(|&byte| byte == b'\n') {
                Some(newline) => {
                    self.bytes.extend_from_slice(&window[..=newline]);
                    self.tail = self.bytes.len();
                    self.ended = self.ended.wrapping_add(1);
                    taken += newline + 1;
                }
                None => {
                    let count = window.len().min(line_room);
                    self.bytes.extend_from_slice(&window[..count]);
                    taken += count;
                }
            }
        }
        taken
    }

    /// The next complete line, with CRLF (or LF) removed.
    pub(crate) fn next_line(&mut self, line_max: usize) -> Option<Line> {
        if !self.has_line() {
            return None;
        }
        let complete = &self.bytes[self.start..self.tail];
        let length = complete.iter().position(|&byte| byte == b'\n')? + 1;
        let line = if length > line_max {
            Line::TooLong
        } else {
            let text = &complete[..length - 1];
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            Line::Text(text.to_vec())
        };
        self.start += length;
        self.compact();
        Some(line)
    }

    /// Moves the unread bytes to the front once the read prefix dominates, so the buffer
    /// stays within its bound without shifting on every line.
    fn compact(&mut self) {
        if self.start == 0 || self.start < self.bytes.len() / 2 {
            return;
        }
        self.bytes.drain(..self.start);
        self.tail -= self.start;
        self.start = 0;
    }
}

#[cfg(test)]
mod tests;
