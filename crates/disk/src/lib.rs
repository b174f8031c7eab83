//! The storage engine's I/O seam.
//!
//! The queue and the mailbox store never call the file system directly: they go through
//! [`Disk`] and [`File`], so tests can replace the real disk with [`SimDisk`], which keeps
//! every write that was not followed by a sync in a volatile layer and, on [`SimDisk::crash`],
//! keeps a random subset of the dirty 512-byte sectors, the way a power cut does.
//!
//! The trait is deliberately small: positional reads and writes, length, preallocation and
//! `fdatasync` on files; create, list, rename, remove and directory sync on names. Anything an
//! engine needs beyond this is a sign it is leaning on the file system for something the
//! engine should own.
//!
//! [`Findings`] is here too: the part of an offline check's report both engines share.

mod findings;
mod real;
mod sim;
mod space;

use std::io;
use std::path::Path;
use std::sync::Arc;

pub use findings::Findings;
pub use real::RealDisk;
pub use sim::{CrashReport, SimDisk, SimStats};
pub use space::{Shortage, SpaceReserve};

/// The unit a disk writes atomically. A crash keeps or loses whole sectors, never part of one.
pub const SECTOR_BYTES: u64 = 512;

/// A named collection of files: the part of a file system the engines use.
pub trait Disk: Send + Sync + 'static {
    /// Opens `path`; with `create`, makes an empty file if there is none. A new name is
    /// durable only after [`Disk::sync_dir`] on its parent.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn File>>;
    /// Creates a directory and its parents (durable at once: directories are set up before
    /// any data is written, and the engines sync them once).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names (not paths) of the files directly inside `dir`, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> bool;
    /// Atomically replaces `to` with `from`; durable after [`Disk::sync_dir`].
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals inside `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Bytes an unprivileged writer can still allocate on the file system holding `dir`
    /// (`statvfs`'s `f_bavail × f_frsize`): what the free-space reserve is checked against.
    fn available_bytes(&self, dir: &Path) -> io::Result<u64>;
}

/// True for the errors that mean "no room": `ENOSPC` and a quota (`EDQUOT`). They are
/// ordinary conditions (space comes back), unlike other I/O failures, which the engines
/// treat as a reason to stop and recover.
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// What [`File::write_zeros`] writes per call.
pub const ZERO_CHUNK_BYTES: u64 = 1 << 20;

/// Calls `write(zeros, at)` over `[offset, offset + len)` in chunks of at most `zeros.len()`
/// (not empty).
fn zeros_in_chunks(
    zeros: &[u8],
    offset: u64,
    len: u64,
    mut write: impl FnMut(&[u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut at = offset;
    while at < offset + len {
        let n = (zeros.len() as u64).min(offset + len - at) as usize;
        write(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// An open file. All I/O is positional, so one handle serves many threads.
// `len` is a fallible query of the file, not a collection size; `is_empty` would mean nothing.
#[allow(clippy::len_without_is_empty)]
pub trait File: Send + Sync {
    /// Reads at most `buf.len()` bytes at `offset`; fewer only at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, growing the file if needed. Volatile until
    /// [`File::sync_data`].
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros). Volatile until [`File::sync_data`].
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reserves real blocks for `[0, len)` and extends the file to `len` if shorter
    /// (`fallocate` mode 0), so later writes there need no allocation.
    fn allocate(&self, len: u64) -> io::Result<()>;
    /// `fdatasync`: every write and length change before it is durable when it returns.
    fn sync_data(&self) -> io::Result<()>;

    /// Writes zeros over `[offset, offset + len)`, volatile until [`File::sync_data`] like
    /// any write. The real disk writes them past the page cache where it can (see its
    /// implementation); this default copies them through it.
    fn write_zeros(&self, offset: u64, len: u64) -> io::Result<()> {
        let zeros = vec![0u8; ZERO_CHUNK_BYTES.min(len).max(1) as usize];
        zeros_in_chunks(&zeros, offset, len, |zeros, at| {
            self.write_all_at(zeros, at)
        })
    }

    /// Reads exactly `buf.len()` bytes or fails with `UnexpectedEof`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "short read: wanted {} bytes at {offset}, file ended",
                        buf.len()
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
