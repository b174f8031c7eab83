//! One process per data directory. The queue and the store assume a single writer; a second
//! process opening them (a CLI command while the server runs, a second server) would corrupt
//! both. Every process that opens the engines first takes an exclusive `flock` on
//! `<data_dir>/lock`; the kernel releases it when the process exits, however it exits.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// Held for as long as the engines are open.
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Takes the lock without waiting; a running server (or another command) holding it is a
    /// clear error, not a wait. A data directory that does not exist yet has nothing to
    /// protect: `None`, and the caller's own "not found" error follows.
    pub fn acquire(data_dir: &Path) -> Result<Option<DataDirLock>> {
        if !data_dir.is_dir() {
            return Ok(None);
        }
        let path = data_dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(DataDirLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => bail!(
                "data directory {} is in use by another mailstow process (is `mailstow serve` running?)",
                data_dir.display()
            ),
            Err(e) => Err(e).with_context(|| format!("locking {}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            DataDirLock::acquire(&dir.path().join("missing"))
                .unwrap()
                .is_none()
        );
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let second = DataDirLock::acquire(dir.path()).err().unwrap();
        assert!(
            second
                .to_string()
                .contains("in use by another mailstow process")
        );
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }
}
