//! Response framing: splits the byte stream into complete responses before parsing.
//!
//! A response is a line ending in CRLF; if the line ends with a literal announcement
//! `{n}` (RFC 3501 4.3) or `~{n}` (literal8, RFC 3516 4.2) the next `n` octets belong to
//! it as well, and the response goes on with the next line. Framing first means a big
//! literal is never re-parsed while it trickles in, and the size cap is enforced before
//! the bytes arrive.

use crate::Error;

/// Sans-I/O framer: append received bytes with [`Framer::buffer`], take complete
/// responses with [`Framer::next_response`].
#[derive(Debug)]
pub(crate) struct Framer {
    buf: Vec<u8>,
    /// End of the part of `buf` already known to belong to the current response.
    cursor: usize,
    /// Literal octets still to skip before the response continues.
    literal_left: usize,
    /// Where to resume looking for LF (avoids rescanning a long partial line).
    scanned: usize,
    max: usize,
}

impl Framer {
    pub(crate) fn new(max: usize) -> Self {
        Framer {
            buf: Vec::new(),
            cursor: 0,
            literal_left: 0,
            scanned: 0,
            max,
        }
    }

    /// The buffer to read into (append at its end), with room reserved for what the
    /// current response still needs.
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        let want = self.literal_left.clamp(64 * 1024, 16 * 1024 * 1024);
        if self.buf.capacity() - self.buf.len() < 16 * 1024 {
            self.buf.reserve(want);
        }
        &mut self.buf
    }

    /// Bytes received but not yet returned as responses.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete response, if one is buffered.
    pub(crate) fn next_response(&mut self) -> Result<Option<Vec<u8>>, Error> {
        loop {
            if self.literal_left > 0 {
                let have = self.buf.len() - self.cursor;
                if have < self.literal_left {
                    return Ok(None);
                }
                self.cursor += self.literal_left;
                self.scanned = self.cursor;
                self.literal_left = 0;
            }
            let from = self.scanned.max(self.cursor);
            let Some(lf) = memchr::memchr(b'\n', &self.buf[from..]) else {
                self.scanned = self.buf.len();
                if self.buf.len() > self.max {
                    return Err(Error::TooLarge(format!(
                        "a response line exceeds response_bytes_max = {} bytes",
                        self.max
                    )));
                }
                return Ok(None);
            };
            let line_end = from + lf + 1;
            if line_end > self.max {
                return Err(Error::TooLarge(format!(
                    "a response exceeds response_bytes_max = {} bytes",
                    self.max
                )));
            }
            match literal_announcement(&self.buf[self.cursor..line_end]) {
                Some(n) => {
                    if line_end.saturating_add(n) > self.max {
                        return Err(Error::TooLarge(format!(
                            "the server announced a {n}-byte literal; the response would exceed response_bytes_max = {} bytes",
                            self.max
                        )));
                    }
                    self.cursor = line_end;
                    self.scanned = line_end;
                    self.literal_left = n;
                }
                None => {
                    let rest = self.buf.split_off(line_end);
                    let response = std::mem::replace(&mut self.buf, rest);
                    self.cursor = 0;
                    self.scanned = 0;
                    return Ok(Some(response));
                }
            }
        }
    }
}

/// The length `n` if the line ends with `{n}` / `{n+}` / `~{n}` then CRLF (or LF).
pub(crate) fn literal_announcement(line: &[u8]) -> Option<usize> {
    let line = line.strip_suffix(b"\n")?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_suffix(b"}")?;
    let open = line.iter().rposition(|&b| b == b'{')?;
    let digits = &line[open + 1..];
    let digits = digits.strip_suffix(b"+").unwrap_or(digits);
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(framer: &mut Framer, bytes: &[u8]) -> Vec<Vec<u8>> {
        framer.buffer().extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(r) = framer.next_response().unwrap() {
            out.push(r);
        }
        out
    }

    #[test]
    fn lines_and_literals_byte_by_byte() {
        let stream: &[u8] = b"* OK hi\r\n* 1 FETCH (UID 4 BODY[] {5}\r\na\r\n}\n BINARY[1] ~{3}\r\n\0{2} FLAGS ())\r\na1 OK done\r\n";
        let mut framer = Framer::new(1 << 20);
        let mut got = Vec::new();
        for b in stream {
            got.extend(feed(&mut framer, std::slice::from_ref(b)));
        }
        assert_eq!(
            got,
            vec![
                b"* OK hi\r\n".to_vec(),
                b"* 1 FETCH (UID 4 BODY[] {5}\r\na\r\n}\n BINARY[1] ~{3}\r\n\0{2} FLAGS ())\r\n"
                    .to_vec(),
                b"a1 OK done\r\n".to_vec(),
            ]
        );
        assert_eq!(framer.pending(), 0);
    }

    #[test]
    fn all_at_once() {
        let mut framer = Framer::new(1 << 20);
        let got = feed(
            &mut framer,
            b"* 2 EXISTS\r\n* 1 FETCH (BODY[] {0}\r\n)\r\n+ go\r\nx",
        );
        assert_eq!(got.len(), 3);
        assert_eq!(got[2], b"+ go\r\n");
        assert_eq!(framer.pending(), 1);
    }

    #[test]
    fn too_large_literal_is_refused_before_data() {
        let mut framer = Framer::new(100);
        framer
            .buffer()
            .extend_from_slice(b"* 1 FETCH (BODY[] {1000}\r\n");
        assert!(matches!(framer.next_response(), Err(Error::TooLarge(_))));
    }

    #[test]
    fn too_long_line() {
        let mut framer = Framer::new(100);
        framer.buffer().extend_from_slice(&[b'a'; 200]);
        assert!(matches!(framer.next_response(), Err(Error::TooLarge(_))));
    }

    #[test]
    fn announcements() {
        assert_eq!(literal_announcement(b"x {12}\r\n"), Some(12));
        assert_eq!(literal_announcement(b"x ~{12}\r\n"), Some(12));
        assert_eq!(literal_announcement(b"x {12+}\r\n"), Some(12));
        assert_eq!(literal_announcement(b"x {}\r\n"), None);
        assert_eq!(literal_announcement(b"x {1a}\r\n"), None);
        assert_eq!(literal_announcement(b"x 12}\r\n"), None);
    }
}
