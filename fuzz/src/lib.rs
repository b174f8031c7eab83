//! What the fuzz targets share: how an input is cut into flights and feeds, and the checks
//! every line-based protocol's output must pass.
//!
//! Targets take raw bytes rather than `arbitrary` structures wherever they can, so the seed
//! corpora are plain client transcripts and messages that a person can read and edit.

pub mod smtp_shell;

/// Set `MAILSTOW_FUZZ_DECODERS=1` to keep the targets that also build whole files or stores
/// (`queue_record`, `store_journal`, `mailfs_envelope`) to their decoder modes: thousands of
/// times faster per input, for long runs of the decoders alone.
pub fn decoders_only() -> bool {
    static ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONLY.get_or_init(|| std::env::var_os("MAILSTOW_FUZZ_DECODERS").is_some_and(|v| v == "1"))
}

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

/// A `disk::Disk` that refuses to let any file grow past `bytes_max`, as a real disk that is
/// full (or a file system's size limit) does, with an I/O error: a damaged index may name data
/// far past the end of the volume, and the store then grows the volume to it, which on the
/// in-memory `SimDisk` would be an out-of-memory abort rather than the error a real disk gives.
pub struct CappedDisk {
    pub inner: disk::SimDisk,
    pub bytes_max: u64,
}

struct CappedFile {
    inner: std::sync::Arc<dyn disk::File>,
    bytes_max: u64,
}

fn too_large() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::StorageFull, "fuzz disk: file too large")
}

impl disk::Disk for CappedDisk {
    fn open(
        &self,
        path: &std::path::Path,
        create: bool,
    ) -> std::io::Result<std::sync::Arc<dyn disk::File>> {
        let inner = self.inner.open(path, create)?;
        Ok(std::sync::Arc::new(CappedFile {
            inner,
            bytes_max: self.bytes_max,
        }))
    }
    fn create_dir_all(&self, path: &std::path::Path) -> std::io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list(&self, dir: &std::path::Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &std::path::Path) -> bool {
        self.inner.exists(path)
    }
    fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &std::path::Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn available_bytes(&self, dir: &std::path::Path) -> std::io::Result<u64> {
        self.inner.available_bytes(dir)
    }
}

impl CappedFile {
    fn check(&self, end: Option<u64>) -> std::io::Result<()> {
        match end {
            Some(end) if end <= self.bytes_max => Ok(()),
            _ => Err(too_large()),
        }
    }
}

impl disk::File for CappedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.check(offset.checked_add(buf.len() as u64))?;
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.check(Some(len))?;
        self.inner.set_len(len)
    }
    fn allocate(&self, len: u64) -> std::io::Result<()> {
        self.check(Some(len))?;
        self.inner.allocate(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.inner.sync_data()
    }
    fn write_zeros(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.check(offset.checked_add(len))?;
        self.inner.write_zeros(offset, len)
    }
}
