//! The free-space reserve: the room kept free on the data directory's file system so a full
//! disk is refused at the door (SMTP `452` at MAIL, IMAP `NO` to APPEND, delivery paused)
//! instead of failing a write half-way, and so open, recovery, checkpoints and fsck always
//! find the little space they need (docs/limits.md, `disk_reserve_bytes`).
//!
//! Asking is cheap: the file system is asked (`statvfs`) at most every
//! [`SpaceReserve::RECHECK_AFTER`] (10 ms), so a session may ask on every command, and space
//! coming back is seen within that time with nothing else to do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Disk;

/// Not enough free space: what is available and what the reserve (plus the request) needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shortage {
    pub available: u64,
    pub needed: u64,
}

impl std::fmt::Display for Shortage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes free on the data directory's file system, {} needed (disk_reserve_bytes)",
            self.available, self.needed
        )
    }
}

/// The reserve on one directory's file system, shared by everything that writes there.
pub struct SpaceReserve {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    reserve_bytes: AtomicU64,
    /// The last answer of the file system and when it was given.
    last: Mutex<Option<(Instant, u64)>>,
}

impl SpaceReserve {
    /// How old an answer of the file system may be. Short: mail arriving at 100 MB/s gets
    /// 1 MB past a stale answer (the reserve holds that many times over), and `statvfs`
    /// costs about a microsecond, so even a client hammering MAIL makes it ask at most
    /// 100 times a second. (At 250 ms, a test's single session filled a 4 MiB reserve
    /// between two answers and was refused after DATA instead of at MAIL.)
    pub const RECHECK_AFTER: Duration = Duration::from_millis(10);

    pub fn new(disk: Arc<dyn Disk>, dir: &Path, reserve_bytes: u64) -> Arc<SpaceReserve> {
        Arc::new(SpaceReserve {
            disk,
            dir: dir.to_path_buf(),
            reserve_bytes: AtomicU64::new(reserve_bytes),
            last: Mutex::new(None),
        })
    }

    /// A new reserve (a configuration reload); the next check uses it.
    pub fn set_reserve_bytes(&self, bytes: u64) {
        self.reserve_bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn reserve_bytes(&self) -> u64 {
        self.reserve_bytes.load(Ordering::Relaxed)
    }

    /// Bytes available now (at most `RECHECK_AFTER` old); `None` if the file system cannot
    /// say, which never refuses anything: a failing `statvfs` is no proof of a full disk.
    pub fn available(&self) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, bytes)) = *last
            && at.elapsed() < Self::RECHECK_AFTER
        {
            return Some(bytes);
        }
        let bytes = self.disk.available_bytes(&self.dir).ok()?;
        *last = Some((Instant::now(), bytes));
        Some(bytes)
    }

    /// Whether `more` bytes can be written and still leave the reserve free.
    pub fn check(&self, more: u64) -> Result<(), Shortage> {
        let Some(available) = self.available() else {
            return Ok(());
        };
        let needed = self.reserve_bytes().saturating_add(more);
        if available >= needed {
            Ok(())
        } else {
            Err(Shortage { available, needed })
        }
    }

    /// Forgets the cached answer: the next check asks the file system (after freeing space,
    /// or in tests).
    pub fn refresh(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimDisk;

    #[test]
    fn refuses_below_the_reserve_and_recovers_when_space_comes_back() {
        let disk = SimDisk::new();
        disk.set_capacity(Some(10_000));
        let reserve = SpaceReserve::new(Arc::new(disk.clone()), Path::new("/d"), 4_000);
        assert_eq!(reserve.check(0), Ok(()));
        assert_eq!(reserve.check(6_000), Ok(()));
        assert_eq!(
            reserve.check(6_001),
            Err(Shortage {
                available: 10_000,
                needed: 10_001
            })
        );
        let f = disk.open(Path::new("/d/f"), true).unwrap();
        f.allocate(7_000).unwrap();
        reserve.refresh();
        assert!(reserve.check(0).is_err());
        f.set_len(0).unwrap();
        reserve.refresh();
        assert_eq!(reserve.check(0), Ok(()));
    }

    #[test]
    fn an_unlimited_disk_refuses_nothing() {
        let disk = SimDisk::new();
        let reserve = SpaceReserve::new(Arc::new(disk), Path::new("/d"), u64::MAX);
        assert_eq!(reserve.available(), Some(u64::MAX));
        assert_eq!(reserve.check(0), Ok(()));
    }
}
