//! The read-only `/.snapshots/NAME/...` view (docs/mailfs.md 8): each snapshot pins one
//! version of every directory, so its tree is read from those versions.
//!
//! Inode numbers: object ids are below 2^47, so a snapshot's copy of object `id` is
//! `SNAP_BIT | n << 47 | id` with `n` the snapshot's 1-based number; `.snapshots` itself is
//! inode 2.

use std::collections::HashMap;
use std::sync::Arc;

use crate::FsError;
use crate::fs::{DirState, Fs, INODES, ROOT, Stat, inode_name};
use crate::locking::MutexExt;
use crate::meta::{Entry, Kind};

pub const SNAPSHOTS_NAME: &[u8] = b".snapshots";
pub const SNAPSHOTS_INO: u64 = 2;
const SNAP_BIT: u64 = 1 << 63;
const ID_BITS: u64 = 47;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

#[derive(Default)]
pub(crate) struct SnapState {
    dirs: HashMap<(u16, u64), Arc<DirState>>,
    parent_of: HashMap<(u16, u64), (u64, Vec<u8>)>,
}

/// `.snapshots` or anything under it.
pub fn is_view(ino: u64) -> bool {
    ino == SNAPSHOTS_INO || is_snap(ino)
}

pub fn is_snap(ino: u64) -> bool {
    ino & SNAP_BIT != 0
}

/// The object a snapshot inode shows (the inode itself otherwise).
pub fn object_of(ino: u64) -> u64 {
    if is_snap(ino) { ino & ID_MASK } else { ino }
}

fn snap_of(ino: u64) -> u16 {
    ((ino >> ID_BITS) & 0xffff) as u16
}

fn snap_ino(n: u16, id: u64) -> u64 {
    SNAP_BIT | (u64::from(n) << ID_BITS) | (id & ID_MASK)
}

/// Every write under the view is refused.
pub fn refuse(ino: u64) -> Result<(), FsError> {
    if is_view(ino) {
        Err(FsError::ReadOnly)
    } else {
        Ok(())
    }
}

impl Fs {
    fn snap_dir(&self, n: u16, id: u64) -> Result<Arc<DirState>, FsError> {
        if let Some(d) = self.snapview.lock_or_panic().dirs.get(&(n, id)) {
            return Ok(d.clone());
        }
        let snaps = self.snapshots();
        let snap = snaps
            .get(usize::from(n).wrapping_sub(1))
            .ok_or(FsError::NotFound)?;
        let version = snap
            .dirs
            .binary_search_by_key(&id, |(d, _)| *d)
            .map(|i| snap.dirs[i].1)
            .map_err(|_| FsError::NotFound)?;
        let d = Arc::new(self.read_dir_version(id, version)?);
        let mut st = self.snapview.lock_or_panic();
        // A link's object is its entry in the snapshot's inode directory.
        for (name, e) in d.entries.iter().filter(|(_, e)| !e.link) {
            st.parent_of.insert((n, e.id), (id, name.clone()));
        }
        st.dirs.insert((n, id), d.clone());
        Ok(d)
    }

    fn snap_dir_stat(&self, n: u16, id: u64) -> Result<Stat, FsError> {
        let d = self.snap_dir(n, id)?;
        let subdirs = d.entries.values().filter(|e| e.kind == Kind::Dir).count() as u32;
        let mut attr = d.attr;
        attr.mode &= !0o222;
        Ok(Stat {
            ino: snap_ino(n, id),
            kind: Kind::Dir,
            size: 4096,
            attr,
            nlink: 2 + subdirs,
            rdev: 0,
        })
    }

    /// The entry a snapshot inode stands for (a file, symlink or directory entry).
    pub(crate) fn snap_entry(&self, ino: u64) -> Result<Entry, FsError> {
        let (n, id) = (snap_of(ino), object_of(ino));
        let parent = self
            .snapview
            .lock_or_panic()
            .parent_of
            .get(&(n, id))
            .cloned();
        let (dir, name) = parent.ok_or(FsError::NotFound)?;
        let e = self
            .snap_dir(n, dir)?
            .entries
            .get(&name)
            .cloned()
            .ok_or(FsError::NotFound)?;
        self.snap_resolve(n, e)
    }

