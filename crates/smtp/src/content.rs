//! Message content as it arrives after DATA or in BDAT chunks: dot-unstuffing, the end of
//! data, and the checks that decide, at the end, whether the message may be delivered.
//!
//! The scanner never stops reading because of a fault: the client is still sending, and the
//! only safe place to answer is after the end of the data (RFC 5321 4.2.5, 3.3). Faults are
//! recorded and turned into one reply by `Content::fault`.

use crate::reply::Reply;

/// Whether the content comes dot-stuffed and ends with `CRLF.CRLF` (DATA) or is counted
/// (BDAT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// RFC 5321 4.1.1.4 and 4.5.2.
    Data,
    /// RFC 3030 2: exact byte counts, no stuffing.
    Chunks,
}

/// What may be in the lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// 7BIT or 8BITMIME: CRLF lines, no NUL, no line longer than `text_line_max`.
    Text,
    /// BINARYMIME (RFC 3030 3): any bytes; only the size is checked.
    Binary,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Faults {
    /// More than `message_bytes_max` bytes.
    too_big: bool,
    /// A CR not followed by LF or a LF not preceded by CR (RFC 5321 2.3.8).
    bare_newline: bool,
    nul: bool,
    long_line: bool,
    /// The server's shared budget for message bytes in memory ran out while this message
    /// arrived; what was held is freed and the rest is only counted.
    no_room: bool,
}

#[derive(Debug)]
pub(crate) struct Content {
    framing: Framing,
    body: Body,
    bytes: Vec<u8>,
    /// Content bytes seen, kept also after `bytes` stopped growing.
    size: u64,
    bytes_max: u64,
    text_line_max: usize,
    /// Bytes of the current line so far, as sent (before unstuffing).
    line_length: usize,
    /// The next byte starts a line (after CRLF, or at the start of DATA).
    at_line_start: bool,
    /// The current line is so far just the stuffing dot; CRLF now ends the data.
    dot_only: bool,
    /// The previous byte was a CR that has not been written yet.
    cr_pending: bool,
    faults: Faults,
}

/// What `Content::ingest` did with the input it was given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ingested {
    pub(crate) consumed: usize,
    /// The input held the final `CRLF.CRLF` (DATA only); `consumed` includes it.
    pub(crate) ended: bool,
}

impl Content {
    pub(crate) fn new(framing: Framing, body: Body, bytes_max: u64, text_line_max: usize) -> Self {
        Content {
            framing,
            body,
            bytes: Vec::new(),
            size: 0,
            bytes_max,
            text_line_max,
            line_length: 0,
            at_line_start: true,
            dot_only: false,
            cr_pending: false,
            faults: Faults::default(),
        }
    }

    pub(crate) fn is_too_big(&self) -> bool {
        self.faults.too_big
    }

    pub(crate) fn has_no_room(&self) -> bool {
        self.faults.no_room
    }

    /// Bytes of content received so far (dot-unstuffed), kept or not.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// What the content's memory will be once `incoming` more bytes are in: unstuffing only
    /// shrinks input, so at most its length more, with the buffer's own growth (doubling, but
    /// never past what `bytes_max` can use) as [`Content::make_room`] performs it.
    pub(crate) fn capacity_for(&self, incoming: usize) -> u64 {
        let len = self.bytes.len();
        let capacity = self.bytes.capacity();
        let needed = len.saturating_add(incoming);
        let grown = if needed <= capacity {
            capacity
        } else {
            let limit = usize::try_from(self.bytes_max)
                .unwrap_or(usize::MAX)
                .saturating_add(2);
            capacity.saturating_mul(2).min(limit).max(needed)
        };
        u64::try_from(grown).unwrap_or(u64::MAX)
    }

    /// Grows the buffer to [`Content::capacity_for`] `incoming`, so ingesting that much
    /// allocates nothing more.
    pub(crate) fn make_room(&mut self, incoming: usize) {
        let target = usize::try_from(self.capacity_for(incoming)).unwrap_or(usize::MAX);
        let additional = target.saturating_sub(self.bytes.len());
        if target > self.bytes.capacity() {
            self.bytes.reserve_exact(additional);
        }
    }

    /// The budget cannot cover this message: free what it holds and keep only counting and
    /// scanning to its end, where it is refused with 452 4.3.1.
    pub(crate) fn shed(&mut self) {
        self.faults.no_room = true;
        self.bytes = Vec::new();
    }

