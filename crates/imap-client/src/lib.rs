//! Async IMAP client for the mail file system: one [`Client`] is one connection that
//! runs one command at a time (`&mut self`); callers pool connections.
//!
//! Protocol: IMAP4rev1 (RFC 3501) with LITERAL+/LITERAL- (RFC 7888), BINARY (RFC 3516),
//! MULTIAPPEND (RFC 3502), UIDPLUS (RFC 4315), CONDSTORE (RFC 7162), QUOTA (RFC 2087 /
//! RFC 9208), APPENDLIMIT (RFC 7889) and ESEARCH replies (RFC 4731).
//!
//! Responses are framed by the client itself (line + literals, capped at
//! [`Config::response_bytes_max`]) and then parsed with imap-codec; where imap-codec
//! rejects what servers really send (a partial `BINARY[1]<o> ~{n}`, NUL in a `{n}`
//! literal, ESEARCH, multi-UID APPENDUID codes) a small own parser takes over.

mod client;
mod error;
mod framer;
mod parse;
pub mod seqset;

pub use client::{Capabilities, Client, Config, Fetched, Listed, Mailbox, Tls};
pub use error::Error;

/// Where a message's body starts: after the empty line that ends its header
/// (RFC 5322 2.1); the message's length if it has no body.
pub fn body_start(message: &[u8]) -> usize {
    match memchr::memmem::find(message, b"\r\n\r\n") {
        Some(at) => at + 4,
        None => message.len(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_body_starts_after_the_first_empty_line() {
        assert_eq!(
            super::body_start(b"A: b\r\nC: d\r\n\r\nbody\r\n\r\nmore"),
            14
        );
        assert_eq!(super::body_start(b"A: b\r\n\r\n"), 8);
        assert_eq!(super::body_start(b"A: b\r\n"), 6);
    }
}