    /// A link entry's inode entry in snapshot `n` (any other entry as it is).
    fn snap_resolve(&self, n: u16, e: Entry) -> Result<Entry, FsError> {
        if !e.link {
            return Ok(e);
        }
        self.snap_dir(n, INODES)?
            .entries
            .get(&inode_name(e.id))
            .cloned()
            .ok_or_else(|| FsError::Corrupt(format!("link to {:x}: no inode", e.id)))
    }

    fn snap_stat_entry(&self, n: u16, e: &Entry) -> Result<Stat, FsError> {
        if e.kind == Kind::Dir {
            return self.snap_dir_stat(n, e.id);
        }
        if e.link {
            let inode = self.snap_resolve(n, e.clone())?;
            return self.snap_stat_entry(n, &inode);
        }
        let mut attr = e.attr.unwrap_or(crate::meta::Attr::new(0o444, 0, 0, 0));
        attr.mode &= !0o222;
        Ok(Stat {
            ino: snap_ino(n, e.id),
            kind: e.kind,
            size: e.size,
            attr,
            nlink: e.links.max(1),
            rdev: e.rdev,
        })
    }

    pub(crate) fn snap_getattr(&self, ino: u64) -> Result<Stat, FsError> {
        if ino == SNAPSHOTS_INO {
            let root = self.getattr(ROOT)?;
            let mut attr = root.attr;
            attr.mode = 0o555;
            return Ok(Stat {
                ino,
                kind: Kind::Dir,
                size: 4096,
                attr,
                nlink: 2 + self.snapshots().len() as u32,
                rdev: 0,
            });
        }
        let (n, id) = (snap_of(ino), object_of(ino));
        if id == ROOT {
            return self.snap_dir_stat(n, ROOT);
        }
        let e = self.snap_entry(ino)?;
        self.snap_stat_entry(n, &e)
    }

    pub(crate) fn snap_lookup(&self, parent: u64, name: &[u8]) -> Result<Stat, FsError> {
        if parent == ROOT {
            if self.snapshots().is_empty() {
                return Err(FsError::NotFound);
            }
            return self.snap_getattr(SNAPSHOTS_INO);
        }
        if parent == SNAPSHOTS_INO {
            let n = self
                .snapshots()
                .iter()
                .position(|s| s.name.as_bytes() == name)
                .ok_or(FsError::NotFound)?;
            return self.snap_dir_stat((n + 1) as u16, ROOT);
        }
        let n = snap_of(parent);
        let d = self.snap_dir(n, object_of(parent))?;
        let e = d.entries.get(name).cloned().ok_or(FsError::NotFound)?;
        self.snap_stat_entry(n, &e)
    }

    pub(crate) fn snap_readdir(&self, ino: u64) -> Result<Vec<(u64, Kind, Vec<u8>)>, FsError> {
        if ino == SNAPSHOTS_INO {
            return Ok(self
                .snapshots()
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        snap_ino((i + 1) as u16, ROOT),
                        Kind::Dir,
                        s.name.as_bytes().to_vec(),
                    )
                })
                .collect());
        }
        let n = snap_of(ino);
        let d = self.snap_dir(n, object_of(ino))?;
        Ok(d.entries
            .values()
            .map(|e| (snap_ino(n, e.id), e.kind, e.name.clone()))
            .collect())
    }

    pub(crate) fn snap_parent_of_dir(&self, ino: u64) -> Result<u64, FsError> {
        if ino == SNAPSHOTS_INO {
            return Ok(ROOT);
        }
        let (n, id) = (snap_of(ino), object_of(ino));
        if id == ROOT {
            return Ok(SNAPSHOTS_INO);
        }
        Ok(snap_ino(n, self.snap_dir(n, id)?.parent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_round_trip() {
        let ino = snap_ino(3, 0x7fff_1234_5678);
        assert!(is_snap(ino) && is_view(ino));
        assert_eq!(snap_of(ino), 3);
        assert_eq!(object_of(ino), 0x7fff_1234_5678);
        assert!(!is_snap(ROOT) && !is_view(ROOT) && is_view(SNAPSHOTS_INO));
    }
}