    /// Takes as much of `input` as belongs to the content. For `Framing::Chunks` that is all
    /// of it (the caller passes exactly the chunk's bytes).
    pub(crate) fn ingest(&mut self, input: &[u8]) -> Ingested {
        if self.body == Body::Binary {
            self.push(input);
            return Ingested {
                consumed: input.len(),
                ended: false,
            };
        }
        let mut index = 0;
        while let Some(&byte) = input.get(index) {
            if self.cr_pending {
                self.cr_pending = false;
                if byte == b'\n' {
                    index = index.saturating_add(1);
                    self.line_length = self.line_length.saturating_add(1);
                    // RFC 5321 4.1.1.4: the data ends with CRLF "." CRLF, and only so.
                    if self.dot_only && self.framing == Framing::Data {
                        return Ingested {
                            consumed: index,
                            ended: true,
                        };
                    }
                    self.end_line();
                    continue;
                }
                // RFC 5321 2.3.8: a bare CR. Kept as content, refused at the end; the byte
                // after it is not at a line start, so `\r.\r\n` does not end the data.
                self.faults.bare_newline = true;
                self.dot_only = false;
                self.push(b"\r");
                continue;
            }
            if self.at_line_start {
                self.at_line_start = false;
                if byte == b'.' && self.framing == Framing::Data {
                    // RFC 5321 4.5.2: drop the first dot of a line; `.CRLF` alone ends the data.
                    self.dot_only = true;
                    self.line_length = 1;
                    index = index.saturating_add(1);
                    continue;
                }
            }
            match byte {
                b'\r' => {
                    self.cr_pending = true;
                    self.line_length = self.line_length.saturating_add(1);
                    index = index.saturating_add(1);
                }
                b'\n' => {
                    // RFC 5321 2.3.8: a bare LF does not end a line, so `\n.\n` and `\n.\r\n`
                    // cannot end the data here, whatever a later hop makes of them.
                    self.faults.bare_newline = true;
                    self.take_text(std::slice::from_ref(&byte));
                    index = index.saturating_add(1);
                }
                0 => {
                    self.faults.nul = true;
                    self.take_text(std::slice::from_ref(&byte));
                    index = index.saturating_add(1);
                }
                _ => {
                    // The common case: a run of ordinary bytes, copied at once.
                    let rest = input.get(index..).unwrap_or_default();
                    let run = rest
                        .iter()
                        .position(|&byte| matches!(byte, b'\r' | b'\n' | 0))
                        .unwrap_or(rest.len());
                    self.take_text(rest.get(..run).unwrap_or_default());
                    index = index.saturating_add(run);
                }
            }
        }
        Ingested {
            consumed: input.len(),
            ended: false,
        }
    }

    /// Ends the content of a BDAT LAST: a CR at the very end is bare, and the last line (which
    /// need not end in CRLF) is checked for length.
    pub(crate) fn finish(&mut self) {
        if self.cr_pending {
            self.cr_pending = false;
            self.faults.bare_newline = true;
            self.push(b"\r");
        }
        if self.body == Body::Text && self.line_length > self.text_line_max {
            self.faults.long_line = true;
        }
    }

    /// The reply that refuses this message, if anything is wrong with it. One reply per
    /// message, checked in order of importance.
    pub(crate) fn fault(&self) -> Option<Reply> {
        let faults = self.faults;
        if faults.too_big {
            // RFC 5321 4.5.3.1.9 ("552 Too much mail data"), RFC 1870 6.3.
            Some(too_big(self.bytes_max))
        } else if faults.no_room {
            Some(no_room())
        } else if faults.bare_newline {
            // RFC 5321 2.3.8: refuse rather than repair, the message may be a smuggling
            // attempt; 5.5.2 "syntax error" (RFC 3463).
            Some(Reply::new(
                550,
                (5, 5, 2),
                "Message contains bare CR or LF (RFC 5321 2.3.8)",
            ))
        } else if faults.nul {
            // RFC 5322 2.1 and RFC 6152 2: text is never NUL; 5.6.0 "media error".
            Some(Reply::new(554, (5, 6, 0), "Message contains NUL bytes"))
        } else if faults.long_line {
            // RFC 5321 4.5.3.1.9: "500 Line too long", with the 5.5.6 of command lines.
            Some(Reply::new(
                500,
                (5, 5, 6),
                format!("Message has a line over {} bytes", self.text_line_max),
            ))
        } else {
            None
        }
    }

