//! What the fuzz targets share: how an input is cut into flights and feeds, and the checks
//! every line-based protocol's output must pass.
//!
//! Targets take raw bytes rather than `arbitrary` structures wherever they can, so the seed
//! corpora are plain client transcripts and messages that a person can read and edit.

pub mod smtp_shell;

/// Separates the client's flights in a session target's input: what it sends before it waits
/// for an answer. Only STARTTLS makes flights matter (input after the STARTTLS line in the
/// same flight is discarded, RFC 3207 4.2), so everything else is split-independent.
pub const FLIGHT_MARK: &[u8] = b"\xff\xfe";

/// The input cut at every [`FLIGHT_MARK`].
pub fn flights(input: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = input;
    while let Some(at) = rest
        .windows(FLIGHT_MARK.len())
        .position(|w| w == FLIGHT_MARK)
    {
        out.push(&rest[..at]);
        rest = &rest[at + FLIGHT_MARK.len()..];
    }
    out.push(rest);
    out
}

/// How a flight is handed to `feed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The whole flight in one call.
    Whole,
    /// One byte per call.
    Bytes,
    /// Calls of this many bytes (the fuzzer chooses).
    Chunks(usize),
}

impl Split {
    pub fn pieces(self, flight: &[u8]) -> Vec<&[u8]> {
        match self {
            Split::Whole => vec![flight],
            Split::Bytes => flight.chunks(1).collect(),
            Split::Chunks(n) => flight.chunks(n.max(1)).collect(),
        }
    }
}

/// Panics unless `bytes` is a sequence of whole lines, each ending in CRLF, with no CR or LF
/// anywhere else (no bare line end could inject or cut a reply).
pub fn assert_crlf_lines(what: &str, bytes: &[u8]) {
    assert!(
        bytes.ends_with(b"\r\n"),
        "{what}: output does not end in CRLF: {:?}",
        String::from_utf8_lossy(bytes)
    );
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\r' => assert_eq!(bytes.get(i + 1), Some(&b'\n'), "{what}: bare CR at {i}"),
            b'\n' => assert!(i > 0 && bytes[i - 1] == b'\r', "{what}: bare LF at {i}"),
            _ => {}
        }
    }
}

/// Iterates over the CRLF-terminated lines of `bytes` (checked by [`assert_crlf_lines`]).
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}
