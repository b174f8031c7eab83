//! Reply encoding: status lines, multi-line responses with byte-stuffing, and message bodies.

use crate::config::SHELL_TEXT_MAX;

/// `+OK text` (RFC 1939 3: "+OK" followed by optional text on one line).
pub(crate) fn ok(text: &str) -> Vec<u8> {
    status(b"+OK", text)
}

/// `-ERR text`.
pub(crate) fn err(text: &str) -> Vec<u8> {
    status(b"-ERR", text)
}

fn status(indicator: &[u8], text: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(indicator.len() + text.len() + 3);
    line.extend_from_slice(indicator);
    if !text.is_empty() {
        line.push(b' ');
        line.extend_from_slice(text.as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Text from outside the protocol (the shell's errors, the configured host name) made safe for
/// one reply line: control characters become spaces, and it is cut to `SHELL_TEXT_MAX`
/// characters, so it can neither end the line early nor inject a reply.
pub(crate) fn one_line(text: &str, fallback: &str) -> String {
    let cleaned: String = text
        .chars()
        .take(SHELL_TEXT_MAX)
        .map(|character| {
            if character.is_control() {
                ' '
            } else {
                character
            }
        })
        .collect();
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        fallback.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// "1 message", "2 messages": for the human-readable part of replies.
pub(crate) fn messages(count: usize) -> String {
    if count == 1 {
        "1 message".to_owned()
    } else {
        format!("{count} messages")
    }
}

/// A multi-line response (RFC 1939 3): status line, byte-stuffed lines, then ".".
pub(crate) struct MultiLine {
    bytes: Vec<u8>,
}

impl MultiLine {
    pub(crate) fn new(status: &str) -> MultiLine {
        MultiLine { bytes: ok(status) }
    }

    pub(crate) fn reserve(&mut self, additional: usize) {
        self.bytes.reserve(additional);
    }

    /// Appends one line (without its line ending). RFC 1939 3: a line that starts with the
    /// termination octet gets another one in front, so it cannot end the response.
    pub(crate) fn line(&mut self, line: &[u8]) {
        if line.first() == Some(&b'.') {
            self.bytes.push(b'.');
        }
        self.bytes.extend_from_slice(line);
        self.bytes.extend_from_slice(b"\r\n");
    }

    /// RFC 1939 3: the response ends with "." CRLF.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(b".\r\n");
        self.bytes
    }
}

/// A message as a multi-line response: all of it, or for `TOP msg n` (RFC 1939 7) the header,
/// the blank line after it, and at most `top_lines` lines of body.
///
/// Lines end at LF; a CR before it is dropped and CRLF written back, so CRLF content passes
/// through unchanged, a bare LF becomes CRLF (a lenient client must not see a bare-LF "." as the
/// end), and a last line without a line ending gets one before the final ".".
pub(crate) fn message(status: &str, content: &[u8], top_lines: Option<u32>) -> Vec<u8> {
    let mut reply = MultiLine::new(status);
    reply.reserve(content.len() + content.len() / 64 + 8);
    let mut in_header = true;
    let mut body_lines_left = top_lines;
    for line in lines(content) {
        if !in_header {
            match &mut body_lines_left {
                Some(0) => break,
                Some(left) => *left -= 1,
                None => {}
            }
        }
        reply.line(line);
        // RFC 5322 2.1: the header ends at the first empty line.
        if in_header && line.is_empty() {
            in_header = false;
        }
    }
    reply.finish()
}

/// The lines of `content` without line endings; a last line without LF is a line too.
fn lines(content: &[u8]) -> impl Iterator<Item = &[u8]> {
    let empty = content.is_empty();
    let content = content.strip_suffix(b"\n").unwrap_or(content);
    content
        .split(|&byte| byte == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(move |_| !empty)
}

#[cfg(test)]
mod tests;