    /// Counts the fault against `Config::errors_max` (a size overrun or our own lack of room
    /// is not a protocol error).
    pub(crate) fn is_protocol_error(&self) -> bool {
        !self.faults.too_big && !self.faults.no_room && self.fault().is_some()
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Ordinary bytes of the current line.
    fn take_text(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.dot_only = false;
        self.line_length = self.line_length.saturating_add(bytes.len());
        self.push(bytes);
    }

    fn end_line(&mut self) {
        if self.line_length > self.text_line_max {
            self.faults.long_line = true;
        }
        self.push(b"\r\n");
        self.line_length = 0;
        self.at_line_start = true;
        self.dot_only = false;
    }

    fn push(&mut self, bytes: &[u8]) {
        let length = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        self.size = self.size.saturating_add(length);
        if self.size > self.bytes_max {
            // Keep counting and scanning, but free what we held: it will never be delivered.
            if !self.faults.too_big {
                self.faults.too_big = true;
                self.bytes = Vec::new();
            }
            return;
        }
        if self.faults.no_room {
            return;
        }
        self.bytes.extend_from_slice(bytes);
    }
}

/// 452 4.3.1 (RFC 5321 4.2.2 "insufficient system storage", RFC 3463 4.3.1 "mail system
/// full"): temporary, so the sender tries again later.
pub(crate) fn no_room() -> Reply {
    Reply::new(
        452,
        (4, 3, 1),
        "Insufficient system storage, try again later",
    )
}

/// 552 5.3.4 (RFC 1870 6.1 and 6.3, RFC 3463 X.3.4).
pub(crate) fn too_big(bytes_max: u64) -> Reply {
    Reply::new(
        552,
        (5, 3, 4),
        format!("Message size exceeds fixed maximum message size of {bytes_max} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(input: &[u8]) -> (Content, Ingested) {
        let mut content = Content::new(Framing::Data, Body::Text, 1 << 20, 1000);
        let ingested = content.ingest(input);
        (content, ingested)
    }

    #[test]
    fn data_ends_only_at_crlf_dot_crlf() {
        let (content, ingested) = data(b"a\r\n..b\r\n.\r\nNOOP\r\n");
        assert_eq!(
            ingested,
            Ingested {
                consumed: 11,
                ended: true
            }
        );
        assert_eq!(content.fault(), None);
        assert_eq!(content.into_bytes(), b"a\r\n.b\r\n");

        for smuggled in [
            &b"a\n.\nb"[..],
            b"a\r.\rb",
            b"a\n.\r\nb",
            b"a\r\n.\nb",
            b"a\r.\r\nb",
        ] {
            let (content, ingested) = data(smuggled);
            assert!(!ingested.ended, "{smuggled:?}");
            assert!(content.fault().is_some(), "{smuggled:?}");
        }
    }

    #[test]
    fn empty_data_and_split_input() {
        let (content, ingested) = data(b".\r\n");
        assert!(ingested.ended);
        assert!(content.into_bytes().is_empty());

        let mut content = Content::new(Framing::Data, Body::Text, 1 << 20, 1000);
        let input = b"x\r\n.\r\n";
        for (index, byte) in input.iter().enumerate() {
            let ingested = content.ingest(std::slice::from_ref(byte));
            assert_eq!(ingested.ended, index == input.len() - 1);
        }
        assert_eq!(content.into_bytes(), b"x\r\n");
    }

    #[test]
    fn chunks_check_lines_across_chunk_boundaries() {
        let mut content = Content::new(Framing::Chunks, Body::Text, 1 << 20, 1000);
        content.ingest(b"a\r");
        content.ingest(b"\n.\r\nb\r");
        content.finish();
        assert!(content.fault().is_some(), "final bare CR");

        let mut content = Content::new(Framing::Chunks, Body::Binary, 1 << 20, 1000);
        content.ingest(b"\0\r\n\n.\r\n");
        content.finish();
        assert_eq!(content.fault(), None);
        assert_eq!(content.into_bytes(), b"\0\r\n\n.\r\n");
    }
}
